// The Vercel AI SDK with actiongate deciding its tool calls: the one line
// is `toolApproval: toolApproval(gate)`. A scripted model (the SDK's own
// MockLanguageModelV4) asks for `delete_file`, then answers with what the
// tool gave back, so you can see a run and a refusal end to end.
//
//   ACTIONGATE_URL=http://127.0.0.1:8080 ACTIONGATE_KEY=agk_... node examples/ai-sdk.mjs build/
//
// Approve or deny the request (`actiongate pending`, the page, a chat)
// while it waits.
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';
import { Client } from 'actiongate';
import { toolApproval } from 'actiongate/ai-sdk';

const path = process.argv[2] ?? 'build/';
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

// First turn: call the tool. Second turn: say what the tool answered.
const model = new MockLanguageModelV4({
  doGenerate: async ({ prompt }) => {
    const last = prompt.at(-1);
    if (last?.role !== 'tool') {
      return {
        content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'delete_file', input: JSON.stringify({ path }) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    }
    const part = last.content.find((p) => p.type === 'tool-result');
    return { content: [{ type: 'text', text: `tool said: ${JSON.stringify(part?.output)}` }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
  },
});

const deleted = [];
const result = await generateText({
  model,
  prompt: `delete ${path}`,
  stopWhen: stepCountIs(3),
  tools: {
    delete_file: tool({
      description: 'Delete a file or folder',
      inputSchema: jsonSchema({ type: 'object', properties: { path: { type: 'string' } }, required: ['path'] }),
      execute: async ({ path }) => (deleted.push(path), `deleted ${path}`),
    }),
  },
  toolApproval: toolApproval(new Client(), { wait: Number(process.env.GATE_WAIT ?? 300) }),
});

console.log(JSON.stringify({ ran: deleted, text: result.text }));
