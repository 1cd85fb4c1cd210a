// The client's surface, method for method, against the real daemon.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Aborted, ActionGateError, ApiError, Client, Denied, Expired, TimedOut, Unreachable, approvedSteps, askingSteps, isApproved, isSettled, settle, wasApproved } from '../dist/index.js';
import { deadUrl, startDaemon } from './daemon.mjs';

let d;
let op;
before(async () => {
  d = await startDaemon();
  op = new Client({ url: d.url, key: await d.key('operator') });
});
after(async () => d && (await d.stop()));

async function agentClient(profile) {
  const a = await d.agent(profile);
  return { name: a.name, client: new Client({ url: d.url, key: a.key }) };
}

/**
 * A proxy in front of the daemon that passes every request on but answers
 * the first POST with 503 (what it made was made, its answer lost), as a
 * busy daemon or a proxy may; `keys` are the idempotency keys POSTed.
 */
async function lossyProxy() {
  const keys = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', async () => {
      if (req.method === 'POST') keys.push(JSON.parse(body || '{}').idempotency_key);
      const r = await fetch(d.url + req.url, { method: req.method, headers: { authorization: req.headers.authorization, 'content-type': 'application/json' }, body: body || undefined });
      const text = await r.text();
      if (req.method === 'POST' && keys.length === 1) {
        res.writeHead(503, { 'retry-after': '0', 'content-type': 'application/problem+json' });
        return res.end(JSON.stringify({ title: 'busy', status: 503 }));
      }
      res.writeHead(r.status, { 'content-type': 'application/json' });
      res.end(text);
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { keys, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/** The pending grant requests for `handler`, once there is one (5 s at most). */
async function pendingRequests(handler) {
  let reqs = [];
  for (let i = 0; i < 100 && !reqs.length; i++) {
    reqs = (await op.grantRequests()).filter((r) => r.handler === handler);
    if (!reqs.length) await new Promise((r) => setTimeout(r, 50));
  }
  return reqs;
}

/** A loopback executor that answers 200 and records what it ran. */
async function executor() {
  const received = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push(JSON.parse(body || '{}'));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ran: true }));
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/`, received, close: () => server.close() };
}

describe('construction', () => {
  test('url and key come from the environment', async () => {
    const { name } = await agentClient();
    const key = await d.key('agent', name);
    process.env.ACTIONGATE_URL = d.url;
    process.env.ACTIONGATE_KEY = key;
    try {
      const c = new Client();
      assert.equal(c.url, d.url);
      assert.equal((await c.whoami()).agent, name);
    } finally {
      delete process.env.ACTIONGATE_URL;
      delete process.env.ACTIONGATE_KEY;
    }
  });

  test('no key is a clear error', () => {
    delete process.env.ACTIONGATE_KEY;
    assert.throws(() => new Client({ url: d.url }), (e) => e instanceof ActionGateError && /no API key/.test(e.message));
  });

  test('a url without a scheme is refused', () => {
    assert.throws(() => new Client({ url: 'localhost:8080', key: 'k' }), /must start with http/);
  });
});

describe('agents', () => {
  test('check answers allow, ask and deny', async () => {
    const { client } = await agentClient();
    assert.equal((await client.check('echo', 'hi')).result, 'allow');
    assert.equal((await client.check('bash', 'ls')).result, 'ask');
    const denied = await client.check('danger', 'x');
    assert.equal(denied.result, 'deny');
    assert.ok(denied.reason);
  });

  test('request waits for the operator and resolves to the approved action', async () => {
    const { name, client } = await agentClient();
    const waiting = client.request('bash', 'make deploy', { reason: 'ship it', wait: 30 });
    await d.decideNext(name, 'approve');
    const action = await waiting;
    assert.equal(action.status, 'approved');
    assert.equal(action.detail, 'make deploy');
    assert.equal(action.reason, 'ship it');
  });

  test('request without wait returns the pending action', async () => {
    const { client } = await agentClient();
    const action = await client.request('bash', 'ls', { timeout: '5m' });
    assert.equal(action.status, 'pending');
    assert.equal(isSettled(action), false);
    assert.equal((await client.cancel(action.id)).status, 'cancelled');
  });

  test('a policy allow settles at once', async () => {
    const { client } = await agentClient();
    const action = await client.request('echo', 'hi', { wait: 5 });
    assert.equal(action.status, 'approved');
    assert.equal(action.decision.result, 'allow');
  });

  test('an idempotency key given twice makes one action', async () => {
    const { client } = await agentClient();
    const a = await client.request('bash', 'ls', { idempotencyKey: 'ts-same-key' });
    const b = await client.request('bash', 'ls', { idempotencyKey: 'ts-same-key' });
    assert.equal(a.id, b.id);
    await client.cancel(a.id);
  });

  test('get and wait read the action; wait times out with TimedOut', async () => {
    const { name, client } = await agentClient();
    const a = await client.request('bash', 'sleep 1');
    assert.equal((await client.get(a.id)).id, a.id);
    await assert.rejects(client.wait(a.id, 1), (e) => e instanceof TimedOut && e.action?.status === 'pending');
    const waiting = client.wait(a.id, 20);
    await d.decideNext(name, 'deny', 'not now');
    const settled = await waiting;
    assert.equal(settled.status, 'denied');
    assert.equal(settled.decision_note, 'not now');
  });

  test('report records how an approved action went', async () => {
    const { client } = await agentClient();
    const a = await client.request('echo', 'hi', { wait: 5 });
    const done = await client.report(a.id, 'completed', { result: { lines: 3 } });
    assert.equal(done.status, 'completed');
  });

  test('run asks for a handler action and its executor runs it', async () => {
    const ex = await executor();
    const handler = `tsx${Math.random().toString(16).slice(2, 8)}`;
    try {
      await d.call('POST', '/v1/handlers', {
        id: handler,
        name: 'TS test executor',
        url: ex.url,
        permissions: [{ name: 'notes.write', parameters_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
        actions: [
          {
            name: 'write',
            permission: 'notes.write',
            params_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
            scope: { path: '/path' },
            detail: 'write {path}',
          },
        ],
      });
      const { name, client } = await agentClient({ allow: [], ask: [`tool:${handler}:.*`], deny: [] });
      const waiting = client.run(handler, 'write', { path: 'a.txt' }, { wait: 30 });
      await d.decideNext(name, 'approve');
      const action = await waiting;
      assert.equal(action.status, 'completed');
      assert.equal(ex.received.length, 1);
      assert.deepEqual(ex.received[0].params, { path: 'a.txt' });
      // Invalid params: a 422 naming the field, nothing stored.
      await assert.rejects(client.run(handler, 'write', { nope: 1 }), (e) => e instanceof ApiError && e.status === 422);
    } finally {
      ex.close();
    }
  });

  test('requestPermission without a handler is an item an operator approves', async () => {
    const { name, client } = await agentClient();
    const waiting = client.requestPermission('deploy.prod', 'release 1.2', { timeoutMinutes: 1 });
    const item = await d.pendingOf(name);
    assert.equal(item.tool, 'permission');
    await d.call('POST', `/v1/actions/${item.id}/approve`, {});
    assert.equal(await waiting, true);
    const denied = client.requestPermission('deploy.prod', 'again', { timeoutMinutes: 1 });
    await d.decideNext(name, 'deny', 'no');
    assert.equal(await denied, false);
    await assert.rejects(client.requestPermission('x', 'y', { timeoutMinutes: 0 }), RangeError);
    // Approved as an approver edited it is a permission other than asked.
    const edited = client.requestPermission('deploy.prod', 'once more', { timeoutMinutes: 1 });
    const next = await d.pendingOf(name);
    await d.call('POST', `/v1/actions/${next.id}/approve`, { detail: 'deploy.staging' });
    assert.equal(await edited, false);
  });

  test('isApproved is the call as asked, once', () => {
    const a = (status, more = {}) => ({ id: 'a1', status, tool: 'bash', detail: 'ls', ...more });
    assert.equal(isApproved(a('approved')), true);
    assert.equal(isApproved(a('approved', { edited: true, approved_detail: 'pwd' })), false);
    assert.equal(wasApproved(a('approved', { edited: true })), true);
    for (const status of ['running', 'completed', 'failed']) {
      assert.equal(isApproved(a(status)), false, status);
      assert.throws(() => settle(a(status)), (e) => e instanceof ActionGateError && /run already/.test(e.message), status);
    }
    assert.equal(isApproved(a('completed', { handler: 'files' })), true);
  });

  test('requestPlan asks once for a task and waits; its steps then run unasked but for one a rule governs', async () => {
    const { name, client } = await agentClient({ allow: [], ask: ['(?s).*'], approvals: [{ pattern: 'tool:deploy:prod.*', count: 2 }] });
    const steps = [{ tool: 'bash', detail: 'make dist' }, { tool: 'deploy', detail: 'prod web' }];
    const waiting = client.requestPlan(steps, { session: 'ts-task', reason: 'release', timeout: 30 });
    let pending = [];
    for (let i = 0; i < 400 && !pending.length; i++) {
      pending = (await d.call('GET', '/v1/plans?status=pending')).filter((p) => p.agent === name);
      if (!pending.length) await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(pending.length, 1);
    await d.call('POST', `/v1/plans/${pending[0].id}/approve`, {});
    const plan = await waiting;
    assert.equal(plan.status, 'approved');
    assert.deepEqual(approvedSteps(plan), [0]);
    const asks = askingSteps(plan);
    assert.deepEqual([...asks.keys()], [1]);
    assert.match(asks.get(1), /approvals rule #0/);
    assert.equal((await client.plan(plan.id)).status, 'approved');
    assert.equal((await client.check('bash', 'make dist', { session: 'ts-task' })).result, 'allow');
    assert.equal((await client.check('deploy', 'prod web', { session: 'ts-task' })).result, 'ask');
    // Nobody decides in time: it comes back pending.
    const late = await client.requestPlan([{ tool: 'bash', detail: 'make docs' }], { session: 'ts-task', timeout: 1 });
    assert.equal(late.status, 'pending');
    await assert.rejects(client.requestPlan([], { session: 'ts-task' }), RangeError);
    await assert.rejects(client.requestPlan([{ tool: 'bash' }], { session: 'ts-task', timeout: 0 }), (e) => e instanceof ApiError && e.status === 422);
  });

  test('events is an async iterator that resumes after its last seq', async () => {
    const { client } = await agentClient();
    const ac = new AbortController();
    const seen = [];
    const a = await client.request('bash', 'echo events', { timeout: '5m' });
    for await (const e of op.events({ since: 0, types: 'action.*', signal: ac.signal })) {
      if (e.data?.action?.id === a.id || e.data?.action_id === a.id || JSON.stringify(e.data).includes(a.id)) {
        seen.push(e);
        break;
      }
    }
    ac.abort();
    assert.equal(seen.length, 1);
    const seq = seen[0].seq;
    assert.ok(Number.isInteger(seq));
    await client.cancel(a.id);
    // Resuming after `seq` gives the events after it, starting with the next.
    const ac2 = new AbortController();
    let next;
    for await (const e of op.events({ since: seq, signal: ac2.signal })) {
      next = e;
      break;
    }
    ac2.abort();
    assert.ok(next.seq > seq);
  });
});

test('events without since loses nothing when the stream drops before its first event', async () => {
  // The first stream is cut right after its headers; meanwhile an action
  // is asked. The client resumes from where that stream started (its
  // actiongate-resume-after), not from the newest event at reconnection.
  const { client } = await agentClient();
  const operator = await d.key('operator');
  let calls = 0;
  let made;
  const cutFirst = async (input, init) => {
    const response = await fetch(input, init);
    if (!String(input).includes('/v1/events') || calls++ > 0) return response;
    await response.body?.cancel();
    made = await client.request('bash', 'made while the stream was down', { timeout: '5m' });
    return new Response(new ReadableStream({ start: (c) => c.close() }), { status: 200, headers: response.headers });
  };
  const ac = new AbortController();
  const stop = setTimeout(() => ac.abort(), 10000);
  const follower = new Client({ url: d.url, key: operator, fetch: cutFirst });
  let seen;
  for await (const e of follower.events({ types: 'action.*', signal: ac.signal })) {
    if (JSON.stringify(e.data).includes(made.id)) {
      seen = e;
      break;
    }
  }
  clearTimeout(stop);
  ac.abort();
  assert.ok(seen, 'the event made during the drop was delivered');
  assert.equal(calls, 2);
  await client.cancel(made.id);
});

describe('operators', () => {
  test('pending lists oldest first; approve, deny', async () => {
    const { name, client } = await agentClient();
    const first = await client.request('bash', 'one', { timeout: '5m' });
    const second = await client.request('bash', 'two', { timeout: '5m' });
    const mine = (await op.pending()).filter((a) => a.agent === name);
    assert.deepEqual(mine.map((a) => a.id), [first.id, second.id]);
    assert.equal((await op.approve(first.id, { note: 'ok' })).status, 'approved');
    assert.equal((await op.deny(second.id, { reason: 'no' })).status, 'denied');
    // A second answer is a conflict with the current status.
    await assert.rejects(op.approve(second.id), (e) => e instanceof ApiError && e.status === 409 && e.currentStatus === 'denied');
  });

  test('approve names the version read', async () => {
    const { client } = await agentClient();
    const a = await client.request('bash', 'make dist', { timeout: '5m' });
    // Nobody edited it: an approval of an edited version is refused.
    await assert.rejects(op.approve(a.id, { seen: 'edited' }), (e) => e instanceof ApiError && e.status === 409 && /nobody edited/.test(e.detail));
    assert.equal((await op.approve(a.id, { seen: 'asked' })).status, 'approved');
  });

  test('approve with remember grants, grant and revoke', async () => {
    const { name, client } = await agentClient();
    const a = await client.request('bash', 'make test', { timeout: '5m' });
    await op.approve(a.id, { remember: '1h' });
    assert.equal((await client.request('bash', 'make test', { wait: 5 })).status, 'approved');
    const g = await op.grant({ tool: 'bash', pattern: 'make lint', expires: '1h', agent: name });
    assert.ok(g.id);
    assert.equal((await client.check('bash', 'make lint')).result, 'allow');
    await op.revoke(g.id);
    assert.equal((await client.check('bash', 'make lint')).result, 'ask');
    await assert.rejects(op.grant({ expires: '1h' }), RangeError);
  });

  test('approve with remember for one session, or for a number of uses; grant them too', async () => {
    const { name, client } = await agentClient();
    const a = await client.request('bash', 'make check', { timeout: '5m', session: 'ts-task-a' });
    await op.approve(a.id, { remember: { expires: '1h', session: 'ts-task-a' } });
    assert.equal((await client.check('bash', 'make check', { session: 'ts-task-a' })).result, 'allow');
    assert.equal((await client.check('bash', 'make check', { session: 'ts-task-b' })).result, 'ask');
    assert.equal((await client.check('bash', 'make check')).result, 'ask');
    const b = await client.request('bash', 'make bench', { timeout: '5m' });
    await op.approve(b.id, { remember: { expires: '1h', uses: 1 } });
    assert.equal((await client.request('bash', 'make bench', { wait: 5 })).status, 'approved');
    const again = await client.request('bash', 'make bench', { timeout: '5m' });
    assert.equal(again.status, 'pending');
    await client.cancel(again.id);
    const g = await op.grant({ tool: 'bash', pattern: 'make fmt', agent: name, session: 'ts-task-c', uses: 1 });
    assert.equal(g.session, 'ts-task-c');
    assert.equal(g.uses, 1);
  });

  test('approve with an edit approves the edit, not the call as asked', async () => {
    const { client } = await agentClient();
    const a = await client.request('bash', 'rm -rf build', { timeout: '5m' });
    const approved = await op.approve(a.id, { detail: 'rm -rf build/tmp', note: 'narrower' });
    assert.equal(approved.status, 'approved');
    assert.equal(approved.edited, true);
    assert.equal(approved.approved_detail, 'rm -rf build/tmp');
    assert.equal(isApproved(approved), false);
    // An edit is approved once: not with remember.
    const b = await client.request('bash', 'rm -rf dist', { timeout: '5m' });
    await assert.rejects(op.approve(b.id, { detail: 'rm -rf dist/tmp', remember: '1h' }), (e) => e instanceof ApiError && e.status === 422);
    await client.cancel(b.id);
  });

  test('approve with edited params runs the handler action with them', async () => {
    const ex = await executor();
    const handler = `tse${Math.random().toString(16).slice(2, 8)}`;
    try {
      await d.call('POST', '/v1/handlers', {
        id: handler,
        name: 'TS edits',
        url: ex.url,
        permissions: [{ name: 'notes.write', parameters_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
        actions: [
          {
            name: 'write',
            permission: 'notes.write',
            params_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] },
            scope: { path: '/path' },
            detail: 'write {path}',
          },
        ],
      });
      const { client } = await agentClient({ allow: [], ask: [`tool:${handler}:.*`], deny: [] });
      const a = await client.run(handler, 'write', { path: 'a.txt' });
      const approved = await op.approve(a.id, { params: { path: 'b.txt' } });
      assert.equal(approved.edited, true);
      assert.equal((await client.wait(a.id, 20)).status, 'completed');
      assert.deepEqual(ex.received.map((r) => r.params), [{ path: 'b.txt' }]);
    } finally {
      ex.close();
    }
  });

  test('grant requests: list, approve and deny', async () => {
    const ex = await executor();
    const handler = `tsg${Math.random().toString(16).slice(2, 8)}`;
    try {
      await d.call('POST', '/v1/handlers', {
        id: handler,
        name: 'TS grants',
        url: ex.url,
        permissions: [{ name: 'notes.write', parameters_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
        actions: [{ name: 'write', permission: 'notes.write', params_schema: { type: 'object' }, detail: 'write' }],
      });
      const { client } = await agentClient();
      const asked = client.requestPermission('notes.write', 'need notes', { handler, timeoutMinutes: 1 });
      let reqs = await pendingRequests(handler);
      await op.approveGrantRequest(reqs[0].id, { expires: '1h' });
      assert.equal(await asked, true);
      // Granted narrower than asked: not as asked.
      const wide = client.requestPermission('notes.write', 'all notes', { handler, scope: { path: '*' }, timeoutMinutes: 1 });
      reqs = await pendingRequests(handler);
      await op.approveGrantRequest(reqs[0].id, { scope: { path: 'notes/today.md' }, expires: '1h' });
      assert.equal(await wide, false);
      const refused = client.requestPermission('notes.write', 'more', { handler, timeoutMinutes: 1 });
      reqs = await pendingRequests(handler);
      const denied = await op.denyGrantRequest(reqs[0].id, { reason: 'enough' });
      assert.equal(denied.status, 'denied');
      assert.equal(await refused, false);
      assert.ok((await op.grantRequests({ status: null })).length >= 2);
    } finally {
      ex.close();
    }
  });

  /** A handler taking a path scope, and pending grant requests for it:
   * `perAgent[n]` from each of fresh agents (at most 100 pending each), of
   * scope `{ path: path(n, i) }`, each id pushed to `made` as it is made. */
  async function askMany(made, perAgent, path) {
    const handler = `tsp${Math.random().toString(16).slice(2, 8)}`;
    await d.call('POST', '/v1/handlers', {
      id: handler,
      name: 'TS paging',
      url: 'http://127.0.0.1:9/hook',
      permissions: [{ name: 'notes.write', parameters_schema: { type: 'object', properties: { path: { type: 'string' } } } }],
      actions: [{ name: 'write', permission: 'notes.write', params_schema: { type: 'object' }, detail: 'write' }],
    });
    for (const [n, count] of perAgent.entries()) {
      const a = await d.agent();
      for (let i = 0; i < count; i++) {
        const r = await fetch(`${d.url}/v1/grant-requests`, {
          method: 'POST',
          headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ handler, permission: 'notes.write', reason: 'paging', scope: { path: path(n, i) }, timeout: '10m' }),
        });
        const body = await r.text();
        assert.equal(r.status, 201, body);
        made.push(JSON.parse(body).id);
      }
    }
    return handler;
  }

  test('grantRequests reads every page, oldest first', async () => {
    // 501 pending (a page is 500).
    const made = [];
    try {
      const handler = await askMany(made, [84, 84, 84, 84, 84, 81], (n, i) => `/p/${n}/${i}`);
      const listed = (await op.grantRequests()).filter((r) => r.handler === handler).map((r) => r.id);
      assert.deepEqual(listed, made);
    } finally {
      for (const id of made) await d.call('POST', `/v1/grant-requests/${id}/deny`, {});
    }
  });

  test('grantRequests follows a page cut short for its size', async () => {
    // 140 requests of about 15 KB: past the 2 MiB one page holds, so the
    // first page is cut short of its 500 and links the next.
    const made = [];
    try {
      const handler = await askMany(made, [70, 70], (n, i) => `/p/${n}/${i}/${'x'.repeat(15000)}`);
      const first = await fetch(`${d.url}/v1/grant-requests?status=pending&order=oldest&limit=500`, { headers: { authorization: `Bearer ${await d.key('operator')}` } });
      await first.arrayBuffer();
      assert.match(first.headers.get('link') ?? '', /; rel="next"$/);
      const listed = (await op.grantRequests()).filter((r) => r.handler === handler).map((r) => r.id);
      assert.deepEqual(listed, made);
    } finally {
      for (const id of made) await d.call('POST', `/v1/grant-requests/${id}/deny`, {});
    }
  });

  test('plans are listed, approved step by step and denied', async () => {
    const a = await d.agent();
    const plan = async (session, details) => {
      const r = await fetch(`${d.url}/v1/plans`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ session, steps: details.map((detail) => ({ tool: 'bash', detail })) }),
      });
      const body = await r.text();
      assert.equal(r.status, 201, body);
      return JSON.parse(body).id;
    };
    const first = await plan('ts-plans-a', ['make build', 'make test', 'make deploy']);
    const second = await plan('ts-plans-b', ['rm -rf build']);
    const mine = (list) => list.filter((p) => p.id === first || p.id === second);
    assert.deepEqual(mine(await op.plans()).map((p) => p.id), [first, second]);
    for (const steps of [[], [-1], [1.5]]) await assert.rejects(op.approvePlan(first, { steps }), RangeError);
    const approved = await op.approvePlan(first, { steps: [0, 2] });
    assert.equal(approved.status, 'approved');
    assert.deepEqual(approvedSteps(approved), [0, 2]);
    assert.equal((await op.denyPlan(second)).status, 'denied');
    assert.deepEqual(mine(await op.plans()), []);
    assert.deepEqual(Object.fromEntries(mine(await op.plans({ status: null })).map((p) => [p.id, p.status])), { [first]: 'approved', [second]: 'denied' });
    await assert.rejects(op.denyPlan(first), (e) => e instanceof ApiError && e.status === 409);
  });

  test('whoami names the role', async () => {
    assert.equal((await op.whoami()).role, 'operator');
  });
});

describe('errors and failing closed', () => {
  test('a bad request is an ApiError with the field', async () => {
    const { client } = await agentClient();
    await assert.rejects(client.request('', 'x'), (e) => {
      assert.ok(e instanceof ApiError);
      assert.equal(e.status, 422);
      assert.ok(e.errors.some((f) => f.field.includes('tool')), JSON.stringify(e.problem));
      return true;
    });
  });

  test('a wrong key is a 401 ApiError', async () => {
    const c = new Client({ url: d.url, key: 'agk_wrong' });
    await assert.rejects(c.check('echo', 'x'), (e) => e instanceof ApiError && e.status === 401);
  });

  test('an unreachable daemon is Unreachable, never a decision', async () => {
    const c = new Client({ url: await deadUrl(), key: 'agk_x', timeout: 2 });
    await assert.rejects(c.check('echo', 'x'), Unreachable);
    const gated = c.gate(() => 'ran', { tool: 'echo', wait: 1 });
    await assert.rejects(gated(), Unreachable);
  });

  test('503 is retried with the same idempotency key', async () => {
    const { client: real, name } = await agentClient();
    void real;
    const key = await d.key('agent', name);
    const keys = [];
    let calls = 0;
    // A proxy that answers 503 once, then passes the request on.
    const proxy = createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', async () => {
        calls++;
        if (body) keys.push(JSON.parse(body).idempotency_key);
        if (calls === 1) {
          res.writeHead(503, { 'retry-after': '0', 'content-type': 'application/problem+json' });
          return res.end(JSON.stringify({ title: 'busy', status: 503 }));
        }
        const r = await fetch(d.url + req.url, { method: req.method, headers: { authorization: req.headers.authorization, 'content-type': 'application/json' }, body: body || undefined });
        res.writeHead(r.status, { 'content-type': 'application/json' });
        res.end(await r.text());
      });
    });
    await new Promise((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const c = new Client({ url: `http://127.0.0.1:${proxy.address().port}`, key });
      const a = await c.request('echo', 'retried');
      assert.equal(a.status, 'approved');
      assert.equal(keys.length, 2);
      assert.equal(keys[0], keys[1]);
    } finally {
      proxy.close();
    }
  });

  test('a grant whose answer was lost is sent again and made once', async () => {
    const { name } = await agentClient();
    const proxy = await lossyProxy();
    try {
      const c = new Client({ url: proxy.url, key: await d.key('operator') });
      const g = await c.grant({ tool: 'bash', pattern: 'make once', agent: name });
      assert.equal(proxy.keys.length, 2);
      assert.equal(proxy.keys[0], proxy.keys[1]);
      const made = (await d.call('GET', `/v1/grants?agent=${name}`)).filter((x) => x.pattern === 'make once');
      assert.deepEqual(made.map((x) => x.id), [g.id]);
      // A key given is the key sent; the same key for another grant is refused.
      await op.grant({ tool: 'bash', pattern: 'make twice', agent: name, idempotencyKey: 'ts-grant-key' });
      await assert.rejects(op.grant({ tool: 'bash', pattern: 'make thrice', agent: name, idempotencyKey: 'ts-grant-key' }), (e) => e instanceof ApiError && e.status === 409);
    } finally {
      proxy.close();
    }
  });

  test('a plan whose answer was lost is sent again and asked once', async () => {
    const a = await d.agent({ allow: [], ask: ['(?s).*'], deny: [] });
    const proxy = await lossyProxy();
    try {
      const c = new Client({ url: proxy.url, key: a.key });
      const plan = await c.requestPlan([{ tool: 'bash', detail: 'make dist' }], { session: 'ts-lost', timeout: 0 });
      assert.equal(plan.status, 'pending');
      assert.equal(proxy.keys.length, 2);
      assert.equal(proxy.keys[0], proxy.keys[1]);
      const asked = (await d.call('GET', '/v1/plans?status=pending')).filter((p) => p.agent === a.name);
      assert.deepEqual(asked.map((p) => p.id), [plan.id]);
      await d.call('POST', `/v1/plans/${plan.id}/deny`, {});
    } finally {
      proxy.close();
    }
  });

  test('a grant request whose answer was lost is sent again and asked once', async () => {
    const handler = `tsl${Math.random().toString(16).slice(2, 8)}`;
    await d.call('POST', '/v1/handlers', {
      id: handler,
      name: 'TS lost',
      url: 'http://127.0.0.1:9/hook',
      permissions: [{ name: 'notes.write', parameters_schema: { type: 'object' } }],
      actions: [{ name: 'write', permission: 'notes.write', params_schema: { type: 'object' } }],
    });
    const a = await d.agent();
    const proxy = await lossyProxy();
    try {
      const c = new Client({ url: proxy.url, key: a.key });
      // Answered while the first request waits; its answer is then lost.
      const asked = c.requestPermission('notes.write', 'need notes', { handler, timeoutMinutes: 1 });
      const reqs = await pendingRequests(handler);
      await op.approveGrantRequest(reqs[0].id, { expires: '1h' });
      assert.equal(await asked, true);
      assert.equal(proxy.keys.length, 2);
      assert.equal(proxy.keys[0], proxy.keys[1]);
      const made = (await op.grantRequests({ status: null })).filter((r) => r.handler === handler);
      assert.deepEqual(made.map((r) => r.id), [reqs[0].id]);
    } finally {
      proxy.close();
    }
  });

  test('decisions whose answers were lost are sent again and made once', async () => {
    const agent = await d.agent();
    const client = new Client({ url: d.url, key: agent.key });
    const [yes, no] = [await client.request('bash', 'lost yes', { timeout: '5m' }), await client.request('bash', 'lost no', { timeout: '5m' })];
    const plan = await client.requestPlan([{ tool: 'bash', detail: 'lost plan' }], { session: 'ts-lost-decisions', timeout: 0 });
    const key = await d.key('operator');
    const decide = async (f, as = key) => {
      const proxy = await lossyProxy();
      try {
        const answer = await f(new Client({ url: proxy.url, key: as }));
        assert.equal(proxy.keys.length, 2, 'the first answer was lost and the decision sent again');
        return answer;
      } finally {
        proxy.close();
      }
    };
    const approved = await decide((c) => c.approve(yes.id, { note: 'once' }));
    assert.equal(approved.status, 'approved');
    assert.equal(approved.approvals.length, 1);
    const denied = await decide((c) => c.deny(no.id, { reason: 'once' }));
    assert.equal(denied.status, 'denied');
    assert.equal(denied.decision_note, 'once');
    const decided = await decide((c) => c.approvePlan(plan.id));
    assert.equal(decided.status, 'approved');
    // Another decision on what is decided is still refused.
    await assert.rejects(op.deny(yes.id), (e) => e instanceof ApiError && e.status === 409);
    assert.equal((await d.call('GET', `/v1/actions/${yes.id}`)).approvals.length, 1);
    // The agent's own: a report and a cancel.
    const reported = await decide((c) => c.report(yes.id, 'completed', { result: { ok: true } }), agent.key);
    assert.equal(reported.status, 'completed');
    const gone = await client.request('bash', 'lost cancel', { timeout: '5m' });
    assert.equal((await decide((c) => c.cancel(gone.id), agent.key)).status, 'cancelled');
  });

  test('an AbortSignal stops a long wait', async () => {
    const { client } = await agentClient();
    const a = await client.request('bash', 'long', { timeout: '5m' });
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 300);
    const started = Date.now();
    await assert.rejects(client.wait(a.id, 30, { signal: ac.signal }), Aborted);
    assert.ok(Date.now() - started < 5000);
    await client.cancel(a.id);
  });

  test('gate runs the function once approved and reports it', async () => {
    const { name, client } = await agentClient();
    let ran = 0;
    const deploy = client.gate(async (env) => (ran++, `deployed ${env}`), { tool: 'bash', detail: (env) => `deploy ${env}`, wait: 30 });
    const p = deploy('prod');
    const item = await d.pendingOf(name);
    assert.equal(item.detail, 'deploy prod');
    await d.call('POST', `/v1/actions/${item.id}/approve`, {});
    assert.equal(await p, 'deployed prod');
    assert.equal(ran, 1);
    assert.equal((await client.get(item.id)).status, 'completed');
  });

  test("gate's default detail shows what its arguments hold, or the function does not run", async () => {
    const { name, client } = await agentClient({ allow: [], ask: ['tool:rm:.*'], deny: [] });
    let ran = 0;
    const remove = client.gate(async (paths) => (ran++, [...paths]), { tool: 'rm', wait: 30 });
    // Handled from the start: the denial may settle it while the operator's
    // call is still being answered.
    const denied = assert.rejects(remove(new Set(['/etc/passwd', '/home'])), Denied);
    const item = await d.pendingOf(name);
    assert.equal(item.detail, '["/etc/passwd","/home"]');
    await d.call('POST', `/v1/actions/${item.id}/deny`, { reason: 'no' });
    await denied;
    await assert.rejects(client.gate(() => ran++, { tool: 'rm' })(() => 'a callback'), TypeError);
    assert.equal(ran, 0);
  });

  test('gate throws Denied with the reason and never runs', async () => {
    const { name, client } = await agentClient();
    let ran = 0;
    const f = client.gate(() => ran++, { tool: 'bash', detail: 'rm -rf build', wait: 30 });
    // Handled from the start: the denial may settle it while the operator's
    // call is still being answered.
    const denied = assert.rejects(f(), (e) => e instanceof Denied && e.reason === 'use make clean');
    await d.decideNext(name, 'deny', 'use make clean');
    await denied;
    await assert.rejects(client.gate(() => ran++, { tool: 'danger', detail: 'x' })(), Denied);
    assert.equal(ran, 0);
  });

  test('gate times out and withdraws; an expired item never runs', async () => {
    const { client } = await agentClient();
    let ran = 0;
    await assert.rejects(client.gate(() => ran++, { tool: 'bash', detail: 'wait', wait: 1 })(), TimedOut);
    const pending = (await op.pending()).filter((a) => a.detail === 'wait');
    assert.equal(pending.length, 0);
    await assert.rejects(client.gate(() => ran++, { tool: 'bash', detail: 'expire', wait: 4, timeout: 1 })(), (e) => e instanceof Expired || e instanceof TimedOut);
    assert.equal(ran, 0);
  });
});

