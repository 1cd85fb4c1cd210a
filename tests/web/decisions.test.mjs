// The page's decision dialogs and what a card says about who decides:
// Edit & approve (masked values kept), Approve and remember's plain
// choices, a grant request's scope, an approvals rule's approvers. Real
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

test('Edit & approve shows masked values as ***; left so they keep the agent\'s values; hidden characters are named', async () => {
  const { page } = env;
  await queue();
  const reg = await env.call('POST', '/v1/handlers', env.admin, {
    id: 'vault', name: 'Vault', url: 'http://127.0.0.1:9/',
    permissions: [{ name: 'vault.rotate', parameters_schema: { type: 'object' } }],
    actions: [{ name: 'rotate', permission: 'vault.rotate', params_schema: { type: 'object' }, sensitive: ['/pin'] }],
  });
  assert.equal(reg.status, 201, JSON.stringify(reg.body));
  const pw = 'agent-db-pw-by-its-name';
  const id = await ask(env.agent, { handler: 'vault', action: 'rotate', params: { host: 'web1\u200b', db_password: pw, pin: '4321' } });
  await card(id).locator('button', { hasText: 'Edit & approve' }).click();
  const text = await page.inputValue('#edit-text');
  assert.ok(!text.includes(pw), `the textarea holds the raw value: ${text}`);
  assert.match(text, /"db_password": "\*\*\*"/);
  assert.match(text, /"pin": "\*\*\*"/);
  assert.match(await page.locator('#edit-label').innerText(), /keeps the agent's value/);
  // The zero-width space a text field would hide is named under it.
  assert.match(await page.locator('#edit-hidden').innerText(), /web1⟨U\+200B⟩/);
  const edited = JSON.parse(text);
  edited.host = 'web2';
  await page.fill('#edit-text', JSON.stringify(edited, null, 2));
  assert.equal(await page.locator('#edit-hidden').isHidden(), true, 'the hint stays after the hidden character went');
  await page.click('#edit-confirm');
  await card(id).waitFor({ state: 'detached' });
  const done = await settled(`/v1/actions/${id}`);
  assert.equal(done.edited, true, JSON.stringify(done));
  assert.equal(done.approved_params.host, 'web2');
  assert.equal(done.approved_params.db_password, pw, 'the value sent back as *** did not keep the agent\'s value');
  // The sensitive one the daemon put back (a change to it is refused).
  assert.equal(done.approved_params.pin, '***');
});

test('Edit & approve of a command shows its secrets as numbered tokens, and each left in place keeps the agent\'s text', async () => {
  const { page } = env;
  await queue();
  const token = 'ghp_abcdefghijklmnopqrstuv12';
  const pw = 'hunter2-by-its-flag';
  const detail = `curl -H 'Authorization: Bearer ${token}' --password ${pw} https://api.example/v1?page=1`;
  const id = await ask(env.agent, { tool: 'bash', detail });
  await card(id).locator('button', { hasText: 'Edit & approve' }).click();
  const text = await page.inputValue('#edit-text');
  for (const secret of [token, pw]) assert.ok(!text.includes(secret), `the textarea holds a secret: ${text}`);
  assert.equal(text, "curl -H 'Authorization: Bearer ••••1' --password ••••2 https://api.example/v1?page=1");
  assert.match(await page.locator('#edit-label').innerText(), /keeps the agent's text/);
  await page.fill('#edit-text', text.replace('page=1', 'page=2'));
  await page.click('#edit-confirm');
  await card(id).waitFor({ state: 'detached' });
  const done = await settled(`/v1/actions/${id}`);
  assert.equal(done.edited, true, JSON.stringify(done));
  assert.equal(done.approved_detail, detail.replace('page=1', 'page=2'));
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

test('a grant request\'s scope reads as its keys and quoted values; a card an approvals rule governs names who may approve', async () => {
  const { page } = env;
  await queue();
  const gr = await env.call('POST', '/v1/grant-requests', env.agent, {
    handler: 'fs', permission: 'fs.write', scope: { path: 'web1, path = staging' }, reason: 'one key, not two', expires: '1h',
  });
  assert.equal(gr.status, 201, JSON.stringify(gr.body));
  const g = card(gr.body.id);
  await g.waitFor();
  assert.match(await g.locator('.meta').innerText(), /scope path = "web1, path = staging" ·/);
  await env.call('POST', `/v1/grant-requests/${gr.body.id}/deny`, env.operator, { reason: 'test' });

  const key = await agent('release-agent', [{ pattern: 'tool:deploy:.*', approvers: ['release-*', 'group:sre'] }]);
  const id = await ask(key, { tool: 'deploy', detail: 'prod eu' });
  assert.match(await card(id).locator('.approvers').innerText(), /Only these may approve: release-\*, group:sre \(approvals rule #0/);
  // The operator is none of them: its card offers no decision, not even
  // through the keyboard or "Select all matching" (the daemon would refuse
  // them all with 403).
  assert.match(await card(id).locator('.not-yours').innerText(), /not among its approvers \(release-\*, group:sre\)/);
  for (const b of ['button.approve', 'button.remember', 'button.deny', 'input.select']) {
    assert.equal(await card(id).locator(b).count(), 0, `${b} offered to a non-approver`);
  }
  await card(id).focus();
  await page.keyboard.press('a');
  await page.locator('#errors .notice', { hasText: 'not among its approvers' }).waitFor();
  assert.equal(await page.locator('#toasts .toast').count(), 0, 'a decision was queued');
  const pending = (await env.call('GET', '/v1/actions?status=pending', env.operator)).body;
  assert.deepEqual((pending.items || pending).map((a) => a.id), [id], 'only this card is pending here');
  await page.click('#select-all');
  assert.equal(await page.locator('#bulk').isHidden(), true, '"Select all matching" took a card the operator cannot decide');
  // Made one of group:sre (by an admin, after sign-in), the page offers it
  // on the next view, and the approval is accepted.
  const people = (await env.call('GET', '/v1/people', env.admin)).body;
  const me = people.items.find((p) => p.name === 'web-operator');
  const body = (groups) => ({ name: me.name, keys: me.keys, chat: me.chat, groups });
  const set = await env.call('PUT', `/v1/people/${me.id}`, env.admin, body(['sre']));
  assert.equal(set.status, 200, JSON.stringify(set.body));
  await page.goto(`${env.pageUrl}#/grants`);
  await page.waitForFunction(() => !document.querySelector('#queue'));
  await queue();
  await card(id).locator('button.approve').waitFor();
  assert.equal(await card(id).locator('.not-yours').count(), 0);
  await card(id).locator('button.approve').click();
  await page.locator('#toasts .toast', { hasText: 'Approved' }).locator('button.send-now').click();
  await card(id).waitFor({ state: 'detached' });
  assert.equal((await settled(`/v1/actions/${id}`)).status, 'approved');
  await env.call('PUT', `/v1/people/${me.id}`, env.admin, body([]));
  // A plain action names nobody.
  const plain = await ask(env.agent, { tool: 'bash', detail: 'make plain' });
  assert.equal(await card(plain).locator('.approvers').count(), 0);
  await env.call('POST', `/v1/actions/${plain}/deny`, env.admin, { reason: 'test' });
});

test('a decision whose answer was lost (a 503 after it was made) is sent again: the card goes, no error, one approval', async () => {
  const { page } = env;
  await queue();
  const key = await agent('lost-answer-agent');
  const id = await ask(key, { tool: 'bash', detail: 'make lost-answer' });
  const sent = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url().endsWith(`/v1/actions/${id}/approve`)) sent.push(r.url());
  });
  // The daemon makes the approval; its answer is lost on the way back.
  await page.route(`**/v1/actions/${id}/approve`, async (route) => {
    const made = await route.fetch();
    assert.equal(made.status(), 200);
    await route.fulfill({ status: 503, contentType: 'application/problem+json', headers: { 'retry-after': '1' },
      body: JSON.stringify({ type: 'about:blank', title: 'Service Unavailable', status: 503, detail: 'answer lost in this test' }) });
  }, { times: 1 });
  await card(id).locator('button.approve').click();
  await page.locator('#toasts .toast', { hasText: 'make lost-answer' }).locator('button.send-now').click();
  await card(id).waitFor({ state: 'detached' });
  for (let t = 0; t < 100 && sent.length < 2; t++) await sleep(100);
  assert.equal(sent.length, 2, 'the approval was not sent again');
  // The retry's answer is in: nothing failed, and the card stays gone.
  await sleep(500);
  assert.ok(!(await page.locator('#errors').innerText()).includes('answer lost in this test'), 'a lost answer was shown as a failure');
  assert.equal(await card(id).count(), 0);
  const a = (await env.call('GET', `/v1/actions/${id}`, env.operator)).body;
  assert.equal(a.status, 'approved', JSON.stringify(a));
  assert.equal(a.approvals.length, 1, JSON.stringify(a));
  await page.unroute(`**/v1/actions/${id}/approve`);

  // A grant request approved as asked, alike: one grant.
  const gr = (await env.call('POST', '/v1/grant-requests', env.agent, {
    handler: 'fs', permission: 'fs.write', scope: { path: 'lost/*' }, reason: 'answer lost', expires: '2h',
  })).body;
  const grPath = `**/v1/grant-requests/${gr.id}/approve`;
  let grSent = 0;
  await page.route(grPath, async (route) => {
    grSent++;
    if (grSent > 1) return route.continue();
    const made = await route.fetch();
    assert.equal(made.status(), 200);
    await route.fulfill({ status: 503, contentType: 'application/problem+json', body: JSON.stringify({ title: 'Service Unavailable', status: 503 }) });
  });
  await card(gr.id).locator('button.approve').click();
  await page.click('#grant-confirm');
  await card(gr.id).waitFor({ state: 'detached' });
  await page.locator('#errors .notice', { hasText: 'Grant request approved.' }).waitFor();
  assert.equal(grSent, 2, 'the approval was not sent again');
  assert.equal(await page.locator('#errors').innerText().then((t) => t.includes('Service Unavailable')), false);
  const made = (await env.call('GET', `/v1/grant-requests/${gr.id}`, env.operator)).body;
  assert.equal(made.status, 'approved', JSON.stringify(made));
  const grants = (await env.call('GET', '/v1/grants?handler=fs', env.operator)).body.filter((g) => g.id === made.grant.id);
  assert.equal(grants.length, 1);
  await page.unroute(grPath);
  await env.call('DELETE', `/v1/grants/${made.grant.id}`, env.operator);
});
