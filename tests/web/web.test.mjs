// The operator's web page in a real browser against the real daemon and the
// reference executor (issue 7). Run by .ci/web-tests; with WEB_SCREENSHOTS
// set to a directory it also saves the README's screenshots there.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAll, stopAll, sleep, bin } from './harness.mjs';

let env;
const shots = process.env.WEB_SCREENSHOTS;

async function screenshot(name) {
  if (!shots) return;
  mkdirSync(shots, { recursive: true });
  await env.page.screenshot({ path: join(shots, name) });
}

/** An agent's request for the reference executor's action. */
async function request(action, params, wait) {
  const q = wait ? `?wait=${wait}` : '';
  const r = await env.call('POST', `/v1/actions${q}`, env.agent, { handler: 'fs', action, params });
  assert.ok(r.status === 201 || r.status === 200, JSON.stringify(r.body));
  return r.body;
}

const card = (id) => env.page.locator(`#queue .card[data-id="${id}"]`);

/** Records every card id ever added to the queue list, in the page. */
async function watchQueue() {
  await env.page.evaluate(() => {
    window.seenCards = [];
    const list = document.getElementById('queue');
    for (const el of list.querySelectorAll('.card')) window.seenCards.push(el.dataset.id);
    new MutationObserver((records) => {
      for (const r of records) for (const n of r.addedNodes) if (n.dataset?.id) window.seenCards.push(n.dataset.id);
    }).observe(list, { childList: true });
  });
}

before(async () => {
  env = await startAll();
  const { page } = env;
  await page.goto(env.pageUrl);
  // A wrong key is refused, and says so.
  await page.fill('#key', 'agk_not_a_real_key');
  await page.click('#sign-in-form button[type=submit]');
  await page.waitForSelector('#sign-in-error:has-text("not accepted")');
  await page.fill('#key', env.operator);
  await page.click('#sign-in-form button[type=submit]');
  await page.waitForSelector('#stream-state[data-state=live]');
  await page.waitForSelector('#queue');
});

after(async () => {
  if (!env) return;
  const errors = env.consoleErrors.filter((e) => !/Failed to load resource|ERR_/.test(e));
  await stopAll(env);
  // Nothing went wrong in the page that the page did not handle.
  assert.deepEqual(errors, []);
});

