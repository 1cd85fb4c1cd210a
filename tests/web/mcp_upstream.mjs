// A minimal stdio MCP server (newline-delimited JSON-RPC, handshake era)
// with one tool, `echo`: the upstream that `actiongate mcp proxy` fronts in
// the browser test where the page decides a proxied call.

import { createInterface } from 'node:readline';

const send = (msg) => process.stdout.write(`${JSON.stringify({ jsonrpc: '2.0', ...msg })}\n`);

const tools = [{
  name: 'echo',
  description: 'Echo the text back.',
  inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
}];

createInterface({ input: process.stdin }).on('line', (line) => {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.id === undefined) return; // notifications
  switch (msg.method) {
    case 'initialize':
      send({ id: msg.id, result: {
        protocolVersion: msg.params?.protocolVersion ?? '2025-11-25',
        capabilities: { tools: {} },
        serverInfo: { name: 'web-test-upstream', version: '1' },
      } });
      break;
    case 'ping':
      send({ id: msg.id, result: {} });
      break;
    case 'tools/list':
      send({ id: msg.id, result: { tools } });
      break;
    case 'tools/call':
      send({ id: msg.id, result: { content: [{ type: 'text', text: `echo: ${msg.params?.arguments?.text}` }] } });
      break;
    default:
      send({ id: msg.id, error: { code: -32601, message: `no method ${msg.method}` } });
  }
});
