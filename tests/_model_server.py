"""The kit's local chat-completions server for tests: a real HTTP endpoint on 127.0.0.1 that answers
from a script and records what it received (tests/agent/test_models.py, the notebooks' live cells)."""

from __future__ import annotations

import json
import threading
from typing import Any
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """A local chat-completions endpoint that answers from a script and records what it received.

    `answer`, when given, makes each reply from the request's body instead (a model's rules over HTTP).
    """

    def __init__(self, replies: list[dict], status: int = 200, answer=None) -> None:
        self.replies, self.status, self.received, self.answer = list(replies), status, [], answer
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do: connections get reused

            def do_POST(self):
                raw = self.rfile.read(int(self.headers["Content-Length"]))
                body = json.loads(raw)
                server.received.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body,
                                        "raw": raw, "content_type": self.headers.get("Content-Type")})
                if server.answer is not None:
                    message = server.answer(body)
                else:
                    message = server.replies.pop(0) if server.replies else {"role": "assistant", "content": "(no more)"}
                payload = {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "message": message,
                                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}]}
                if server.status != 200:
                    payload = {"error": {"message": "server exploded", "type": "server_error"}}
                data = json.dumps(payload).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def tool_call(name: str, call_id: str = "call_1", **arguments: Any) -> dict[str, Any]:
    """A model's reply that calls tool `name` with `arguments`."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]}


def say(text: str) -> dict[str, Any]:
    """A model's reply in words."""
    return {"role": "assistant", "content": text}
