// Starts the real parts for the browser tests: the built `actiongate`
// daemon on a fresh data dir, the reference executor registered with it, a
// loopback TCP relay the browser goes through (so a test can really cut the
// page's connections), and Debian's Chromium driven by playwright-core.
// Everything it starts is stopped by `stop()`, also when a test fails.

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { chromium } from 'playwright-core';

const repo = resolve(import.meta.dirname, '../..');
const targetDir = resolve(repo, process.env.CARGO_TARGET_DIR || 'target');
const bin = (name) => {
  const p = join(targetDir, 'debug', name);
  if (!existsSync(p)) throw new Error(`${p} is missing: run cargo build -p actiongate -p actiongate-executor`);
  return p;
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** A TCP relay to `target` whose connections can be cut and restored. */
async function relay(targetPort) {
  const sockets = new Set();
  let cut = false;
  const server = createServer((client) => {
    if (cut) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    const pair = [client, upstream];
    for (const s of pair) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        sockets.delete(s);
        for (const o of pair) o.destroy();
      });
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: server.address().port,
    /** Drops every open connection and refuses new ones. */
    cut() {
      cut = true;
      for (const s of sockets) s.destroy();
    },
    restore() { cut = false; },
    close() {
      for (const s of sockets) s.destroy();
      return new Promise((r) => server.close(r));
    },
  };
}

/** The daemon, the executor, the relay and a browser page. */
export async function startAll() {
  const env = { ...process.env, RUST_LOG: process.env.RUST_LOG || 'warn' };
  const children = [];
  const dirs = [];
  const tmp = (p) => {
    const d = mkdtempSync(join(tmpdir(), p));
    dirs.push(d);
    return d;
  };
  const all = { children, dirs };
  try {
    const data = tmp('ag-web-data-');
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const daemon = spawn(bin('actiongate'), ['serve', '--data-dir', data, '--listen', `127.0.0.1:${port}`],
      { env, stdio: ['ignore', 'ignore', 'pipe'] });
    children.push(daemon);
    daemon.stderr.on('data', (b) => { if (process.env.WEB_TEST_LOG) process.stderr.write(b); });
    let admin = '';
    for (let i = 0; i < 600 && !admin; i++) {
      if (daemon.exitCode !== null) throw new Error(`the daemon exited with ${daemon.exitCode}`);
      try {
        const k = readFileSync(join(data, 'admin.key'), 'utf8').trim();
        if (k && (await fetch(`${base}/healthz`)).ok) admin = k;
      } catch { /* not up yet */ }
      if (!admin) await sleep(50);
    }
    if (!admin) throw new Error('the daemon did not start');
    const call = async (method, path, key, body) => {
      const r = await fetch(base + path, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await r.text();
      return { status: r.status, body: text ? JSON.parse(text) : null };
    };
    const made = (await call('POST', '/v1/keys', admin, { role: 'operator', name: 'web-test operator' })).body;
    const operator = made.key;
    // A person's key: only people count toward a quorum.
    const person = await call('POST', '/v1/people', admin, { name: 'web-operator', keys: [made.id] });
    if (person.status !== 201) throw new Error(`person: ${JSON.stringify(person.body)}`);
    const agent = (await call('POST', '/v1/keys', admin, { role: 'agent', agent: 'coder' })).body.key;

    const root = tmp('ag-web-root-');
    const exec = spawn(bin('actiongate-executor'), ['--listen', '127.0.0.1:0', '--root', root,
      '--state-dir', tmp('ag-web-exec-'), '--register', base, '--admin-key', admin],
    { env, stdio: ['ignore', 'pipe', process.env.WEB_TEST_LOG ? 'inherit' : 'ignore'] });
    children.push(exec);
    const lines = createInterface({ input: exec.stdout });
    await new Promise((res, rej) => {
      const t = setTimeout(() => rej(new Error('the executor did not start')), 30000);
      lines.on('line', (l) => {
        if (l.startsWith('actiongate-executor listening on ')) { clearTimeout(t); res(); }
      });
      exec.on('exit', (c) => { clearTimeout(t); rej(new Error(`the executor exited with ${c}`)); });
    });

    const proxy = await relay(port);
    const context = await chromium.launchPersistentContext(tmp('ag-web-chrome-'), {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'],
      viewport: { width: 1100, height: 800 },
    });
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(20000);
    const consoleErrors = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    Object.assign(all, { base, admin, operator, agent, root, call, proxy, context, page, consoleErrors,
      pageUrl: `http://127.0.0.1:${proxy.port}/` });
    return all;
  } catch (e) {
    await stopAll(all);
    throw e;
  }
}

/** Stops what startAll started and removes its directories. */
export async function stopAll(all) {
  await all.context?.close().catch(() => {});
  await all.proxy?.close().catch(() => {});
  for (const c of all.children || []) {
    if (c.exitCode === null) {
      c.kill('SIGTERM');
      await Promise.race([new Promise((r) => c.once('exit', r)), sleep(5000)]);
      if (c.exitCode === null) c.kill('SIGKILL');
    }
  }
  for (const d of all.dirs || []) rmSync(d, { recursive: true, force: true });
}

export { sleep, bin };
