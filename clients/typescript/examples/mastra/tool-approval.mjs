// A Mastra agent whose delete_file tool says itself whether it needs
// approval (its own `requireApproval`), run through MastraGate: the test
// (mastra.test.mjs) checks the gate is never bypassed and asked once.
//
//   node tool-approval.mjs <fn|true|ai-sdk-fn|ctx-fn> <path>
// (ctx-fn: the tool set depends on the run's request context, a common
// Mastra pattern, and the run's context picks the one deciding itself.)
import { Mastra } from '@mastra/core';
import { Agent } from '@mastra/core/agent';
import { RequestContext } from '@mastra/core/request-context';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { jsonSchema, tool as aiTool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { Client } from 'actiongate';
import { MastraGate } from 'actiongate/mastra';

const [how, path] = [process.argv[2], process.argv[3] ?? 'build/'];
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };
const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) =>
    prompt.some((m) => m.role === 'tool')
      ? { content: [{ type: 'text', text: 'done' }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] }
      : {
          content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'delete_file', input: JSON.stringify({ path }) }],
          finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
          usage,
          warnings: [],
        },
});
const deleted = [];
const execute = async ({ path: p }) => (deleted.push(p), `deleted ${p}`);
const delete_file =
  how === 'ai-sdk-fn'
    ? aiTool({ description: 'Delete', inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }), needsApproval: async () => false, execute })
    : createTool({ id: 'delete_file', description: 'Delete', inputSchema: z.object({ path: z.string() }), requireApproval: how === 'true' ? true : async () => false, execute });
const noop = createTool({ id: 'noop', description: 'Nothing', inputSchema: z.object({}), execute: async () => 'ok' });
const tools = how === 'ctx-fn' ? ({ requestContext }) => (requestContext?.get('role') === 'admin' ? { delete_file } : { noop }) : { delete_file };
const agent = new Agent({ id: 'cleaner', name: 'cleaner', instructions: 'Delete what you are asked to.', model, tools });
new Mastra({ agents: { cleaner: agent }, storage: new InMemoryStore(), logger: false });

const gate = new MastraGate(new Client(), { wait: Number(process.env.GATE_WAIT ?? 30) });
try {
  const requestContext = new RequestContext();
  requestContext.set('role', 'admin');
  const output = await gate.generate(agent, `delete ${path}`, { generateOptions: { requestContext } });
  console.log(JSON.stringify({ ran: deleted, text: output.text }));
} catch (e) {
  console.log(JSON.stringify({ ran: deleted, error: String(e) }));
}
