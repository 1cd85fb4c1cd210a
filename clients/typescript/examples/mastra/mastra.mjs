// A Mastra agent whose tool calls actiongate decides, through Mastra's own
// tool approval (`requireToolApproval`, then approve/declineToolCallGenerate).
// The model is the AI SDK's MockLanguageModelV3, scripted to call
// `delete_file` once and then say what the tool answered. Mastra 1.x needs
// Node 22.13 or newer.
//
//   ACTIONGATE_URL=... ACTIONGATE_KEY=agk_... node examples/mastra.mjs build/
import { Mastra } from '@mastra/core';
import { Agent } from '@mastra/core/agent';
import { InMemoryStore } from '@mastra/core/storage';
import { createTool } from '@mastra/core/tools';
import { MockLanguageModelV3 } from 'ai/test';
import { z } from 'zod';
import { Client } from 'actiongate';
import { MastraGate } from 'actiongate/mastra';

const path = process.argv[2] ?? 'build/';
const usage = { inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 }, outputTokens: { total: 1, text: 1, reasoning: 0 } };

function lastToolResult(prompt) {
  for (const m of [...prompt].reverse()) {
    if (m.role !== 'tool') continue;
    const part = m.content.find((p) => p.type === 'tool-result');
    if (part) return part.output;
  }
  return undefined;
}

function stream(parts) {
  return {
    stream: new ReadableStream({
      start(c) {
        for (const p of parts) c.enqueue(p);
        c.close();
      },
    }),
  };
}

const model = new MockLanguageModelV3({
  doGenerate: async ({ prompt }) => {
    const result = lastToolResult(prompt);
    if (result === undefined) {
      return {
        content: [{ type: 'tool-call', toolCallId: 'call-1', toolName: 'delete_file', input: JSON.stringify({ path }) }],
        finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
        usage,
        warnings: [],
      };
    }
    return { content: [{ type: 'text', text: `tool said: ${JSON.stringify(result)}` }], finishReason: { unified: 'stop', raw: 'stop' }, usage, warnings: [] };
  },
  doStream: async ({ prompt }) => {
    const result = lastToolResult(prompt);
    if (result === undefined) {
      return stream([
        { type: 'stream-start', warnings: [] },
        { type: 'tool-call', toolCallId: 'call-1', toolName: 'delete_file', input: JSON.stringify({ path }) },
        { type: 'finish', finishReason: { unified: 'tool-calls', raw: 'tool_calls' }, usage },
      ]);
    }
    const text = `tool said: ${JSON.stringify(result)}`;
    return stream([
      { type: 'stream-start', warnings: [] },
      { type: 'text-start', id: 't' },
      { type: 'text-delta', id: 't', delta: text },
      { type: 'text-end', id: 't' },
      { type: 'finish', finishReason: { unified: 'stop', raw: 'stop' }, usage },
    ]);
  },
});

const deleted = [];
const agent = new Agent({
  id: 'cleaner',
  name: 'cleaner',
  instructions: 'Delete what you are asked to.',
  model,
  tools: {
    delete_file: createTool({
      id: 'delete_file',
      description: 'Delete a file or folder',
      inputSchema: z.object({ path: z.string() }),
      execute: async ({ path }) => (deleted.push(path), `deleted ${path}`),
    }),
  },
});

// A suspended run is resumed from storage: Mastra needs a store to approve
// or decline a suspended call (in memory here).
new Mastra({ agents: { cleaner: agent }, storage: new InMemoryStore() });

const gate = new MastraGate(new Client(), { wait: Number(process.env.GATE_WAIT ?? 300) });
const output = await gate.generate(agent, `delete ${path}`);
console.log(JSON.stringify({ ran: deleted, text: output.text }));