test('an action appears live, "Approve and remember" grants 1h, it completes, and a matching one never queues', async () => {
  const { page } = env;
  await watchQueue();
  // Other work waiting, so the queue looks like a real one.
  const cmd = await request('execute_command', { content: 'ls -la src', reason: 'see what the build left' });
  const upd = await request('update_file', { filepath: 'docs/notes.md', content: '# Notes\n', reason: 'tidy the notes' });
  const other = await request('create_file', { filepath: 's1/other.py', content: 'y = 2\n', reason: 'a helper' });
  const a = await request('create_file', { filepath: 's1/app.py', content: "print('hi')\n", reason: 'scaffold the app' });
  assert.equal(a.status, 'pending');
  await card(a.id).waitFor();
  await card(cmd.id).waitFor();
  await card(upd.id).waitFor();
  await card(other.id).waitFor();
  // Soonest deadline first (the oldest, with equal timeouts); the title counts what is pending.
  assert.equal(await page.locator('#queue .card').first().getAttribute('data-id'), cmd.id);
  assert.match(await page.title(), /^\(4\) actiongate$/);
  await card(a.id).locator('summary').click();
  await page.waitForSelector(`#queue .card[data-id="${a.id}"] pre.params:has-text("s1/app.py")`);
  await screenshot('queue.png');
  // Readable on a phone: nothing wider than the screen.
  await page.setViewportSize({ width: 390, height: 844 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'wider than a phone');
  await screenshot('queue-phone.png');
  await page.setViewportSize({ width: 1100, height: 800 });

  await card(a.id).locator('button.remember').click();
  const scope = page.locator('#grant-scope input[name=path]');
  assert.equal(await scope.inputValue(), 's1/app.py');
  await scope.fill('s1/*');
  await page.check('#grant-expiry input[value="1h"]');
  await screenshot('grant-dialog.png');
  await page.click('#grant-confirm');
  await card(a.id).waitFor({ state: 'detached' });
  // The grant covers the other pending s1/ request too: it leaves the queue and runs.
  await card(other.id).waitFor({ state: 'detached' });
  assert.equal((await env.call('GET', `/v1/actions/${other.id}?wait=30`, env.agent)).body.status, 'completed');

  const done = await env.call('GET', `/v1/actions/${a.id}?wait=30`, env.agent);
  assert.equal(done.body.status, 'completed', JSON.stringify(done.body));
  assert.ok(existsSync(join(env.root, 's1/app.py')));
  const grants = (await env.call('GET', '/v1/grants?active=true', env.operator)).body;
  const g = grants.find((x) => x.scope?.path === 's1/*');
  assert.ok(g && g.agent === 'coder' && g.expires_at, JSON.stringify(grants));
  const hours = (Date.parse(g.expires_at) - Date.parse(g.granted_at)) / 3600e3;
  assert.ok(hours > 0.99 && hours < 1.01, `expires after ${hours} h`);

  // A second matching request is allowed by the grant and never queued.
  const b = await request('create_file', { filepath: 's1/lib.py', content: 'x = 1\n', reason: 'more' }, 30);
  assert.equal(b.status, 'completed', JSON.stringify(b));
  // Give the stream time to deliver anything it would.
  await page.waitForFunction((n) => document.title === `(${n}) actiongate`, 2);
  await sleep(500);
  const seen = await page.evaluate(() => window.seenCards);
  assert.ok(!seen.includes(b.id), 'the granted request showed in the queue');
  assert.equal(await card(b.id).count(), 0);

  // Its page shows the timeline and the dispatch attempt.
  await page.goto(`${env.pageUrl}#/actions/${a.id}`);
  await page.waitForSelector('#timeline li[data-type="action.completed"]');
  await page.waitForSelector('#attempts td:has-text("200")');
  const types = await page.locator('#timeline li').evaluateAll((els) => els.map((e) => e.dataset.type));
  assert.deepEqual(types.filter((t) => t.startsWith('action.')),
    ['action.enqueued', 'action.approved', 'action.started', 'action.completed']);
  if (shots) await page.screenshot({ path: join(shots, 'timeline.png'), fullPage: true });
  await page.goto(`${env.pageUrl}#/queue`);
  await page.waitForSelector('#queue');
});

test('deny with a reason: the agent\'s long-poll returns denied with it', async () => {
  const { page } = env;
  const poll = env.call('POST', '/v1/actions?wait=60', env.agent,
    { tool: 'bash', detail: 'rm -rf build', reason: 'clean the build' });
  const item = page.locator('#queue .card[data-kind=action]', { hasText: 'rm -rf build' });
  await item.waitFor();
  // By keyboard alone: Enter on Deny…, type the reason, Tab to the Deny button.
  await item.locator('button', { hasText: 'Deny' }).focus();
  await page.keyboard.press('Enter');
  await page.waitForSelector('#deny-reason:focus');
  await page.keyboard.type('not on a Friday');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Tab');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'deny-confirm');
  await page.keyboard.press('Enter');
  await item.waitFor({ state: 'detached' });
  const r = await poll;
  assert.equal(r.status, 201);
  assert.equal(r.body.status, 'denied');
  assert.equal(r.body.decision_note, 'not on a Friday');
});

test('revoking a grant on the page makes the next matching request pending again', async () => {
  const { page } = env;
  const made = await env.call('POST', '/v1/grants', env.operator,
    { agent: 'coder', handler: 'fs', permission: 'fs.write', scope: { path: 's3/*' }, expires: 'indefinite' });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const id = made.body.id;
  const first = await request('create_file', { filepath: 's3/one.txt', content: '1', reason: 'r' });
  assert.notEqual(first.status, 'pending');

  await page.click('#nav a[data-view=grants]');
  const row = page.locator(`#grants-table tr[data-id="${id}"]`);
  await row.waitFor();
  await row.locator('button', { hasText: 'Revoke' }).click();
  await row.waitFor({ state: 'detached' });
  const g = (await env.call('GET', `/v1/grants/${id}`, env.operator)).body;
  assert.ok(g.revoked_at && !g.active, JSON.stringify(g));

  await page.click('#nav a[data-view=queue]');
  const next = await request('create_file', { filepath: 's3/two.txt', content: '2', reason: 'r' });
  assert.equal(next.status, 'pending');
  await card(next.id).waitFor();
});

test('the event stream is cut and restored: nothing is missed or doubled', async () => {
  const { page } = env;
  await page.goto(`${env.pageUrl}#/queue`);
  await page.waitForSelector('#stream-state[data-state=live]');
  const before = await request('create_file', { filepath: 's4/before.txt', content: 'b', reason: 'before the cut' });
  await card(before.id).waitFor();
  await watchQueue();

  env.proxy.cut();
  await page.waitForSelector('#stream-state[data-state=reconnecting]');
  // While the page is cut off: new requests, and one settles.
  const during = [];
  for (let i = 0; i < 3; i++) {
    during.push(await request('create_file', { filepath: `s4/during-${i}.txt`, content: 'd', reason: `during the cut ${i}` }));
  }
  const denied = await env.call('POST', `/v1/actions/${before.id}/deny`, env.operator, { reason: 'while cut' });
  assert.equal(denied.status, 200);
  // Still cut: the page has not seen them, and a decision it tries fails visibly.
  assert.equal(await card(during[0].id).count(), 0);
  await card(before.id).locator('button', { hasText: /^Approve$/ }).click();
  await page.waitForSelector('#errors .error:has-text("could not be reached")');
  await page.locator('#errors .error button').first().click();
  env.proxy.restore();

  await page.waitForSelector('#stream-state[data-state=live]', { timeout: 30000 });
  for (const a of during) await card(a.id).waitFor();
  await card(before.id).waitFor({ state: 'detached' });
  await sleep(500);
  const seen = await page.evaluate(() => window.seenCards);
  for (const a of during) {
    assert.equal(seen.filter((x) => x === a.id).length, 1, `${a.id} shown ${seen.filter((x) => x === a.id).length} times`);
    assert.equal(await card(a.id).count(), 1);
  }
  // The page's queue is exactly the daemon's.
  const pending = (await env.call('GET', '/v1/actions?status=pending&limit=200', env.operator)).body.items.map((a) => a.id).sort();
  const shown = (await page.locator('#queue .card[data-kind=action]').evaluateAll((els) => els.map((e) => e.dataset.id))).sort();
  assert.deepEqual(shown, pending);
  assert.equal(await page.title(), `(${pending.length}) actiongate`);
});

test('a grant request is approved narrower and shorter; a bad expiry is shown, not swallowed', async () => {
  const { page } = env;
  await page.goto(`${env.pageUrl}#/queue`);
  const asked = await env.call('POST', '/v1/grant-requests', env.agent,
    { handler: 'fs', permission: 'fs.write', scope: { path: 'gr/*' }, reason: 'write the generated files', expires: '2d' });
  assert.equal(asked.status, 201, JSON.stringify(asked.body));
  const item = page.locator(`#queue .card[data-id="${asked.body.id}"]`);
  await item.waitFor();
  await item.locator('button', { hasText: 'Approve' }).click();
  assert.equal(await page.inputValue('#grant-scope input[name=path]'), 'gr/*');
  assert.equal(await page.inputValue('#grant-custom'), '2d');
  await page.fill('#grant-scope input[name=path]', 'gr/sub/*');
  await page.fill('#grant-custom', 'soon');
  await page.click('#grant-confirm');
  await page.waitForSelector('#grant-error:has-text("expires")');
  assert.equal(await item.count(), 1);
  await page.check('#grant-expiry input[value="1h"]');
  await page.click('#grant-confirm');
  await item.waitFor({ state: 'detached' });
  const r = (await env.call('GET', `/v1/grant-requests/${asked.body.id}`, env.operator)).body;
  assert.equal(r.status, 'approved', JSON.stringify(r));
  assert.deepEqual(r.grant.scope, { path: 'gr/sub/*' });
  const hours = (Date.parse(r.grant.expires_at) - Date.parse(r.grant.granted_at)) / 3600e3;
  assert.ok(hours > 0.99 && hours < 1.01, `expires after ${hours} h`);
});

test('sensitive params are masked and never reach the DOM; history filters by status', async () => {
  const { page } = env;
  const reg = await env.call('POST', '/v1/handlers', env.admin, {
    id: 'mail', name: 'Mail', url: 'http://127.0.0.1:9/',
    permissions: [{ name: 'mail.send', description: 'send mail', parameters_schema: { type: 'object', properties: { to: { type: 'string' } } } }],
    actions: [{
      name: 'send', description: 'send a mail', permission: 'mail.send', scope: { to: '/to' },
      params_schema: { type: 'object', properties: { to: { type: 'string' }, api_key: { type: 'string' }, password: { type: 'string' }, subject: { type: 'string' } }, required: ['to'] },
      sensitive: ['/password'],
      render: { title: 'Mail {to}', summary: '{subject}', fields: [{ label: 'Subject', value: '{subject}' }] },
    }],
  });
  assert.equal(reg.status, 201, JSON.stringify(reg.body));
  const r = await env.call('POST', '/v1/actions', env.agent, { handler: 'mail', action: 'send',
    params: { to: 'bob@example.com', subject: 'hello', api_key: 'AKIA-by-its-name', password: 'hunter2-by-schema' } });
  assert.equal(r.body.status, 'pending', JSON.stringify(r.body));
  await page.goto(`${env.pageUrl}#/queue`);
  const item = card(r.body.id);
  await item.waitFor();
  await item.locator('summary').click();
  // The params are put in the page when opened (the toggle event), not before.
  await item.locator('pre.params', { hasText: 'api_key' }).waitFor();
  const raw = await item.locator('pre.params').textContent();
  assert.match(raw, /"api_key": "••••"/);
  assert.match(raw, /"password": "••••"/);
  assert.match(raw, /bob@example.com/);
  const html = await page.content();
  assert.ok(!html.includes('AKIA-by-its-name') && !html.includes('hunter2-by-schema'), 'a secret reached the DOM');

  // History: only denied actions when filtered so.
  await page.goto(`${env.pageUrl}#/history`);
  await page.selectOption('#history-filters select[name=status]', 'denied');
  await page.click('#history-filters button[type=submit]');
  await page.waitForFunction(() => location.hash === '#/history?status=denied');
  // Two actions were denied above (one on the page, one while the stream was cut).
  await page.waitForFunction(() => {
    const s = [...document.querySelectorAll('#history-table tbody tr[data-id] .badge')].map((b) => b.textContent);
    return s.length >= 2 && s.every((x) => x === 'denied');
  });
  assert.equal(await page.inputValue('#history-filters select[name=status]'), 'denied');
});

test('"Approve and remember" on a decision-only action grants a pattern, for any agent, indefinitely', async () => {
  const { page } = env;
  await page.goto(`${env.pageUrl}#/queue`);
  const r = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: 'cargo test', reason: 'run the tests' });
  assert.equal(r.body.status, 'pending', JSON.stringify(r.body));
  await card(r.body.id).waitFor();
  await card(r.body.id).locator('button.remember').click();
  assert.equal(await page.inputValue('#grant-pattern'), 'cargo test');
  // The regex is under "Advanced", after the plain choices.
  await page.click('#grant-advanced summary');
  await page.fill('#grant-pattern', 'cargo test( .*)?');
  await page.check('#grant-expiry input[value=indefinite]');
  await page.check('#grant-agent input[value="*"]');
  await page.click('#grant-confirm');
  await card(r.body.id).waitFor({ state: 'detached' });
  assert.equal((await env.call('GET', `/v1/actions/${r.body.id}`, env.agent)).body.status, 'approved');
  const g = (await env.call('GET', '/v1/grants?active=true', env.operator)).body.find((x) => x.tool === 'bash');
  assert.ok(g, 'no grant');
  assert.equal(g.pattern, 'cargo test( .*)?');
  assert.equal(g.agent, null);
  assert.equal(g.expires_at, null);
  const next = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: 'cargo test --workspace' });
  assert.equal(next.body.status, 'approved', JSON.stringify(next.body));
});

