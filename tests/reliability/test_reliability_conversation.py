"""The reliability lab: an agent conversation whose process is killed with SIGKILL, again and again.

A real `memkit chat` process per round (messages on stdin, one JSON line per acknowledged reply),
killed between two messages or at a random moment inside an ask; the window is the store's own
(in the SQLite file: the default) or a separate redis-server given by REDIS_URL.
"""

from __future__ import annotations

import pytest

from _reliability import scale
import lab


def check(figures_of: dict) -> None:
    assert figures_of["lost"] == 0 and figures_of["duplicated"] == 0, figures_of
    assert figures_of["recalled in order"], figures_of


@pytest.fixture(autouse=True)
def _no_ambient_redis(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)


def test_conversation_killed_mid_ask_store_window(tmp_path, figures):
    db = tmp_path / "memory.sqlite3"
    result = lab.conversation_crash_experiment(db, kills=scale(4, 100), seed=11)
    figures("Conversation crash: the store's own window", **result)
    check(result)


def test_conversation_killed_mid_ask_separate_redis_server(tmp_path, figures):
    db = tmp_path / "memory.sqlite3"
    with lab.start_redis_server(tmp_path) as url:  # its own server: no other test's keys beside it
        result = lab.conversation_crash_experiment(db, kills=scale(4, 100), seed=12, redis_url=url)
    figures("Conversation crash: REDIS_URL server", **result)
    check(result)
