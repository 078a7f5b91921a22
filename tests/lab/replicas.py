"""Agent instances for the tests: `start_instance` runs the kit's own instance process (a
`python -m lab scaling-instance` worker), `round_robin` sends one user's messages to them in turn.

An instance runs a `MemoryAgent` with the `FixtureModel`: its long-term store is `open_store(store)`
(a SQLite path or a `postgresql://` URL), its window a `RedisWindow` on the server at `window` (or,
with no `window`, an `InProcessWindow` of its own, gone with the process).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any
from collections.abc import Mapping, Sequence

from memkit.agent import MemoryAgent
from memkit.approvals import Approvals
from classroom.lab.replicas import HOP_SCRIPT, Instance, reply_figures
from classroom.lab.scaling import open_target
from memkit.models import FixtureModel
from memkit.request import History
from memkit.store import Store
from memkit.window import InProcessWindow, RedisWindow, ShortTermWindow

from .workers import PathLike, answer, expect, skip_iri_grammar, start_worker, stop, worker


def start_instance(name: str, store: PathLike, window: str | None = None, *, schema: str | None = None,
                   limits: Mapping[str, int] | None = None) -> Instance:
    """Start an agent instance as a real process and wait until it is ready.

    Args:
        name: names the instance in tables.
        store: its long-term store: a SQLite path or a `postgresql://` URL.
        window: the `redis://` or `unix://` URL of a shared Redis for its window; None keeps the
            window inside the instance's own process (an `InProcessWindow`).
        schema: the PostgreSQL schema (a URL only). limits: `Limits` fields of its store.
    """
    process = start_worker("scaling-instance", {"name": name, "target": os.fspath(store), "window": window,
                                                "schema": schema, "limits": dict(limits or {}), "pool_size": 2})
    try:
        expect(process, "ready")
    except BaseException:
        stop(process)
        raise
    return Instance(name, process, window is not None)


def round_robin(instances: Sequence[Instance], user: str, session: str,
                script: Sequence[Mapping[str, Any]] = HOP_SCRIPT) -> list[dict[str, Any]]:
    """Send one user's messages to the instances in turn (message i to instance i mod n).

    Each step of `script` has a `message`, and may have `confirm` (kind, key, value) and `expect`
    (a fact the reply must name to count as recalled).

    Returns:
        One row per hop: hop, instance, message, reply, recalled (None for a statement),
        the exchanges and memories the request carried.
    """
    rows = []
    for hop, step in enumerate(script):
        instance = instances[hop % len(instances)]
        result = instance.ask(user, session, step["message"], confirm=step.get("confirm"))
        expected = step.get("expect")
        rows.append({"hop": hop + 1, "instance": instance.name, "message": step["message"], "reply": result["reply"],
                     "recalled": None if expected is None else expected in result["reply"],
                     "exchanges in request": result["exchanges"], "memories in request": result["memories"]})
    return rows


@worker("scaling-instance")
def _instance_worker(payload: dict[str, Any]) -> None:
    skip_iri_grammar()
    name = payload["name"]
    with open_target(payload) as store:
        size = History(limits=store.limits).turns_needed
        window: ShortTermWindow = (RedisWindow(store, url=payload["window"], size=size) if payload["window"]
                                   else InProcessWindow(size, store=store, limits=store.limits))
        with window:
            model, approvals = FixtureModel(), Approvals(f"instance-{name}", store.limits)
            agents: dict[tuple[str, str], MemoryAgent] = {}
            answer("ready")
            while line := sys.stdin.readline():
                request = json.loads(line)
                if request.get("stop"):
                    break
                try:
                    answer(_serve(request, store, window, model, approvals, agents))
                except Exception as exc:
                    answer({"error": f"{type(exc).__name__}: {exc}"})


def _serve(request: dict[str, Any], store: Store, window: ShortTermWindow, model: FixtureModel,
           approvals: Approvals, agents: dict[tuple[str, str], MemoryAgent]) -> dict[str, Any]:
    user, session = request["user"], request["session"]
    agent = agents.get((user, session))
    if agent is None:
        agent = agents[(user, session)] = MemoryAgent(store, user, session, model, approvals=approvals, window=window)
    if request.get("confirm"):
        approvals.confirm_put(*request["confirm"])
    first = len(model.requests)
    reply = asyncio.run(agent.ask(request["message"]))
    return reply_figures(reply.text, model.requests[first:])
