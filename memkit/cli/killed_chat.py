"""`memkit chat` processes killed with SIGKILL right after an acknowledged reply (`memkit demo` shows the
next process still has the exchange; the test suite's crash experiment starts its own with `start_chat`).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any


def start_chat(db: Path, user: str, session: str, env: dict[str, str] | None) -> subprocess.Popen[str]:
    """A `memkit chat` process reading messages on stdin (one JSON line out per stored exchange)."""
    return subprocess.Popen([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", user,
                             "--session", session], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def told_then_killed(db: Path, message: str) -> dict[str, Any]:
    """Tell a `memkit chat` process (user alice, session support) `message` on stdin, wait for its
    acknowledged reply, SIGKILL it.

    Returns the reply line (message, reply, ...) and the pid that was killed.
    """
    process = start_chat(db, "alice", "support", None)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(message + "\n")
        process.stdin.flush()
        line = process.stdout.readline()  # printed only once the exchange is stored in the window
        if not line:
            raise RuntimeError(f"the chat process ended without answering: {process.communicate()[1][-400:]}")
        return {"pid": process.pid, **json.loads(line)}
    finally:
        process.send_signal(signal.SIGKILL)
        process.communicate()