test('what the operator sees is what runs: line breaks and hidden characters are shown', async () => {
  const { page } = env;
  await page.goto(`${env.pageUrl}#/queue`);
  // A newline is a command separator to the shell: two commands, not one.
  const detail = 'cat README.md\nrm -rf ~/projects';
  const r = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail, reason: 'look\u202e at it' });
  assert.equal(r.body.status, 'pending', JSON.stringify(r.body));
  const c = card(r.body.id);
  await c.waitFor();
  const code = c.locator('code.action-string');
  // The text as rendered (innerText follows layout): two lines, the first
  // ending in ⏎.
  const shown = await code.evaluate((el) => el.innerText);
  assert.deepEqual(shown.split('\n'), ['tool:bash:cat README.md⏎', 'rm -rf ~/projects'], shown);
  const box = await code.evaluate((el) => {
    const lh = parseFloat(getComputedStyle(el).lineHeight) || 16;
    return { h: el.getBoundingClientRect().height, lh };
  });
  assert.ok(box.h >= 1.5 * box.lh, `rendered on one line: ${JSON.stringify(box)}`);
  // The bidi override in the reason is named, not obeyed.
  const reason = await c.locator('p.reason').innerText();
  assert.ok(reason.includes('look⟨U+202E⟩ at it'), reason);
  assert.ok(!reason.includes('\u202e'), 'a raw U+202E reached the page');

  // The deny dialog shows the same two lines.
  await c.locator('button.danger').click();
  const what = await page.locator('#deny-what').evaluate((el) => el.innerText);
  assert.ok(what.includes('tool:bash:cat README.md⏎\nrm -rf ~/projects'), what);
  await page.click('#deny-cancel');

  // The grant dialog too.
  await c.locator('button.remember').click();
  const grantWhat = await page.locator('#grant-what').evaluate((el) => el.innerText);
  assert.ok(grantWhat.includes('cat README.md⏎\nrm -rf ~/projects'), grantWhat);
  await page.keyboard.press('Escape');

  // The action's page and the history list.
  await page.goto(`${env.pageUrl}#/actions/${r.body.id}`);
  const page1 = await page.locator('dd code.action-string').evaluate((el) => el.innerText);
  assert.deepEqual(page1.split('\n'), ['tool:bash:cat README.md⏎', 'rm -rf ~/projects'], page1);
  await page.goto(`${env.pageUrl}#/history`);
  const row = page.locator(`#history-table tr[data-id="${r.body.id}"] code`);
  await row.waitFor();
  const hist = await row.evaluate((el) => el.innerText);
  assert.deepEqual(hist.split('\n'), ['tool:bash:cat README.md⏎', 'rm -rf ~/projects'], hist);
  await env.call('POST', `/v1/actions/${r.body.id}/deny`, env.operator, { reason: 'two commands' });
});

