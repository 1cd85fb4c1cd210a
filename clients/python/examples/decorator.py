"""A plain script whose dangerous step waits for a human.

    export ACTIONGATE_URL=http://127.0.0.1:8080 ACTIONGATE_KEY=<agent key>
    python decorator.py ./build

`remove_tree` runs only once the gate allows it: at once if the agent's
policy allows `tool:bash:rm -rf <dir>`, else when an operator approves it
(`actiongate pending`, `actiongate approve <id>`, or the web page). A denial
prints the operator's reason; the directory stays.
"""

from __future__ import annotations

import shutil
import sys

from actiongate import ActionGateError, Client, Denied, Expired, TimedOut

gate = Client()


@gate.gate(tool="bash", detail=lambda path: f"rm -rf {path}", wait=120, reason="clean the build output")
def remove_tree(path: str) -> None:
    shutil.rmtree(path)


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else "build"
    try:
        remove_tree(path)
    except Denied as e:
        print(f"denied: {e.reason}")
        return 1
    except (Expired, TimedOut) as e:
        print(f"no answer: {e}")
        return 3
    except ActionGateError as e:
        print(f"gate error: {e}")
        return 2
    print(f"removed {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
