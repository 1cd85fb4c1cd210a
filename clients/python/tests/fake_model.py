"""A scripted stand-in for a model behind the OpenAI Chat Completions API.

On a conversation with no tool result yet it answers with the scripted tool
calls; once tool results are in, it answers with text that quotes them, so a
test can read what each tool (or its rejection) said. Loopback only; every
request body is kept in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Tuple


class FakeModel:
    def __init__(self, calls: List[Tuple[str, Dict[str, Any]]]) -> None:
        self.calls = calls
        self.requests: List[Dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                n = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                outer.requests.append(body)
                if not self.path.rstrip("/").endswith("/chat/completions") or body.get("stream"):
                    self._send(404, {"error": {"message": f"fake model: no {self.path} (stream={body.get('stream')})"}})
                    return
                self._send(200, outer.answer(body))

            def _send(self, status: int, obj: Any) -> None:
                out = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, body: Dict[str, Any]) -> Dict[str, Any]:
        messages = body.get("messages") or []
        results = [m for m in messages if m.get("role") == "tool"]
        if results:
            text = " | ".join(_text(m.get("content")) for m in results)
            message: Dict[str, Any] = {"role": "assistant", "content": f"Tool results: {text}"}
            finish = "stop"
        else:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                    for name, args in self.calls
                ],
            }
            finish = "tool_calls"
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)