test('a call held by `actiongate mcp proxy` is approved on the page and then forwarded', async () => {
  const { page } = env;
  await page.goto(`${env.pageUrl}#/queue`);
  await page.waitForSelector('#queue');
  const pins = mkdtempSync(join(tmpdir(), 'ag-web-pins-'));
  // The MCP client's side of the proxy, spoken as JSON-RPC lines over its stdio;
  // the upstream is a one-tool stdio server (mcp_upstream.mjs).
  const proxy = spawn(bin('actiongate'), ['mcp', 'proxy', '--name', 'web', '--pins', join(pins, 'web.json'),
    '--', process.execPath, join(import.meta.dirname, 'mcp_upstream.mjs')],
  { env: { ...process.env, ACTIONGATE_URL: env.base, ACTIONGATE_KEY: env.agent },
    stdio: ['pipe', 'pipe', process.env.WEB_TEST_LOG ? 'inherit' : 'ignore'] });
  try {
    const answers = new Map();
    createInterface({ input: proxy.stdout }).on('line', (l) => {
      const m = JSON.parse(l);
      if (m.id !== undefined) answers.set(m.id, m);
    });
    const send = (m) => proxy.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', ...m })}\n`);
    const answer = async (id, ms = 30000) => {
      for (let t = 0; t < ms && !answers.has(id); t += 50) await sleep(50);
      assert.ok(answers.has(id), `no answer to request ${id}`);
      return answers.get(id);
    };
    send({ id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {},
      clientInfo: { name: 'web-test', version: '1' } } });
    await answer(1);
    send({ method: 'notifications/initialized' });
    send({ id: 2, method: 'tools/list', params: {} });
    assert.deepEqual((await answer(2)).result.tools.map((t) => t.name), ['echo']);
    // The agent's profile (guarded) asks: the call waits while the page shows it.
    send({ id: 3, method: 'tools/call', params: { name: 'echo', arguments: { text: 'from the page' } } });
    const item = page.locator('#queue .card[data-kind=action]', { hasText: 'mcp__web__echo' });
    await item.waitFor();
    assert.ok((await item.innerText()).includes('from the page'));
    assert.ok(!answers.has(3), 'the call was answered before anyone decided');
    await item.locator('button', { hasText: /^Approve$/ }).click();
    await item.waitFor({ state: 'detached' });
    const r = await answer(3);
    assert.equal(r.result.isError ?? false, false, JSON.stringify(r));
    assert.equal(r.result.content[0].text, 'echo: from the page');
    const done = (await env.call('GET', '/v1/actions?tool=mcp__web__echo', env.operator)).body.items[0];
    assert.equal(done.status, 'approved');
    assert.ok(done.decided_by.startsWith('key:'), done.decided_by);
  } finally {
    proxy.kill('SIGTERM');
    rmSync(pins, { recursive: true, force: true });
  }
});

