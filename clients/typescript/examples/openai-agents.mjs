// The OpenAI Agents SDK for TypeScript with actiongate deciding its tool
// calls through the SDK's own approvals: the tool's `needsApproval` is
// `gate.needsApproval('delete_file')`, and `gate.run(runner, agent, input)`
// resolves the run's interruptions. A scripted model (the SDK's `Model`
// interface, no network) calls `delete_file` once, then says what the tool
// answered.
//
//   ACTIONGATE_URL=... ACTIONGATE_KEY=agk_... node examples/openai-agents.mjs build/
import { Agent, Runner, Usage, tool } from '@openai/agents';
import { Client } from 'actiongate';
import { AgentsGate } from 'actiongate/openai-agents';

const path = process.argv[2] ?? 'build/';

class ScriptedModel {
  async getResponse(request) {
    const items = Array.isArray(request.input) ? request.input : [];
    const result = items.findLast?.((i) => i.type === 'function_call_result');
    if (!result) {
      return {
        usage: new Usage(),
        output: [{ type: 'function_call', callId: 'call-1', name: 'delete_file', arguments: JSON.stringify({ path }), status: 'completed' }],
      };
    }
    const text = typeof result.output === 'string' ? result.output : (result.output?.text ?? JSON.stringify(result.output));
    return {
      usage: new Usage(),
      output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: `tool said: ${text}` }] }],
    };
  }
  async *getStreamedResponse() {
    throw new Error('not used');
  }
}

const gate = new AgentsGate(new Client(), { wait: Number(process.env.GATE_WAIT ?? 300) });
const deleted = [];
const agent = new Agent({
  name: 'cleaner',
  instructions: 'Delete what you are asked to.',
  model: new ScriptedModel(),
  tools: [
    tool({
      name: 'delete_file',
      description: 'Delete a file or folder',
      parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'], additionalProperties: false },
      strict: true,
      needsApproval: gate.needsApproval('delete_file'),
      execute: async ({ path }) => (deleted.push(path), `deleted ${path}`),
    }),
  ],
});

const result = await gate.run(new Runner({ tracingDisabled: true }), agent, `delete ${path}`);
console.log(JSON.stringify({ ran: deleted, text: result.finalOutput }));
