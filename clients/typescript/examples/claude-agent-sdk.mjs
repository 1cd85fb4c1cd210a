// The Claude Agent SDK with actiongate as its permission callback: the one
// line is `canUseTool: canUseTool(gate)` in `query()`'s options. A real
// session needs the Claude Code CLI and a model, which this example cannot
// reach; it calls the callback as the SDK does (same arguments, same
// answer type) for one tool call and prints the answer Claude would get.
//
//   ACTIONGATE_URL=... ACTIONGATE_KEY=agk_... node examples/claude-agent-sdk.mjs 'git push origin main'
//
// With a model it is:
//   for await (const m of query({ prompt, options: { canUseTool: canUseTool(new Client()) } })) ...
import { Client } from 'actiongate';
import { canUseTool } from 'actiongate/claude-agent-sdk';

const command = process.argv[2] ?? 'git status';
const decide = canUseTool(new Client(), { wait: Number(process.env.GATE_WAIT ?? 300) });
const answer = await decide('Bash', { command }, { signal: new AbortController().signal, toolUseID: 'toolu_1', requestId: 'req_1' });
console.log(JSON.stringify(answer));
