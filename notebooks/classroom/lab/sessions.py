"""Sessions in fresh processes: what an agent remembers once the process that talked to it is gone."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from collections.abc import Iterable, Sequence

from memkit.models import propose
from memkit.store import MemoryStore
from .display import scrub
from .workers import PathLike, limits_from, run_worker, skip_iri_grammar, worker


class GoldfishAgent:
    """An agent whose memory is a dict inside its own process: fine until the process ends.

    It understands the same phrases as `FixtureModel` (`memkit.models.propose`: "remember my KEY is
    VALUE", "My city is Lisbon", ...; a question naming a key), so the only difference from the
    kit's agent is where the memory lives (and that nobody is asked to confirm).

    Example:
        >>> fish = GoldfishAgent()
        >>> fish.ask("Remember my drink is green tea")
        'Noted: drink = green tea.'
        >>> fish.ask("What is my drink?")
        'From memory: drink = green tea.'
    """

    def __init__(self) -> None:
        self.memory: dict[str, str] = {}

    def ask(self, task: str) -> str:
        """Save a fact the person told in the dict, or answer from the dict."""
        proposed = propose(task)
        if proposed and proposed[0] == "memory_put":
            key = proposed[1]["key"]
            self.memory[key] = proposed[1]["value"]
            return f"Noted: {key} = {self.memory[key]}."
        words = set(re.findall(r"[a-z0-9_]+", task.lower()))
        facts = [f"{key} = {value}" for key, value in sorted(self.memory.items()) if key in words]
        return f"From memory: {'; '.join(facts)}." if facts else "I have nothing in memory about that yet."


def run_session(path: PathLike, user: str, session: str, tasks: Sequence[str], *,
                confirm_puts: Iterable[Sequence[str]] = (), limits: dict[str, int] | None = None) -> dict[str, Any]:
    """Run one session of `MemoryAgent` + `FixtureModel` over the store at `path` in a fresh process.

    The process opens the store, records the confirmations a person gave for this session, asks
    each task in turn, closes the store and exits: everything it knew in memory is gone, and only
    what reached the SQLite file is left for the next session.

    Args:
        path: the database file (created if missing).
        user: the user the session is bound to.
        session: the session id (kept as `source_session` of what it saves).
        tasks: what the user says, in order.
        confirm_puts: (kind, key, value) triples the person confirmed, each allowing one save.
        limits: `Limits` fields to change for this store.

    Returns:
        `pid`, `session` and `replies`: per task its `text`, `stop_reason` and `tools` (one row per
        tool call: `tool`, `ok`, and `error` or `result`).
    """
    payload = {"path": str(Path(path).absolute()), "user": user, "session": session, "tasks": list(tasks),
               "confirm_puts": [list(c) for c in confirm_puts], "limits": limits}
    result = run_worker("session", payload)
    for reply in result["replies"]:
        for tool in reply["tools"]:
            if "error" in tool:
                tool["error"] = scrub(tool["error"], path)
    return result


@worker("session")
def _session_worker(payload: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    skip_iri_grammar()
    from memkit.agent import MemoryAgent
    from memkit.approvals import Approvals
    from memkit.models import FixtureModel

    approvals = Approvals(f"{payload['session']}-confirm")
    for kind, key, value in payload["confirm_puts"]:
        approvals.confirm_put(kind, key, value)
    replies = []
    with MemoryStore(payload["path"], limits=limits_from(payload["limits"])) as store:
        agent = MemoryAgent(store, payload["user"], payload["session"], FixtureModel(), approvals=approvals)
        for task in payload["tasks"]:
            reply = asyncio.run(agent.ask(task))
            tools = []
            for row in reply.tool_results:
                outcome = row["outcome"]
                tools.append({"tool": row["name"], "ok": outcome["ok"],
                              **({"result": outcome["result"]} if outcome["ok"] else {"error": outcome["error"]})})
            replies.append({"task": task, "text": reply.text, "stop_reason": reply.stop_reason, "tools": tools})
    return {"pid": os.getpid(), "session": payload["session"], "replies": replies}
