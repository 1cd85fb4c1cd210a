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

export const ActiongatePlugin = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    const answer = await ask({
      tool: input.tool,
      sessionID: input.sessionID,
      callID: input.callID,
      args: output.args,
      directory,
    });
    if (answer.status !== "allow") {
      throw new Error(answer.reason || "actiongate: denied");
    }
  },
});