test('reportRun says whether a decision covered what ran', async () => {
  const { client: agent } = await agentClient();
  const allowed = await agent.request('echo', 'covered', { session: 'task-r' });
  const again = await agent.request('echo', 'covered', { session: 'task-r' });
  assert.equal(allowed.status, 'approved');
  assert.equal(again.status, 'approved');
  assert.equal(await agent.reportRun('echo', 'covered', { session: 'task-r', runtime: 'node' }), true);
  assert.equal(await agent.reportRun('echo', 'covered', { action: allowed.id }), true);
  // Two decisions cover two runs: a third run of it was decided by nobody.
  assert.equal(await agent.reportRun('echo', 'covered', { session: 'task-r' }), false);
  assert.equal(await agent.reportRun('bash', 'rm -rf build', { session: 'task-r' }), false);
});

test('settle refuses an approval an operator edited: the original call must not run', async () => {
  const { settle } = await import('../dist/index.js');
  const edited = { id: 'act_1', status: 'approved', tool: 'bash', detail: 'rm -rf build', edited: true, approved_detail: 'cargo build' };
  assert.throws(() => settle(edited), (e) => e instanceof Denied && /cargo build/.test(e.message) && e.action === edited);
  const plain = { id: 'act_2', status: 'approved', tool: 'bash', detail: 'ls' };
  assert.equal(settle(plain), plain);
});
