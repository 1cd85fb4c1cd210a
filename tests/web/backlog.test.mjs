// A queue longer than the page loads at once (backlog.js: 2,000 actions):
// the longest waiting are loaded first, the count says "2000+", and the
// rest comes in as the queue goes down. Real daemon, real Chromium.

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startAll, stopAll } from './harness.mjs';

let env;

before(async () => {
  process.env.ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT = '3000';
  env = await startAll();
});

after(async () => {
  if (!env) return;
  const errors = env.consoleErrors.filter((e) => !/Failed to load resource|ERR_/.test(e));
  await stopAll(env);
  assert.deepEqual(errors, []);
});

/** Asks `total` pending actions, 16 at a time, in the order of `detail(i)`. */
async function ask(total, detail) {
  let next = 0;
  const worker = async () => {
    while (next < total) {
      const i = next++;
      const r = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: detail(i) });
      assert.equal(r.body.status, 'pending', JSON.stringify(r.body));
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

/** The ids of the `n` longest-waiting pending actions. */
async function oldest(n) {
  const ids = [];
  let cursor = null;
  while (ids.length < n) {
    const q = new URLSearchParams({ status: 'pending', order: 'oldest', limit: '200' });
    if (cursor) q.set('cursor', cursor);
    const r = await env.call('GET', `/v1/actions?${q}`, env.operator);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    ids.push(...r.body.items.map((a) => a.id));
    cursor = r.body.next_cursor;
    if (!cursor) break;
  }
  return ids.slice(0, n);
}

async function titleIs(page, want) {
  try {
    await page.waitForFunction((t) => document.title === t, want, { timeout: 60000 });
  } catch (e) {
    throw new Error(`${e.message}: the title is ${JSON.stringify(await page.title())}, not ${JSON.stringify(want)}`);
  }
}

test('a queue over 2,000: the longest waiting are shown, the count says 2000+, the rest loads as it goes down', async () => {
  const { page } = env;
  const first = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: 'echo the-longest-waiting' });
  assert.equal(first.body.status, 'pending');
  await ask(2050, (i) => `echo backlog-${i}`);
  const last = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: 'echo the-newest' });
  assert.equal(last.body.status, 'pending');

  await page.goto(env.pageUrl);
  await page.fill('#key', env.operator);
  await page.click('#sign-in-form button[type=submit]');
  await page.waitForSelector('#stream-state[data-state=live]');
  await titleIs(page, '(2000+) actiongate');
  assert.equal(await page.locator('#pending-count').innerText(), '2000+');
  await page.waitForSelector('#backlog');
  // The oldest item, which a newest-first load left out, is there.
  await page.fill('#queue-search', 'the-longest-waiting');
  await page.waitForSelector(`#queue .card[data-id="${first.body.id}"]`);
  await page.fill('#queue-search', '');

  // Others decide 300 of the longest waiting: the page reads on and,
  // having reached the end, shows the exact count and the newest item.
  const settled = (await oldest(301)).filter((id) => id !== first.body.id).slice(0, 300);
  assert.equal(settled.length, 300);
  let next = 0;
  const worker = async () => {
    while (next < settled.length) {
      const id = settled[next++];
      const r = await env.call('POST', `/v1/actions/${id}/deny`, env.operator, { reason: 'cleared' });
      assert.equal(r.status, 200, JSON.stringify(r.body));
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  await titleIs(page, '(1752) actiongate');
  assert.equal(await page.locator('#backlog').count(), 0);
  await page.fill('#queue-search', 'the-newest');
  await page.waitForSelector(`#queue .card[data-id="${last.body.id}"]`);
});

