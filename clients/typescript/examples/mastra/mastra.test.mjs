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

function run(env) {
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ['mastra.mjs', 'build/'], { cwd: HERE, env: { ...process.env, GATE_WAIT: '30', ...env }, timeout: 90000 }, (err, out, errout) =>
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
