// The real actiongate daemon on a free loopback port for the tests: its
// URL, admin key, and helpers to make agents and keys. The binary is
// $ACTIONGATE_BIN, else ${CARGO_TARGET_DIR:-<repo>/target}/debug/actiongate.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(fileURLToPath(new URL('../../..', import.meta.url)));

// Test agents' policy: echo allowed, these asked, "danger" denied.
export const PROFILE = {
  allow: ['tool:echo:.*', 'tool:Read:.*', 'tool:get_weather:.*'],
  ask: ['tool:bash:.*', 'tool:file:.*', 'tool:permission:.*', 'tool:delete_file:.*', 'tool:send_email:.*', 'tool:slow:.*'],
  deny: ['tool:danger:.*', 'tool:drop_database:.*'],
};

export function binary() {
  if (process.env.ACTIONGATE_BIN) return process.env.ACTIONGATE_BIN;
  let target = process.env.CARGO_TARGET_DIR || join(REPO, 'target');
  if (!isAbsolute(target)) target = join(REPO, target);
  return join(target, 'debug', 'actiongate');
}

export function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
    s.on('error', rej);
  });
}

export class Daemon {
  constructor(url, admin, proc, log) {
    Object.assign(this, { url, admin, proc, log });
  }

  async call(method, path, body, key = this.admin) {
    const r = await fetch(this.url + path, {
      method,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : null;
  }

  async key(role, agent) {
    return (await this.call('POST', '/v1/keys', agent ? { role, agent } : { role })).key;
  }

  /** A fresh agent (its own queue) and its key. */
  async agent(profile = PROFILE) {
    const name = `ts-${Math.random().toString(16).slice(2, 12)}`;
    await this.call('PUT', `/v1/agents/${name}`, { profile });
    return { name, key: await this.key('agent', name) };
  }

  /** Waits until the agent has a pending action, and returns it. */
  async pendingOf(agent, timeoutMs = 20000) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const page = await this.call('GET', '/v1/actions?status=pending&limit=200');
      const mine = page.items.filter((a) => a.agent === agent);
      if (mine.length) return mine[0];
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`no pending action of ${agent} within ${timeoutMs} ms`);
  }

  /** Decides the agent's next pending action as an operator. */
  async decideNext(agent, verdict, reason) {
    const a = await this.pendingOf(agent);
    const body = verdict === 'deny' && reason ? { reason } : {};
    return this.call('POST', `/v1/actions/${a.id}/${verdict}`, body);
  }

  /** Stops the daemon and removes its folder (kept with ACTIONGATE_TEST_KEEP=1). */
  async stop() {
    await new Promise((res) => {
      if (this.proc.exitCode !== null) return res();
      this.proc.once('exit', () => res());
      this.proc.kill('SIGTERM');
      setTimeout(() => this.proc.kill('SIGKILL'), 10000).unref();
    });
    if (!process.env.ACTIONGATE_TEST_KEEP) rmSync(dirname(this.log), { recursive: true, force: true });
  }
}

export async function startDaemon() {
  const exe = binary();
  if (!existsSync(exe)) throw new Error(`no daemon binary at ${exe}: run \`cargo build -p actiongate\``);
  const dir = mkdtempSync(join(tmpdir(), 'actiongate-ts-'));
  const data = join(dir, 'data');
  const port = await freePort();
  const log = join(dir, 'daemon.log');
  const out = openSync(log, 'w');
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('ACTIONGATE_')));
  env.ACTIONGATE_ACTIONS__MIN_TIMEOUT = '1s';
  const proc = spawn(exe, ['serve', '--listen', `127.0.0.1:${port}`, '--data-dir', data], { cwd: dir, env, stdio: ['ignore', out, out] });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`daemon exited: ${readFileSync(log, 'utf8').slice(-2000)}`);
    try {
      const r = await fetch(`${url}/readyz`);
      if (r.status === 200 && existsSync(join(data, 'admin.key'))) {
        return new Daemon(url, readFileSync(join(data, 'admin.key'), 'utf8').trim(), proc, log);
      }
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  proc.kill('SIGKILL');
  throw new Error(`daemon not ready in 60 s: ${readFileSync(log, 'utf8').slice(-2000)}`);
}

/** A URL where nothing listens (a daemon that is down). */
export async function deadUrl() {
  return `http://127.0.0.1:${await freePort()}`;
}
