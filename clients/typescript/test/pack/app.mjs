// The packed package, installed in a fresh folder, imported as a user would.
import { Client, ApiError, Denied, Unreachable } from 'actiongate';
import { toolApproval } from 'actiongate/ai-sdk';
import { canUseTool } from 'actiongate/claude-agent-sdk';
import { AgentsGate } from 'actiongate/openai-agents';
import { MastraGate } from 'actiongate/mastra';

const c = new Client({ url: 'http://127.0.0.1:9', key: 'agk_x' });
for (const [name, v] of Object.entries({ Client, ApiError, Denied, Unreachable, toolApproval, canUseTool, AgentsGate, MastraGate })) {
  if (typeof v !== 'function') throw new Error(`${name} is not exported`);
}
if (c.url !== 'http://127.0.0.1:9') throw new Error('bad url');
console.log('pack: imports ok');
