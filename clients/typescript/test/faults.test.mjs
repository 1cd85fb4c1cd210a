// The client against fake daemons on loopback that fail as a network or a
// proxy can: an answer cut off after its headers, a daemon that accepts and
// never answers, an answer about another action. Each fails closed with the
// client's own error, within the time the caller asked for.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test } from 'node:test';
import { ActionGateError, ApiError, Client, Unreachable } from '../dist/index.js';

/** A loopback HTTP server answering with `handler`; `close()` also drops its open connections. */
async function fake(handler) {
  const server = createServer(handler);
  const sockets = new Set();
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

/** Rejects as `check` wants, in less than `seconds`. */
async function failsWithin(seconds, promise, check, name) {
  const started = Date.now();
  await assert.rejects(promise, check, name);
  const took = (Date.now() - started) / 1000;
  assert.ok(took < seconds, `${name} took ${took} s, more than ${seconds} s`);
}

test('an answer cut off after its headers is Unreachable, with the cause', async () => {
  let hits = 0;
  const server = await fake((req, res) => {
    hits++;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': '200' });
    res.write('{"id":"act_1","status":"appr', () => res.socket.destroy());
  });
  try {
    const c = new Client({ url: server.url, key: 'agk_x', timeout: 2 });
    const cut = (e) => e instanceof Unreachable && e instanceof ActionGateError && e.cause !== undefined && /cut off/.test(e.message);
    // Not retried (it may have acted, and the daemon would not know it
    // sent again): one attempt.
    await assert.rejects(c.approve('act_1', { remember: '1h' }), cut);
    assert.equal(hits, 1);
    // Retried, as a dropped connection is, within the call's time: a read,
    // and what the daemon answers as it stands when sent again.
    for (const [name, send] of [['get', () => c.get('act_1')], ['cancel', () => c.cancel('act_1')], ['approve', () => c.approve('act_1')]]) {
      hits = 0;
      await failsWithin(3, send(), cut, name);
      assert.ok(hits > 1, `${name} was tried ${hits} time(s)`);
    }
    const gated = c.gate(() => assert.fail('ran'), { tool: 'bash', detail: 'ls', wait: 1 });
    await assert.rejects(gated(), cut);
  } finally {
    await server.close();
  }
});

test('a daemon that never answers costs a call its wait plus the client timeout, retries included', async () => {
  const server = await fake(() => {});
  try {
    const c = new Client({ url: server.url, key: 'agk_x', timeout: 1 });
    const timedOut = (e) => e instanceof Unreachable && /no answer within/.test(e.message);
    // Slack for the event loop only: the bound is the wait plus 1 s.
    await failsWithin(3.5, c.wait('act_1', 2), timedOut, 'wait');
    await failsWithin(3.5, c.request('bash', 'ls', { wait: 2 }), timedOut, 'request');
    await failsWithin(3.5, c.approved('bash', 'ls', { wait: 2 }), timedOut, 'approved');
    await failsWithin(3.5, c.gate(() => assert.fail('ran'), { tool: 'bash', detail: 'ls', wait: 2 })(), timedOut, 'gate');
    await failsWithin(3.5, c.plan('plan_1', { wait: 2 }), timedOut, 'plan');
    await failsWithin(1.5, c.check('bash', 'ls'), timedOut, 'check');
    await failsWithin(1.5, c.get('act_1'), timedOut, 'get');
  } finally {
    await server.close();
  }
});

test('an answer about another action is refused, never taken for the one asked about', async () => {
  const mine = { id: 'act_mine', status: 'pending', tool: 'bash', detail: 'ls', agent: 'a', decision: { result: 'ask', reason: 'asked' } };
  let read = { ...mine, id: 'act_other', status: 'approved' };
  // New actions are answered with `mine`, pending; every read of one with `read`.
  const server = await fake((req, res) => {
    const body = req.method === 'POST' && req.url.startsWith('/v1/actions?') ? mine : read;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  try {
    const c = new Client({ url: server.url, key: 'agk_x', timeout: 2 });
    const refused = (e) => e instanceof ApiError && e.code === 'bad_response' && /act_mine/.test(e.detail);
    await assert.rejects(c.get('act_mine'), refused);
    await assert.rejects(c.wait('act_mine', 1), refused);
    await assert.rejects(c.request('bash', 'ls', { wait: 1 }), refused);
    await assert.rejects(c.approved('bash', 'ls', { wait: 1 }), refused);
    await assert.rejects(c.approve('act_mine'), refused);
    await assert.rejects(c.cancel('act_mine'), refused);
    // Its id, but another call: refused too.
    read = { ...mine, status: 'approved', detail: 'rm -rf /' };
    await assert.rejects(c.request('bash', 'ls', { wait: 1 }), refused);
    read = { id: 'plan_other', status: 'approved', steps: [] };
    await assert.rejects(c.plan('plan_mine'), (e) => e instanceof ApiError && e.code === 'bad_response');
    // The action asked about is taken.
    read = { ...mine, status: 'approved' };
    assert.equal((await c.request('bash', 'ls', { wait: 1 })).status, 'approved');
  } finally {
    await server.close();
  }
});