test('approving a selection that holds items never drawn first says how many, of which agent and tool', async () => {
  const { page } = env;
  const made = [];
  for (let i = 0; i < 60; i++) {
    const r = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: `echo sel-${i}` });
    assert.equal(r.body.status, 'pending');
    made.push(r.body.id);
  }
  await page.fill('#queue-search', 'sel-');
  await page.waitForFunction(() => document.querySelectorAll('#queue .card').length === 50);
  await page.click('#select-all');
  assert.equal(await page.locator('#bulk-count').innerText(), '60 selected');
  await page.click('#bulk-approve');
  const dialog = page.locator('#bulk-dialog');
  await dialog.waitFor();
  assert.equal(await page.locator('#bulk-title').innerText(), 'Approve 60 items?');
  assert.match(await dialog.innerText(), /10 of them are not drawn/);
  assert.deepEqual(await page.locator('#bulk-kinds li').allInnerTexts(), ['60 × coder · bash']);
  // Cancel decides nothing and keeps the selection.
  await page.click('#bulk-cancel');
  // (The dialog leaves on its close event, a task after the click.)
  await dialog.waitFor({ state: 'detached' });
  assert.equal(await dialog.count(), 0);
  assert.equal(await page.locator('#bulk-count').innerText(), '60 selected');
  assert.equal((await env.call('GET', `/v1/actions/${made[59]}`, env.operator)).body.status, 'pending');
  // Confirmed, all 60 are approved once the undo window closes.
  await page.click('#bulk-approve');
  await page.click('#bulk-confirm');
  const deadline = Date.now() + 30000;
  for (;;) {
    const states = await Promise.all(made.map((id) => env.call('GET', `/v1/actions/${id}`, env.operator)));
    if (states.every((r) => r.body.status === 'approved')) break;
    assert.ok(Date.now() < deadline, 'not all approved');
    await new Promise((r) => setTimeout(r, 500));
  }
  // A selection of drawn items only is approved without the question.
  const few = [];
  for (let i = 0; i < 3; i++) {
    const r = await env.call('POST', '/v1/actions', env.agent, { tool: 'bash', detail: `echo few-${i}` });
    few.push(r.body.id);
  }
  await page.fill('#queue-search', 'few-');
  for (const id of few) await page.locator(`#queue .card[data-id="${id}"] input.select`).check();
  await page.click('#bulk-approve');
  assert.equal(await page.locator('#bulk-dialog').count(), 0);
  await page.locator('#queue .card').first().waitFor({ state: 'detached' });
});

