"""Separate processes for the PostgreSQL tests: racing writers, a writer killed mid-stream or
mid-transaction, an agent whose server is stopped and restarted under it.

Run as `python tests/postgres/_pg_worker.py MODE` with one JSON payload line on stdin (the lab's protocol,
classroom.lab.workers: JSON answers on stdout, "go" on stdin to start racers together). Every payload
names `url` and `schema`; each worker opens its own `PostgresStore`, with its own connections.

Modes:
    race     put each of `ops` ([user, kind, key, value]) after "go"; answer one outcome per put
             ("ok", "quota", "busy"; with `messages`, the error's message after "quota: " or "busy: ").
    stream   put `count` episodes `{prefix}-N`, printing `ack N REVISION` after each commit.
    hold     put `keys` inside one `transaction()`, answer "inside", and wait to be killed there.
    agent    a MemoryAgent (FixtureModel) asked "remember my kN is vN" for N < `count`, each until
             it is stored, printing one JSON line per attempt: {"ack": key, "revision": r} or
             {"error": message}.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "notebooks"))  # its classroom helpers
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this memkit, run from any folder

from memkit.errors import LockedError, MemkitError, QuotaError, StoreError
from classroom.lab.workers import answer, limits_from, wait_for_go
from memkit.store import PostgresStore


def open_store(payload: dict[str, Any]) -> PostgresStore:
    return PostgresStore(payload["url"], schema=payload["schema"], limits=limits_from(payload.get("limits")))


def race(payload: dict[str, Any]) -> list[str]:
    outcomes = []
    with open_store(payload) as store:
        answer("ready")
        wait_for_go()
        for user, kind, key, value in payload["ops"]:
            try:
                store.put(user, payload.get("session", "race"), kind, key, value)
                outcomes.append("ok")
            except QuotaError as exc:
                outcomes.append(f"quota: {exc}" if payload.get("messages") else "quota")
            except LockedError as exc:
                outcomes.append(f"busy: {exc}" if payload.get("messages") else "busy")
            except StoreError as exc:
                outcomes.append(f"error: {exc}")
    return outcomes


def stream(payload: dict[str, Any]) -> None:
    with open_store(payload) as store:
        answer("ready")
        for number in range(payload["count"]):
            key = f"{payload['prefix']}-{number:05d}"
            record = store.put(payload["user"], "stream", "episode", key, f"value of {key}")
            sys.stdout.write(f"ack {number} {record['revision']}\n")  # only after the commit
            sys.stdout.flush()
        answer("done")
        sys.stdin.read()  # wait to be killed: every round ends with a SIGKILL


def hold(payload: dict[str, Any]) -> None:
    store = open_store(payload)
    with store.transaction():
        for key in payload["keys"]:
            store.put(payload["user"], "hold", "preference", key, f"uncommitted {key}")
        answer("inside")
        time.sleep(120)  # killed here, inside the transaction


def agent(payload: dict[str, Any]) -> None:
    from memkit.agent import MemoryAgent
    from memkit.approvals import Approvals
    from memkit.models import FixtureModel

    approvals = Approvals("restart-confirm")
    with open_store(payload) as store:
        bot = MemoryAgent(store, payload["user"], "restart", FixtureModel(), approvals=approvals)
        answer("ready")
        deadline = time.monotonic() + payload.get("seconds", 120)
        for number in range(payload["count"]):
            key, value = f"k{number}", f"v{number}"
            approvals.confirm_put("preference", key, value)  # spent only by a write that succeeds
            while time.monotonic() < deadline:
                try:
                    reply = asyncio.run(bot.ask(f"Remember my {key} is {value}"))
                    outcome = reply.tool_results[0]["outcome"]
                    line = ({"ack": key, "revision": outcome["result"]["revision"]} if outcome["ok"]
                            else {"error": outcome["error"]})
                except MemkitError as exc:  # retrieval before the model call met the stopped server
                    line = {"error": f"{type(exc).__name__}: {exc}"}
                answer(line)
                if "ack" in line:
                    break
                time.sleep(0.2)


MODES = {"race": race, "stream": stream, "hold": hold, "agent": agent}

if __name__ == "__main__":
    result = MODES[sys.argv[1]](json.loads(sys.stdin.readline()))
    if result is not None:
        answer(result)
