// Type-checked against the packed package's declarations.
import { Client, type Action, type CheckResult, ApiError } from 'actiongate';
import { AgentsGate } from 'actiongate/openai-agents';
import { MastraGate } from 'actiongate/mastra';

const c: Client = new Client({ url: 'http://127.0.0.1:9', key: 'agk_x' });
async function use(): Promise<string> {
  const d: CheckResult = await c.check('bash', 'ls');
  const a: Action = await c.request('bash', 'ls', { wait: 1, reason: 'r' });
  const g = new AgentsGate(c);
  const m = new MastraGate(c);
  void g;
  void m;
  return `${d.result} ${a.status} ${ApiError.name}`;
}
void use;
