// Type-checked against the packed package's declarations.
import { Client, type Action, type CheckResult, type RememberOptions, ApiError } from 'actiongate';
import { AgentsGate } from 'actiongate/openai-agents';
import { MastraGate } from 'actiongate/mastra';

const c: Client = new Client({ url: 'http://127.0.0.1:9', key: 'agk_x' });
async function use(): Promise<string> {
  const d: CheckResult = await c.check('bash', 'ls');
  const a: Action = await c.request('bash', 'ls', { wait: 1, reason: 'r' });
  // An operator's approval: remembered for a task or a number of uses, or edited first.
  const r: RememberOptions = { expires: '1h', session: 'task', uses: 3 };
  const ok: Action = await c.approve(a.id, { remember: r, note: 'n' });
  const edited: Action = await c.approve(a.id, { detail: 'ls -l', seen: 'asked' });
  await c.approve(a.id, { params: { path: 'notes/a.md' } });
  await c.grant({ tool: 'bash', pattern: 'ls', session: 'task', uses: 1 });
  void ok;
  void edited;
  const g = new AgentsGate(c);
  const m = new MastraGate(c);
  void g;
  void m;
  return `${d.result} ${a.status} ${ApiError.name}`;
}
void use;
