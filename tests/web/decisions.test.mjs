// The page's decision dialogs: Approve and remember's plain choices. Real
// Chromium against the real daemon (harness.mjs), run by .ci/web-tests.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAll, stopAll, sleep } from './harness.mjs';

let env;

const card = (id) => env.page.locator(`#queue .card[data-id="${id}"]`);

async function queue() {
  await env.page.goto(`${env.pageUrl}#/queue`);
  await env.page.waitForSelector('#queue');
}

/** Waits until `path` answers something other than pending. */
async function settled(path) {
  let r;
  for (let t = 0; t < 100; t++) {
    r = (await env.call('GET', path, env.operator)).body;
    if (r.status !== 'pending') return r;
    await sleep(100);
  }
  return r;
}

/** An agent key for `name`, whose every action asks (`approvals` added to
 * its profile when given). */
async function agent(name, approvals) {
  const key = (await env.call('POST', '/v1/keys', env.admin, { role: 'agent', agent: name })).body.key;
  const set = await env.call('PUT', `/v1/agents/${name}`, env.admin, { profile: { allow: [], ask: ['(?s).*'], ...(approvals ? { approvals } : {}) } });
  assert.ok(set.status < 300, JSON.stringify(set.body));
  return key;
}

async function ask(key, body) {
  const r = await env.call('POST', '/v1/actions', key, body);
  assert.equal(r.body.status, 'pending', JSON.stringify(r.body));
  await card(r.body.id).waitFor();
  return r.body.id;
}

before(async () => {
  env = await startAll();
  const { page } = env;
  await page.goto(env.pageUrl);
  await page.fill('#key', env.operator);
  await page.click('#sign-in-form button[type=submit]');
  await page.waitForSelector('#stream-state[data-state=live]');
  await page.waitForSelector('#queue');
});

after(async () => {
  if (!env) return;
  const errors = env.consoleErrors.filter((e) => !/Failed to load resource|ERR_/.test(e));
  await stopAll(env);
  assert.deepEqual(errors, []);
});

test('Approve and remember: the plain choices work, and the grant made has the pattern the choice says', async () => {
  const { page } = env;
  await queue();
  const key = await agent('remember-agent');
  const first = await ask(key, { tool: 'bash', detail: 'make honest-9' });
  const second = await ask(key, { tool: 'bash', detail: 'make honest-10' });
  await card(first).locator('button.remember').click();
  const scope = page.locator('#grant-scope');
  assert.ok(!(await scope.innerText()).includes('[object'), await scope.innerText());
  await scope.getByLabel('exactly this command').waitFor();
  assert.match(await page.locator('#grant-preview').innerText(), /^This grant would also approve 0 pending items$/);
  await scope.getByLabel('make with any arguments').check();
  assert.equal(await page.inputValue('#grant-pattern'), 'make( .*)?');
  assert.match(await page.locator('#grant-preview').innerText(), /would also approve 1 pending item\b[\s\S]*make honest-10/);
  assert.ok(!(await page.locator('#grant-preview').innerText()).includes('null'));
  await page.click('#grant-confirm');
  await card(first).waitFor({ state: 'detached' });
  assert.equal((await settled(`/v1/actions/${second}`)).status !== 'pending', true, 'the other pending item was not approved by the grant');
  const grants = (await env.call('GET', '/v1/grants?active=true', env.operator)).body.filter((g) => g.agent === 'remember-agent');
  assert.deepEqual(grants.map((g) => g.pattern), ['make( .*)?']);

  // The exact command: a regex that matches only it.
  const exact = await ask(key, { tool: 'bash', detail: 'cargo fmt --check' });
  await card(exact).locator('button.remember').click();
  await page.locator('#grant-scope').getByLabel('exactly this command').check();
  await page.click('#grant-confirm');
  await card(exact).waitFor({ state: 'detached' });
  const now = (await env.call('GET', '/v1/grants?active=true', env.operator)).body.filter((g) => g.agent === 'remember-agent');
  assert.ok(now.some((g) => g.pattern === 'cargo fmt --check'), JSON.stringify(now));
  const other = await env.call('POST', '/v1/actions', key, { tool: 'bash', detail: 'cargo fmt' });
  assert.equal(other.body.status, 'pending', 'the exact grant covered another command');
  await env.call('POST', `/v1/actions/${other.body.id}/deny`, env.operator, { reason: 'test' });
});