test('over 500 grant requests and 200 plans: the longest waiting of each is loaded, a page at a time', async () => {
  const { page } = env;
  const ask = (reason) => env.call('POST', '/v1/grant-requests', env.agent,
    { handler: 'fs', permission: 'fs.write', scope: { path: 'pages/*' }, reason });
  const plan = (detail) => env.call('POST', '/v1/plans', env.agent,
    { session: 'pages', steps: [{ tool: 'bash', detail }] });
  const first = await ask('gr-longest-waiting');
  assert.equal(first.status, 201, JSON.stringify(first.body));
  const firstPlan = await plan('echo plan-longest-waiting');
  assert.equal(firstPlan.status, 201, JSON.stringify(firstPlan.body));
  let next = 0;
  const worker = async () => {
    while (next < 500) {
      const i = next++;
      const r = await ask(`gr-backlog-${i}`);
      assert.equal(r.status, 201, JSON.stringify(r.body));
      if (i < 200) assert.equal((await plan(`echo plan-backlog-${i}`)).status, 201);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  // Loaded afresh from the lists (the stream only brings what comes next).
  await page.goto(env.pageUrl);
  await page.waitForSelector('#key, #stream-state[data-state=live]');
  if (await page.locator('#key').isVisible()) {
    await page.fill('#key', env.operator);
    await page.click('#sign-in-form button[type=submit]');
  }
  await page.waitForSelector('#stream-state[data-state=live]');
  await page.fill('#queue-search', 'gr-longest-waiting');
  await page.waitForSelector(`#queue .card[data-id="${first.body.id}"]`);
  await page.fill('#queue-search', 'plan-longest-waiting');
  await page.waitForSelector(`#queue .card[data-id="${firstPlan.body.id}"]`);
  await page.fill('#queue-search', '');
});

test('plans too large for one page of 2 MiB: the daemon cuts the page short and links the next, and every plan loads', async () => {
  const { page } = env;
  const filler = `echo ${'f'.repeat(3990)}`;
  const ids = [];
  for (let i = 0; i < 5; i++) {
    const steps = [{ tool: 'bash', detail: `echo plan-big-${i}` }];
    for (let n = 1; n < 200; n++) steps.push({ tool: 'bash', detail: filler });
    const r = await env.call('POST', '/v1/plans', env.agent, { session: `big-${i}`, steps });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    ids.push(r.body.id);
  }
  await page.goto(env.pageUrl);
  await page.waitForSelector('#key, #stream-state[data-state=live]');
  if (await page.locator('#key').isVisible()) {
    await page.fill('#key', env.operator);
    await page.click('#sign-in-form button[type=submit]');
  }
  await page.waitForSelector('#stream-state[data-state=live]');
  await page.fill('#queue-search', 'plan-big-4');
  await page.waitForSelector(`#queue .card[data-id="${ids[4]}"]`);
  await page.fill('#queue-search', '');
});

test('the grants table shows every active grant, more than one page of them', async () => {
  const { page } = env;
  const made = [];
  let next = 0;
  // For a tool none of the 2,000 pending actions above uses: a grant
  // approves the pending actions it covers, and looking through them for
  // each of 520 grants is not what this test is about.
  const worker = async () => {
    while (next < 520) {
      const i = next++;
      const r = await env.call('POST', '/v1/grants', env.operator,
        { agent: 'coder', tool: 'deploy', pattern: `grant-page-${i}`, expires: '1h' });
      assert.equal(r.status, 201, JSON.stringify(r.body));
      made.push(r.body.id);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  await page.click('#nav a[data-view=grants]');
  await page.waitForSelector('#grants-table');
  // The oldest made is on the second page of the API's listing.
  made.sort();
  await page.locator(`#grants-table tr[data-id="${made[0]}"]`).waitFor();
  const shown = await page.locator('#grants-table tbody tr').count();
  assert.ok(shown >= 520, `${shown} rows`);
  assert.equal(await page.locator('#grants-cut').count(), 0);
});

test('grants too large for one page of 2 MiB: the daemon cuts the page short and links the next, and every grant shows', async () => {
  const { page } = env;
  // 140 grants of about 15 KB of scope each (16 KiB is the limit): the
  // first page stops near 2 MiB, far short of its 500.
  const big = [];
  // The grants view is open while they are made: it reloads at most once
  // per 300 ms of the burst, not once per grant.
  let reloads = 0;
  const count = (req) => {
    const u = new URL(req.url());
    if (u.pathname === '/v1/grants' && !u.searchParams.has('after')) reloads++;
  };
  page.on('request', count);
  const began = Date.now();
  for (let i = 0; i < 140; i++) {
    const r = await env.call('POST', '/v1/grants', env.operator,
      { agent: 'coder', handler: 'fs', permission: 'fs.write', scope: { path: `big-${i}/${'p'.repeat(15000)}` }, expires: '1h' });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    big.push(r.body.id);
  }
  await new Promise((r) => setTimeout(r, 400));
  page.off('request', count);
  const most = Math.ceil((Date.now() - began) / 300) + 1;
  assert.ok(reloads <= most && reloads < big.length / 2, `${reloads} reloads for ${big.length} grants (at most ${most})`);
  const first = await env.call('GET', '/v1/grants?active=true&limit=500', env.operator);
  assert.ok(first.body.length < 140, `${first.body.length} grants on the first page`);
  // The grants view was open while they were made, so a table drawn
  // part-way through may still be on screen: wait for the queue to replace
  // it before asking for the grants again.
  await page.click('#nav a[data-view=queue]');
  await page.waitForSelector('#grants-table', { state: 'detached' });
  await page.click('#nav a[data-view=grants]');
  await page.waitForSelector('#grants-table');
  // The oldest of them, and every small one before them, past the cut.
  big.sort();
  await page.locator(`#grants-table tr[data-id="${big[0]}"]`).waitFor();
  const shown = await page.locator('#grants-table tbody tr').count();
  assert.ok(shown >= 660, `${shown} rows`);
});
