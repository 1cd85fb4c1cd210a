// The Mastra adapter against the real daemon, through Mastra's own tool
// approval: an allowed call runs, an asked call runs once an operator
// approves and does not once one denies (the model reads the reason), and
// a daemon that is down denies. Run with Node 22 (Mastra 1.x needs it).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { deadUrl, startDaemon } from '../../test/daemon.mjs';

const HERE = fileURLToPath(new URL('.', import.meta.url));
let d;
before(async () => {
  d = await startDaemon();
});
after(async () => d && (await d.stop()));

function run(env, args = ['mastra.mjs', 'build/']) {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, args, { cwd: HERE, env: { ...process.env, GATE_WAIT: '30', ...env }, timeout: 90000 }, (err, out, errout) =>
      err ? reject(new Error(`${err.message}\n${errout}`)) : resolve(JSON.parse(out.trim().split('\n').at(-1))),
    ),
  );
}

test('an allowed call runs', async () => {
  const a = await d.agent({ allow: ['tool:delete_file:.*'], ask: [], deny: [] });
  const out = await run({ ACTIONGATE_URL: d.url, ACTIONGATE_KEY: a.key });
  assert.deepEqual(out.ran, ['build/']);
});

test('an asked call runs once approved', async () => {
  const a = await d.agent({ allow: [], ask: ['tool:delete_file:.*'], deny: [] });
  const p = run({ ACTIONGATE_URL: d.url, ACTIONGATE_KEY: a.key });
  const item = await d.pendingOf(a.name);
  assert.equal(item.detail, '{"path":"build/"}');
  await d.call('POST', `/v1/actions/${item.id}/approve`, {});
  assert.deepEqual((await p).ran, ['build/']);
});

test('an asked call an operator denies does not run, and the model reads why', async () => {
  const a = await d.agent({ allow: [], ask: ['tool:delete_file:.*'], deny: [] });
  const p = run({ ACTIONGATE_URL: d.url, ACTIONGATE_KEY: a.key });
  await d.decideNext(a.name, 'deny', 'keep the build');
  const out = await p;
  assert.deepEqual(out.ran, []);
  assert.match(out.text, /keep the build/);
});

test('a daemon that is down denies', async () => {
  const out = await run({ ACTIONGATE_URL: await deadUrl(), ACTIONGATE_KEY: 'agk_down' });
  assert.deepEqual(out.ran, []);
  assert.match(out.text, /could not decide/);
});

test("a tool that decides its own approval with a function is refused before it runs: Mastra would let it override the gate", async () => {
  for (const how of ['fn', 'ai-sdk-fn', 'ctx-fn']) {
    const a = await d.agent({ allow: [], ask: [], deny: ['tool:delete_file:.*'] });
    const out = await run({ ACTIONGATE_URL: d.url, ACTIONGATE_KEY: a.key }, ['tool-approval.mjs', how, '/etc/important']);
    assert.deepEqual(out.ran, [], how);
    assert.match(out.error, /decides its own approval/, how);
  }
});

test('a tool that suspends every call is asked once, and one grant use is spent', async () => {
  const a = await d.agent({ allow: [], ask: ['tool:delete_file:.*'], deny: [] });
  await d.call('POST', '/v1/grants', { tool: 'delete_file', pattern: '.*', agent: a.name, uses: 2, expires: '1h' });
  const out = await run({ ACTIONGATE_URL: d.url, ACTIONGATE_KEY: a.key }, ['tool-approval.mjs', 'true', 'build/']);
  assert.deepEqual(out.ran, ['build/']);
  const operator = await d.key('operator');
  const list = await d.call('GET', `/v1/actions?agent=${a.name}`, undefined, operator);
  assert.equal(list.items.length, 1, JSON.stringify(list.items));
  const grants = await d.call('GET', `/v1/grants?agent=${a.name}`, undefined, operator);
  assert.equal(grants.items?.[0]?.uses_left ?? grants[0]?.uses_left, 1, JSON.stringify(grants));
});
