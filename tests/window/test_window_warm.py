"""A warm workspace server: kept between messages, stopped by its keeper once idle (issue 26, target 1).

Starting the workspace's redis-server cost more than the rest of a message, so `memkit chat`
keeps it warm. It must still stop by itself when idle, when its workspace is removed, and when
its keeper is gone the next process gives it a new one; it keeps `appendfsync always`, and what it
holds survives its stop. Real processes: `python -m memkit chat`, the redis-server, its keeper.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memkit.servers.watchdog import start_token
from lab.workers import wait_for
from memkit.servers.workspace import WorkspaceRedis, window_folder

IDLE = "2"


def env(**changes: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MEMKIT_DB", "DATABASE_URL")}
    return {**base, "MEMKIT_WINDOW_IDLE": IDLE, **changes}


def chat(db: Path, message: str, **changes: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", "alice", "--session",
                           "s1", "--message", message], capture_output=True, text=True, timeout=120, env=env(**changes))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def record(db: Path) -> dict | None:
    try:
        return json.loads((window_folder(db) / "server.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def gone(pid: int, started: str) -> bool:
    return start_token(pid) != started


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "memory.sqlite3"
    yield path
    WorkspaceRedis.stop(window_folder(path))


def test_the_server_stays_warm_between_messages_and_stops_by_itself_once_idle(db):
    chat(db, "My ticket number is T-4471")
    first = record(db)
    assert first is not None and not gone(first["keeper"], first["keeper_started"])
    chat(db, "Hello again", MEMKIT_WINDOW_IDLE="60")
    assert record(db)["pid"] == first["pid"]  # the second message used the warm server
    assert wait_for(lambda: gone(first["pid"], first["started"]), timeout=float(IDLE) + 15)
    assert wait_for(lambda: gone(first["keeper"], first["keeper_started"]), timeout=10)
    assert record(db) is None and not Path(first["socket"]).parent.exists()
    # What the window held is on disk (appendfsync always): the next server has it.
    reply = chat(db, "What was my ticket number?")["turns"][0]["reply"]
    assert "T-4471" in reply


def test_a_warm_server_fsyncs_before_every_reply(db):
    chat(db, "hello")
    with WorkspaceRedis(window_folder(db)) as handle:
        assert handle.adopted
        assert handle.client.config_get("appendfsync") in ({"appendfsync": "always"}, {b"appendfsync": b"always"})


def test_a_connected_client_keeps_it_warm_and_a_killed_keeper_is_replaced(db):
    chat(db, "hello")
    first = record(db)
    with WorkspaceRedis(window_folder(db)):
        time.sleep(float(IDLE) + 2)
        assert not gone(first["pid"], first["started"])  # in use: not idle
    os.kill(first["keeper"], signal.SIGKILL)
    assert wait_for(lambda: gone(first["keeper"], first["keeper_started"]), timeout=10)
    chat(db, "hello again")
    second = record(db)
    assert second["pid"] == first["pid"] and second["keeper"] != first["keeper"]
    assert wait_for(lambda: gone(first["pid"], first["started"]), timeout=float(IDLE) + 15)


def test_the_keeper_stops_the_server_when_the_workspace_is_removed(tmp_path):
    db = tmp_path / "ws" / "memory.sqlite3"
    db.parent.mkdir()
    chat(db, "hello", MEMKIT_WINDOW_IDLE="600")
    first = record(db)
    shutil.rmtree(db.parent)
    assert wait_for(lambda: gone(first["pid"], first["started"]), timeout=15)
    assert wait_for(lambda: gone(first["keeper"], first["keeper_started"]), timeout=10)


def test_idle_zero_stops_the_server_at_the_last_close_and_a_bad_value_is_refused(db):
    chat(db, "hello", MEMKIT_WINDOW_IDLE="0")
    assert record(db) is None
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", "alice", "--message",
                           "hi"], capture_output=True, text=True, timeout=120, env=env(MEMKIT_WINDOW_IDLE="soon"))
    assert done.returncode == 2 and "MEMKIT_WINDOW_IDLE is 'soon'" in done.stderr


def test_a_temporary_folder_too_long_for_a_socket_is_refused_at_once_and_nothing_is_started(tmp_path, monkeypatch):
    """A long TMPDIR used to cost a 10 s wait and "did not start" (the server listened on a path nobody
    reached); now both servers refuse it before making anything, with the remedy."""
    import tempfile

    from memkit.errors import WindowError
    from memkit.window import start_embedded_redis

    long = tmp_path / ("d" * 60) / ("e" * 60)
    long.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    started = time.monotonic()
    with pytest.raises(WindowError, match="set TMPDIR to a shorter folder") as embedded:
        start_embedded_redis()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with pytest.raises(WindowError, match="set TMPDIR to a shorter folder") as kept:
        WorkspaceRedis(workspace)
    assert str(long) in str(embedded.value) and str(long) in str(kept.value)
    assert time.monotonic() - started < 5  # refused, not waited out
    assert list(long.iterdir()) == []  # no socket folder, no data folder made
    assert not (workspace / "server.json").exists()  # no server recorded, none started
