// Runs the shipped opencode plugin against stand-in `actiongate` binaries:
// it lets a call through only on {"status":"allow"}, and blocks on deny,
// a crash, an unreadable answer, a missing binary and a timeout.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync, chmodSync, readFileSync, rmSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ask, ActiongatePlugin } from "../../crates/cli/src/hooks/opencode-plugin.js";

const dir = mkdtempSync(join(tmpdir(), "ag-plugin-"));
function bin(name, body) {
  const p = join(dir, name);
  writeFileSync(p, `#!/bin/sh\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}
const seen = join(dir, "stdin.json");
const allow = bin("allow", `cat > '${seen}'; echo '{"status":"allow","reason":"actiongate: ok"}'`);
const deny = bin("deny", `cat >/dev/null; echo '{"status":"deny","reason":"actiongate: denied by policy: no"}'`);
const crash = bin("crash", "exit 3");
const garbage = bin("garbage", "echo not-json");
const slow = bin("slow", "sleep 30");

const payload = { tool: "bash", sessionID: "s", callID: "c", args: { command: "ls" }, directory: "/p" };
const config = (b, wait = 1) => ({ bin: b, args: ["--url", "http://127.0.0.1:9"], wait });

assert.equal((await ask(payload, config(allow))).status, "allow");
assert.deepEqual(JSON.parse(readFileSync(seen, "utf8")), payload);
assert.equal((await ask(payload, config(deny))).status, "deny");
assert.equal((await ask(payload, config(crash))).status, "deny");
assert.equal((await ask(payload, config(garbage))).status, "deny");
assert.equal((await ask(payload, config(join(dir, "missing")))).status, "deny");
// wait 0: the plugin gives up after 10 s and blocks.
const t0 = Date.now();
assert.equal((await ask(payload, config(slow, 0))).status, "deny");
assert.ok(Date.now() - t0 < 15000);

// The hook itself, as opencode calls it (the `actiongate` on the PATH): a
// sub-agent's call is asked in its root session's name, so the task's
// taint holds for it; a session that cannot be read blocks the call.
const onPath = mkdtempSync(join(dir, "path-"));
copyFileSync(allow, join(onPath, "actiongate"));
process.env.PATH = `${onPath}:${process.env.PATH}`;
const parents = { ses_child: "ses_task", ses_task: "ses_root", ses_root: undefined };
const client = {
  session: {
    get: async ({ path }) =>
      path.id in parents ? { data: { id: path.id, parentID: parents[path.id] } } : { error: { name: "NotFound" } },
  },
};
const hooks = await ActiongatePlugin({ directory: "/p", client });
const before = hooks["tool.execute.before"];
assert.equal(typeof before, "function");
await before({ tool: "bash", sessionID: "ses_child", callID: "c1" }, { args: { command: "ls" } });
assert.equal(JSON.parse(readFileSync(seen, "utf8")).sessionID, "ses_root");
await before({ tool: "bash", sessionID: "ses_root", callID: "c2" }, { args: { command: "ls" } });
assert.equal(JSON.parse(readFileSync(seen, "utf8")).sessionID, "ses_root");
await assert.rejects(
  before({ tool: "bash", sessionID: "ses_unknown", callID: "c3" }, { args: { command: "ls" } }),
  /cannot read session/,
);
// Parents in a loop: blocked, not followed for ever.
parents.ses_a = "ses_b";
parents.ses_b = "ses_a";
await assert.rejects(
  before({ tool: "bash", sessionID: "ses_a", callID: "c4" }, { args: { command: "ls" } }),
  /nested too deep/,
);
rmSync(dir, { recursive: true, force: true });
console.log("opencode plugin: ok");
