"""The reliability lab: commands tell the truth about committed writes, and a bad endpoint is a clear error.

`memkit chat --live` against a real local HTTP server that speaks (or fails to speak) the
chat-completions protocol. A confirmed save commits, then the model's next call fails (HTTP 429,
500, an oversized reply, no answer at all) or the budget refuses the next request: the command must
exit 4 ("committed, then failed") naming the save and the failure, never 2 ("refused, nothing
changed"). Replies that are not chat completions (an HTML page, an empty body, tool arguments sent
as a JSON object) must be a clear error naming the endpoint, never a traceback; a hung endpoint a
timeout that says so. See conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from memkit.store import MemoryStore

JSON = "application/json"


def completion(message: dict) -> bytes:
    return json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "test-model",
                       "choices": [{"index": 0, "message": message,
                                    "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}]}).encode()


def tool_calls(*calls: tuple[str, object]) -> bytes:
    return completion({"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}", "type": "function",
         "function": {"name": name, "arguments": arguments}}
        for n, (name, arguments) in enumerate(calls)]})


def save_drink() -> bytes:
    return tool_calls(("memory_put", json.dumps({"kind": "preference", "key": "drink", "value": "tea"})))


class Endpoint:
    """A local chat-completions endpoint answering from a script of (status, content type, body, delay)."""

    def __init__(self, replies: list[tuple[int, str, bytes, float]]) -> None:
        self.replies = list(replies)
        self.calls = 0
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                endpoint.calls += 1
                status, content_type, body, delay = endpoint.replies.pop(0) if endpoint.replies else (
                    200, JSON, completion({"role": "assistant", "content": "(no more)"}), 0)
                time.sleep(delay)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up waiting (the hung endpoint)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


SAVED = [(200, JSON, save_drink(), 0.0)]
SCENARIOS: dict[str, tuple[list[tuple[int, str, bytes, float]], list[str], bool]] = {
    # name: (the endpoint's script, extra arguments, whether the save commits first)
    "429 after a save": ([*SAVED, (429, JSON, b'{"error": {"message": "rate limited"}}', 0)], [], True),
    "500 after a save": ([*SAVED, (500, JSON, b'{"error": {"message": "server exploded"}}', 0)], [], True),
    "oversized reply after a save": ([*SAVED, (200, JSON, completion({"role": "assistant",
                                                                      "content": "x" * 2_000_000}), 0)], [], True),
    "no answer after a save": ([*SAVED, (200, JSON, completion({"role": "assistant", "content": "late"}), 6)],
                               [], True),
    "budget refuses after a save": ([(200, JSON, tool_calls(
        ("memory_put", json.dumps({"kind": "preference", "key": "drink", "value": "tea"})),
        ("memory_search", json.dumps({"query": "q" * 6000}))), 0)], ["--budget", "5000"], True),
    "an HTML page": ([(200, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>", 0)], [], False),
    "an empty body": ([(200, JSON, b"", 0)], [], False),
    "arguments as an object": ([(200, JSON, tool_calls(("memory_get", {"kind": "preference", "key": "drink"})), 0)],
                               [], False),
    "arguments as an object after a save": ([*SAVED, (200, JSON, tool_calls(
        ("memory_delete", {"kind": "preference", "key": "drink"})), 0)], [], True),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_a_command_names_what_it_committed_and_what_failed(tmp_path, scenario, figures):
    script, extra, commits = SCENARIOS[scenario]
    endpoint = Endpoint(script)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-not-real", "OPENAI_MODEL": "test-model",
           "OPENAI_BASE_URL": endpoint.url, "MEMKIT_MODEL_TIMEOUT": "2"}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--live", "--db", "memory.sqlite3",
                               "--user", "alice", "--window", "process", "--confirm-preference", "drink", "tea",
                               "--confirm-delete", "preference", "drink", *extra, "--message", "remember tea"],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    finally:
        endpoint.close()
    seconds = time.monotonic() - started
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        saved = store.history("alice", "preference", "drink") != []
    error = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    traceback = "Traceback" in done.stderr
    figures(f"Truthful commands: {scenario}",
            **{"exit": done.returncode, "save committed": saved, "traceback": traceback,
               "seconds": round(seconds, 1), "stderr": error[:160]})
    assert not traceback, done.stderr
    assert saved == commits
    assert "test-model" not in error and "sk-test" not in error  # no key in any message
    assert f"127.0.0.1:{endpoint.httpd.server_address[1]}" in error or "budget" in error or "reply is" in error
    if commits:
        assert done.returncode == 4, done.stderr
        assert error.startswith("error: committed: alice's preference 'drink' saved at revision 1; then failed: ")
    else:
        assert done.returncode == 2, done.stderr
        assert "not a chat completion" in error or "not JSON" in error or "not as a JSON string" in error
    if scenario == "no answer after a save":
        assert "gave no answer within 2 s" in error and "MEMKIT_MODEL_TIMEOUT" in error and seconds < 30