test('a pending plan is one card listing its steps (secrets masked); approving only ticked steps sends them, Deny denies', async () => {
  const { page } = env;
  const token = `ghp_${'A1b2C3d4'.repeat(4)}`;
  const steps = [
    { tool: 'Bash', detail: 'ls src' },
    { tool: 'Bash', detail: `git push https://x:${token}@example.invalid/repo` },
    { tool: 'Bash', detail: 'cargo test' },
  ];
  const made = await env.call('POST', '/v1/plans', env.agent, { reason: 'build and check', session: 'web-plan-1', steps });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const plan = made.body;
  const item = page.locator(`#queue .card[data-kind=plan][data-id="${plan.id}"]`);
  await item.waitFor();
  const text = await item.innerText();
  assert.match(text, /Plan of 3 steps/);
  assert.match(text, /session web-plan-1/);
  assert.ok(text.indexOf('ls src') < text.indexOf('git push') && text.indexOf('git push') < text.indexOf('cargo test'), text);
  assert.ok(!text.includes(token), 'the token shows on the plan card');
  assert.ok(text.includes('••••'), text);
  // Usable on a small phone.
  await page.setViewportSize({ width: 360, height: 740 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'wider than a phone');
  await page.setViewportSize({ width: 1100, height: 800 });
  // Only steps 0 and 2.
  await item.locator('input.step-pick[data-step="1"]').uncheck();
  await item.locator('button.approve-some').click();
  await item.waitFor({ state: 'detached' });
  await page.locator('#toasts .toast', { hasText: 'plan' }).locator('button.send-now').click();
  let after;
  for (let t = 0; t < 100; t++) {
    after = (await env.call('GET', `/v1/plans/${plan.id}`, env.operator)).body;
    if (after.status !== 'pending') break;
    await sleep(100);
  }
  assert.equal(after.status, 'approved', JSON.stringify(after));
  assert.deepEqual(after.steps.map((s) => s.approved), [true, false, true]);

  // A second plan, denied; it leaves the queue and the count.
  const other = (await env.call('POST', '/v1/plans', env.agent, { session: 'web-plan-2', steps: [{ tool: 'Bash', detail: 'make deploy' }] })).body;
  const card2 = page.locator(`#queue .card[data-kind=plan][data-id="${other.id}"]`);
  await card2.waitFor();
  await card2.locator('button.deny').click();
  await card2.waitFor({ state: 'detached' });
  await page.locator('#toasts .toast', { hasText: 'plan' }).locator('button.send-now').click();
  for (let t = 0; t < 100; t++) {
    after = (await env.call('GET', `/v1/plans/${other.id}`, env.operator)).body;
    if (after.status !== 'pending') break;
    await sleep(100);
  }
  assert.equal(after.status, 'denied', JSON.stringify(after));
});

test('a plan step an approvals rule governs says on its card that it asks when it runs', async () => {
  const { page } = env;
  const put = await env.call('PUT', '/v1/agents/releaser', env.admin, { profile: {
    allow: [], ask: ['(?s).*'], approvals: [{ pattern: 'tool:deploy:prod.*', count: 2 }] } });
  assert.ok(put.status === 201 || put.status === 200, JSON.stringify(put.body));
  const key = (await env.call('POST', '/v1/keys', env.admin, { role: 'agent', agent: 'releaser' })).body.key;
  await page.goto(`${env.pageUrl}#/queue`);
  const made = await env.call('POST', '/v1/plans', key, { reason: 'release', session: 'web-plan-rule',
    steps: [{ tool: 'Bash', detail: 'make dist' }, { tool: 'deploy', detail: 'prod web' }] });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const item = page.locator(`#queue .card[data-kind=plan][data-id="${made.body.id}"]`);
  await item.waitFor();
  const notes = item.locator('.plan-steps li .asks');
  assert.equal(await notes.count(), 1);
  assert.match(await item.locator('.plan-steps li').nth(1).innerText(), /Asks when it runs: approvals rule #0 \(pattern `tool:deploy:prod\.\*`\) governs it/);
  // Approving it all says which step the plan did not grant.
  await item.locator('button.approve').click();
  await item.waitFor({ state: 'detached' });
  await page.locator('#toasts .toast', { hasText: 'plan' }).locator('button.send-now').click();
  await page.locator('#errors .notice', { hasText: 'still asked when run: step 1: approvals rule #0' }).waitFor();
  const after = (await env.call('GET', `/v1/plans/${made.body.id}`, env.operator)).body;
  assert.equal(after.status, 'approved', JSON.stringify(after));
  assert.deepEqual(after.steps.map((s) => s.approved), [true, false]);
});

test('sessions: a card and the action page name the session; the Sessions view lists it and its actions and ends it; an undecided run is a warning with no buttons', async () => {
  const { page } = env;
  await page.goto(`${env.pageUrl}#/queue`);
  const sid = 'web-sess-1';
  const made = await env.call('POST', '/v1/actions', env.agent, { tool: 'Bash', detail: 'make web-session-check', session: sid, runtime: 'claude-code' });
  assert.ok(made.status === 201 || made.status === 200, JSON.stringify(made.body));
  const a = made.body;
  assert.equal(a.status, 'pending', JSON.stringify(a));
  await card(a.id).waitFor();
  assert.match(await card(a.id).innerText(), /session web-sess-1/);

  // The action page names it, linking to the session.
  await page.goto(`${env.pageUrl}#/actions/${a.id}`);
  const link = page.locator('#action-session');
  await link.waitFor();
  assert.equal(await link.innerText(), sid);
  await link.click();
  await page.waitForSelector('#session-fields');
  const fields = await page.locator('#session-fields').innerText();
  assert.match(fields, /coder/);
  assert.match(fields, /claude-code/);
  assert.match(fields, /active/);
  assert.match(fields, /1 total: 1 pending/);
  await page.locator(`#session-actions tr[data-id="${a.id}"]`).waitFor();

  // The list.
  await page.goto(`${env.pageUrl}#/sessions`);
  const row = page.locator(`#sessions-table tr[data-id="${sid}"]`);
  await row.waitFor();
  const rowText = await row.innerText();
  assert.match(rowText, /coder/);
  assert.match(rowText, /active/);
  await page.setViewportSize({ width: 360, height: 740 });
  assert.ok(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth), 'wider than a phone');
  await page.setViewportSize({ width: 1100, height: 800 });
  // Ending it from the list.
  await row.locator('button.end-session').click();
  await page.locator(`#sessions-table tr[data-id="${sid}"]:has-text("ended")`).waitFor();
  assert.equal((await env.call('GET', `/v1/sessions/${sid}`, env.operator)).body.status, 'ended');
  // Its page says who ended it: the operator signed in.
  await page.goto(`${env.pageUrl}#/sessions?id=${encodeURIComponent(sid)}`);
  await page.waitForSelector('#session-fields');
  assert.match(await page.locator('#session-fields').innerText(), /ended \(.*, by you\)/);
  await env.call('POST', `/v1/actions/${a.id}/deny`, env.operator, {});

  // A run nobody decided: a warning in the queue, with no buttons.
  await page.goto(`${env.pageUrl}#/queue`);
  await page.waitForSelector('#queue');
  const run = await env.call('POST', '/v1/runs', env.agent, { tool: 'Bash', detail: 'make nobody-decided', session: 'web-sess-2' });
  assert.equal(run.body.decided, false, JSON.stringify(run.body));
  const warn = page.locator('#queue .card[data-kind=undecided]', { hasText: 'make nobody-decided' });
  await warn.waitFor();
  assert.match(await warn.innerText(), /Ran without a decision[\s\S]*session web-sess-2/);
  assert.equal(await warn.locator('button').count(), 0);
  // More runs of the same agent are counted on that one card, showing the
  // latest: an agent reporting many cannot bury the queue.
  for (const detail of ['make second-undecided', 'make third-undecided']) {
    const r = await env.call('POST', '/v1/runs', env.agent, { tool: 'Bash', detail, session: 'web-sess-2' });
    assert.equal(r.body.decided, false, JSON.stringify(r.body));
  }
  const counted = page.locator('#queue .card[data-kind=undecided]', { hasText: 'make third-undecided' });
  await counted.waitFor();
  assert.match(await counted.innerText(), /3 runs without a decision; the latest:/);
  assert.equal(await page.locator('#queue .card[data-kind=undecided]').count(), 1);
});

test('sessions: the list filters by status and agent and reads past its first page with More, each session once', async () => {
  const { page } = env;
  // An agent of its own whose sessions are all allowed reads: 130 of them.
  const put = await env.call('PUT', '/v1/agents/pager', env.admin, { profile: 'open' });
  assert.ok(put.status === 201 || put.status === 200, JSON.stringify(put.body));
  const key = (await env.call('POST', '/v1/keys', env.admin, { role: 'agent', agent: 'pager' })).body.key;
  for (let n = 0; n < 130; n++) {
    const r = await env.call('POST', '/v1/actions', key, { tool: 'Read', detail: `f${n}`, session: `pager ${String(n).padStart(3, '0')}` });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  const ended = await env.call('POST', `/v1/sessions/${encodeURIComponent('pager 010')}/end`, key, {});
  assert.equal(ended.status, 200, JSON.stringify(ended.body));

  await page.goto(`${env.pageUrl}#/sessions`);
  await page.waitForSelector('#sessions-filters');
  await page.fill('#sessions-filters input[name=agent]', 'pager');
  await page.click('#sessions-filters button[type=submit]');
  await page.waitForFunction(() => location.hash.includes('agent=pager'));
  // The filtered list, not the one drawn before the filter (whose first
  // page holds the same newest sessions): More must page the filtered one.
  const rows = page.locator('#sessions-table tbody tr');
  await page.locator('#sessions-table[data-filter="/pager"] tr[data-id="pager 129"]').waitFor();
  assert.equal(await rows.count(), 100);
  await page.click('#sessions-more');
  await page.locator('#sessions-table tr[data-id="pager 000"]').waitFor();
  assert.equal(await rows.count(), 130);
  const ids = await rows.evaluateAll((trs) => trs.map((tr) => tr.dataset.id));
  assert.equal(new Set(ids).size, 130, 'each session once');
  assert.ok(await page.locator('#sessions-more').isHidden());

  await page.selectOption('#sessions-filters select[name=status]', 'ended');
  await page.click('#sessions-filters button[type=submit]');
  await page.waitForFunction(() => location.hash.includes('status=ended'));
  await page.waitForFunction(() => document.querySelectorAll('#sessions-table tbody tr').length === 1);
  assert.equal(await rows.first().getAttribute('data-id'), 'pager 010');
  assert.ok(await page.locator('#sessions-more').isHidden());

  // A session of more actions than a page: More reads the rest.
  for (let n = 0; n < 205; n++) {
    const r = await env.call('POST', '/v1/actions', key, { tool: 'Read', detail: `g${n}`, session: 'pager long' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
  }
  await page.goto(`${env.pageUrl}#/sessions?id=${encodeURIComponent('pager long')}`);
  const acts = page.locator('#session-actions tbody tr');
  await page.waitForFunction(() => document.querySelectorAll('#session-actions tbody tr').length === 200);
  await page.click('#session-actions-more');
  await page.waitForFunction(() => document.querySelectorAll('#session-actions tbody tr').length === 205);
  const actIds = await acts.evaluateAll((trs) => trs.map((tr) => tr.dataset.id));
  assert.equal(new Set(actIds).size, 205, 'each action once');
  assert.ok(await page.locator('#session-actions-more').isHidden());
});

test('profile editor (admin key): the candidate is replayed before it can be saved, and a profile whose examples fail is refused, naming them', async () => {
  const { page } = env;
  // An agent of its own whose profile asks everything, and something recorded
  // that the candidate would decide otherwise.
  const put = await env.call('PUT', '/v1/agents/replayer', env.admin, { name: 'Replayer', profile: { allow: [], ask: ['.*'] } });
  assert.ok(put.status === 201 || put.status === 200, JSON.stringify(put.body));
  const before = put.body;
  const key = (await env.call('POST', '/v1/keys', env.admin, { role: 'agent', agent: 'replayer' })).body.key;
  const asked = (await env.call('POST', '/v1/actions', key, { tool: 'Bash', detail: 'make replay-me' })).body;
  assert.equal(asked.status, 'pending', JSON.stringify(asked));
  await env.call('POST', `/v1/actions/${asked.id}/deny`, env.operator, {});
  await page.click('#sign-out');
  await page.fill('#key', env.admin);
  await page.click('#sign-in-form button[type=submit]');
  await page.waitForSelector('#stream-state[data-state=live]');
  try {
    await page.goto(`${env.pageUrl}#/agents`);
    await page.waitForSelector('#agents-table, #view .empty');
    const listed = await page.locator('#view').innerText();
    assert.ok(listed.includes('replayer'), listed);
    await page.locator('#agents-table tr[data-id="replayer"] a').click();
    await page.waitForSelector('#profile-text');
    assert.ok(await page.locator('#profile-save').isDisabled(), 'Save before any replay');
    // Failing examples: replayed, then refused on save, each named; nothing changes.
    const failing = { allow: ['tool:Bash:make .*'], ask: ['.*'], examples: { deny: ['tool:Bash:make x'], ask: ['tool:Bash:make y'] } };
    await page.fill('#profile-text', JSON.stringify(failing));
    await page.click('#profile-preview');
    await page.waitForSelector('#replay-summary');
    assert.match(await page.locator('#replay-summary').innerText(), /asked would now be allowed/);
    const replay = await page.locator('#replay-result').innerText();
    assert.ok(replay.includes("make replay-me"), replay + await page.locator("#replay-result").innerHTML());
    await page.click('#profile-save');
    await page.waitForSelector('#profile-errors li');
    const errs = await page.locator('#profile-errors').innerText();
    assert.match(errs, /Not saved/);
    assert.match(errs, /profile\.examples\.deny\[0\]/);
    assert.match(errs, /profile\.examples\.ask\[0\]/);
    assert.deepEqual((await env.call('GET', '/v1/agents/replayer', env.admin)).body.profile, before.profile);
    // Editing after a replay disables Save until it is replayed again.
    const good = { allow: ['tool:Bash:make .*'], ask: ['.*'], examples: { allow: ['tool:Bash:make x'] } };
    await page.fill('#profile-text', JSON.stringify(good));
    assert.ok(await page.locator('#profile-save').isDisabled(), 'Save after an edit, before its replay');
    await page.click('#profile-preview');
    await page.waitForSelector('#profile-save:not([disabled])');
    await page.click('#profile-save');
    await page.waitForSelector('#errors .notice:has-text("saved")');
    assert.deepEqual((await env.call('GET', '/v1/agents/replayer', env.admin)).body.profile.allow, good.allow);
    // A quorum more people than are registered: saved, and the editor says
    // its actions could not be approved.
    const quorum = { allow: [], ask: ['.*'], approvals: [{ pattern: 'tool:deploy:.*', count: 10 }] };
    await page.fill('#profile-text', JSON.stringify(quorum));
    await page.click('#profile-preview');
    await page.waitForSelector('#profile-save:not([disabled])');
    await page.click('#profile-save');
    await page.waitForSelector('#profile-warnings li');
    assert.match(await page.locator('#profile-warnings').innerText(), /approvals rule #0 .* needs 10 approvals from distinct people/);
    assert.equal((await env.call('GET', '/v1/agents/replayer', env.admin)).body.profile.approvals[0].count, 10);
  } finally {
    await page.click('#sign-out');
    await page.fill('#key', env.operator);
    await page.click('#sign-in-form button[type=submit]');
    await page.waitForSelector('#stream-state[data-state=live]');
  }
});
