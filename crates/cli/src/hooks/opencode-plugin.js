// actiongate for opencode: every tool call is asked of the actiongate
// daemon before it runs (`actiongate hook opencode`), and blocked unless
// the answer is allow. Fails closed: no answer, a crash or a timeout
// blocks the call. Written by `actiongate setup opencode`; see
// docs/hooks.md. `setup` writes the next line: the binary, its arguments
// (the daemon's URL and the agent key's file) and the wait for a human.
import { spawn } from "node:child_process";

const CONFIG = {"bin": "actiongate", "args": [], "wait": 55}; // actiongate:config

export function ask(payload, config = CONFIG) {
  const bin = config.bin;
  const waitSeconds = config.wait;
  return new Promise((resolve) => {
    let out = "";
    let done = false;
    const finish = (answer) => {
      if (!done) {
        done = true;
        resolve(answer);
      }
    };
    let child;
    try {
      child = spawn(bin, ["hook", "opencode", ...config.args, "--wait", String(waitSeconds)], {
        stdio: ["pipe", "pipe", "inherit"],
      });
    } catch (e) {
      finish({ status: "deny", reason: `actiongate: cannot run ${bin}: ${e}` });
      return;
    }
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      finish({ status: "deny", reason: "actiongate: no answer in time (failing closed)" });
    }, (waitSeconds + 10) * 1000);
    child.on("error", (e) => {
      clearTimeout(timer);
      finish({ status: "deny", reason: `actiongate: cannot run ${bin}: ${e.message}` });
    });
    child.stdout.on("data", (d) => {
      out += d;
    });
    child.on("close", () => {
      clearTimeout(timer);
      try {
        const answer = JSON.parse(out);
        if (answer && typeof answer.status === "string") {
          finish(answer);
          return;
        }
      } catch (_) {
        // Not JSON: fall through to deny.
      }
      finish({ status: "deny", reason: "actiongate: unreadable answer (failing closed)" });
    });
    child.stdin.on("error", () => {});
    child.stdin.end(JSON.stringify(payload));
  });
}

// A sub-agent (opencode's `task` tool) runs in a child session of its
// own: its calls are asked in the name of the root session, so what the
// task read taints its sub-agents' calls and theirs taint the task's
// (docs/hooks.md). A session's parent never changes: each is looked up
// once. A lookup that fails blocks the call, as any other failure does.
const MAX_DEPTH = 32;
const roots = new Map();

async function rootSession(client, id) {
  const path = [];
  let current = id;
  while (!roots.has(current)) {
    if (path.length >= MAX_DEPTH) {
      throw new Error("actiongate: sessions nested too deep (failing closed)");
    }
    path.push(current);
    const found = await client.session.get({ path: { id: current } });
    if (found?.error || !found?.data) {
      throw new Error(`actiongate: cannot read session ${current} (failing closed)`);
    }
    const parent = found.data.parentID;
    if (!parent) {
      roots.set(current, current);
      break;
    }
    current = parent;
  }
  const root = roots.get(current);
  if (roots.size > 10000) roots.clear();
  for (const p of path) roots.set(p, root);
  return root;
}

export const ActiongatePlugin = async ({ directory, client }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = await ask({
      tool: input.tool,
      sessionID: await rootSession(client, input.sessionID),
      callID: input.callID,
      args: output.args,
      directory,
    });
    if (answer.status !== "allow") {
      throw new Error(answer.reason || "actiongate: denied");
    }
  },
});
