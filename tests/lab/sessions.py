"""Sessions in fresh processes, for the tests: the goldfish in a process of its own, and one read or
write of a store in a fresh process (`put`, `get`, `dump`), as a restarted program does it.
"""

from __future__ import annotations

import os
import time
from typing import Any
from collections.abc import Sequence

from classroom.lab.sessions import GoldfishAgent
from memkit.store import MemoryStore

from .workers import answer, limits_from, run_worker, skip_iri_grammar, worker


def run_goldfish_session(tasks: Sequence[str]) -> dict[str, Any]:
    """Ask a `GoldfishAgent` the tasks in a fresh process, which then exits (and forgets).

    Returns:
        `pid` of the process and `replies`: one dict per task with `task` and `text`.
    """
    return run_worker("goldfish", {"tasks": list(tasks)})


@worker("goldfish")
def _goldfish_worker(payload: dict[str, Any]) -> dict[str, Any]:
    fish = GoldfishAgent()
    return {"pid": os.getpid(), "replies": [{"task": t, "text": fish.ask(t)} for t in payload["tasks"]]}


# -- one read or write in a fresh process --------------------------------------------------------------


@worker("put")
def _put_worker(payload: dict[str, Any]) -> None:
    """Put one value and answer with the record; with `hang`, then sleep until killed (the store is
    never closed, so the write is only in the -wal file, not checkpointed)."""
    store = MemoryStore(payload["path"], limits=limits_from(payload.get("limits")))
    answer(store.put(payload["user"], payload.get("session", "first-process"), payload.get("kind", "preference"),
                     payload["key"], payload["value"]))
    if payload.get("hang"):
        time.sleep(payload.get("seconds", 60.0))
    store.close()


@worker("get")
def _get_worker(payload: dict[str, Any]) -> None:
    """Answer with one record (or null)."""
    with MemoryStore(payload["path"]) as store:
        answer(store.get(payload["user"], payload.get("kind", "preference"), payload["key"]))


@worker("dump")
def _dump_worker(payload: dict[str, Any]) -> dict[str, Any]:
    """Open the store as a restarted session would and answer with everything `user` can reach:
    records, searches (`queries`), histories (`keys`: [kind, key] pairs), the export bundle, and
    every model request of a `MemoryAgent` asked `tasks` (the fixture model records them)."""
    import asyncio

    skip_iri_grammar()
    from memkit.agent import MemoryAgent
    from memkit.models import FixtureModel

    user = payload["user"]
    with MemoryStore(payload["path"]) as store:
        records = store.records(user)
        searches = {query: store.search(user, query, limit=50) for query in payload["queries"]}
        histories = [store.history(user, kind, key) for kind, key in payload["keys"]]
        model = FixtureModel()
        agent = MemoryAgent(store, user, "restarted", model)
        for task in payload["tasks"]:
            asyncio.run(agent.ask(task))
        return {"records": records, "searches": searches, "histories": histories,
                "export": store.export_user(user), "requests": model.requests}
