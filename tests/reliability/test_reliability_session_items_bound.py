"""The reliability lab: one user's openai-agents conversation cannot fill the store.

Unbounded, a user's `MemkitSession.add_items` of 2,000-character items filled a 1 MiB store and
another user's first memory was refused (the hole issue 33's failure 7 closed for archived turns).
`Limits.max_agent_item_chars_per_user` bounds the characters of each user's items over all their
sessions: a write past it removes that user's oldest items inside its transaction, never one of its
own, on SQLite and on PostgreSQL; the conversation itself keeps going, never refused.
See `tests/_reliability.py` for the sizes and conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from _reliability import scale
from memkit.errors import QuotaError
from memkit.integrations.openai_agents import MemkitSession
from memkit.limits import Limits
from memkit.store import open_store


@pytest.mark.parametrize("where", ["sqlite", "postgresql"])
def test_a_hogs_session_items_never_refuse_another_users_first_memory(where, tmp_path, request, figures):
    limits = Limits(max_db_bytes=1 << 20, max_agent_item_chars_per_user=256_000)
    target = tmp_path / "memory.sqlite3" if where == "sqlite" else request.getfixturevalue("pg_url")
    options = {"schema": f"items_bound_{os.getpid()}"} if where == "postgresql" else {"synchronous": "NORMAL"}
    turns = scale(500, 3_000)  # a run's items each: the person's message, a tool call, its output, the answer
    refused_hog = refused_others = 0
    with open_store(target, limits=limits, **options) as store:
        for n in range(turns):
            session = MemkitSession(f"thread/{n // 40}", store, user="auth0|hog")
            run = [{"role": "user", "content": f"{n} question"},
                   {"type": "function_call", "call_id": f"c{n}", "name": "read", "arguments": "{}"},
                   {"type": "function_call_output", "call_id": f"c{n}", "output": "x" * 2000},
                   {"role": "assistant", "content": f"{n} answer"}]
            try:
                asyncio.run(session.add_items(run))
            except QuotaError:
                refused_hog += 1
            if n % (turns // 10) == 0:  # 20 other users at every size: the cap is for the hog to fill
                for other in range(2):
                    try:
                        store.put(f"user{n}-{other}", "s1", "episode", "trip", "a long story " + "y" * 490)
                    except QuotaError:
                        refused_others += 1
        newest = asyncio.run(MemkitSession(f"thread/{(turns - 1) // 40}", store, user="auth0|hog").get_items())
        held = sum(s["items"] for s in store.agent_sessions("auth0|hog"))
        chars = sum(len(row["item"]) for s in store.agent_sessions("auth0|hog")
                    for row in store.agent_item_rows("auth0|hog", s["session"]))
    figures(f"One user's openai-agents session items ({where})",
            **{"runs added (4 items, 2,000-character output)": turns,
               "bound (characters)": limits.max_agent_item_chars_per_user, "cap (bytes)": limits.max_db_bytes,
               "hog's add_items refused": refused_hog, "other users' first memories": 20,
               "other users' first memories refused": refused_others,
               "items the hog keeps": held, "characters the hog keeps": chars})
    assert refused_hog == refused_others == 0
    assert chars <= limits.max_agent_item_chars_per_user
    assert newest[-1] == {"role": "assistant", "content": f"{turns - 1} answer"}  # the newest run, whole
    assert newest[0].get("type") != "function_call_output"  # a cut session never starts with an orphaned output
