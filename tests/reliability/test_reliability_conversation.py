"""The reliability lab: an agent conversation whose process is killed with SIGKILL, again and again.

A real `memkit chat` process per round (messages on stdin, one JSON line per acknowledged reply),
killed between two messages or at a random moment inside an ask; the window is the workspace's
embedded redis-server (the default) or a separate redis-server given by REDIS_URL.
"""

from __future__ import annotations

import pytest

from _reliability import scale
import lab
from memkit.servers.workspace import WorkspaceRedis, window_folder


def check(figures_of: dict) -> None:
    assert figures_of["lost"] == 0 and figures_of["duplicated"] == 0, figures_of
    assert figures_of["recalled in order"], figures_of


@pytest.fixture(autouse=True)
def _no_ambient_redis(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)


def test_conversation_killed_mid_ask_embedded_window(tmp_path, figures):
    db = tmp_path / "memory.sqlite3"
    try:
        result = lab.conversation_crash_experiment(db, kills=scale(4, 100), seed=11)
    finally:
        WorkspaceRedis.stop(window_folder(db))
    figures("Conversation crash: embedded window", **result)
    check(result)


def test_conversation_killed_mid_ask_separate_redis_server(tmp_path, figures):
    db = tmp_path / "memory.sqlite3"
    with lab.start_redis_server(tmp_path) as url:  # its own server: no other test's keys beside it
        result = lab.conversation_crash_experiment(db, kills=scale(4, 100), seed=12, redis_url=url)
    figures("Conversation crash: REDIS_URL server", **result)
    check(result)
