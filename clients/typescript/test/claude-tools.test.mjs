// The Claude adapters name each tool call exactly as `actiongate hook
// claude-code` does: both are checked against one table
// (crates/cli/tests/claude_calls.json), so one profile governs both.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { mapClaudeCalls, mapClaudeTool } from '../dist/index.js';

const TABLE = JSON.parse(readFileSync(new URL('../../../crates/cli/tests/claude_calls.json', import.meta.url), 'utf8'));

test('every call of the shared table is asked as the hook asks it', () => {
  assert.ok(TABLE.calls.length > 40);
  for (const c of TABLE.calls) {
    const cwd = c.cwd ?? undefined;
    if (c.error) {
      assert.throws(() => mapClaudeCalls(c.tool_name, c.tool_input, cwd), undefined, JSON.stringify(c));
      continue;
    }
    // The home directory a `~/..` is resolved from, as the hook's is.
    const saved = process.env.HOME;
    if (c.home) process.env.HOME = c.home;
    else delete process.env.HOME;
    let got;
    try {
      got = mapClaudeCalls(c.tool_name, c.tool_input, cwd);
    } finally {
      process.env.HOME = saved;
    }
    assert.deepEqual(got.actions.map((a) => [a.tool, a.detail]), c.actions, JSON.stringify(c));
    assert.equal(got.caution !== undefined, c.caution === true, JSON.stringify(c));
  }
});

test('mapClaudeTool is the one action of a call, and refuses a call that is several', () => {
  assert.deepEqual(mapClaudeTool('Bash', { command: 'ls' }), { tool: 'bash', detail: 'ls' });
  assert.throws(() => mapClaudeTool('Monitor', { command: 'tail -f log', ws: { url: 'wss://example.test/x' } }), /2 actions/);
});
