"""Approvals under stress, on SQLite or PostgreSQL: several processes approving the same proposals
at the same moment, and an approving process killed with SIGKILL.

- `approval_race`: approver processes start together, each approving every proposal of one user
  (in an order of its own), the user near the per-user quota. Each proposal must be applied once or
  not at all, and the user never pass the quota.
- `proposal_race`: proposer processes start together on one user: never more proposals waiting
  than the per-user bound, and the same proposal made by two of them kept once.
- `approval_kill_experiment`: an approver killed with SIGKILL, either inside the approval's
  transaction (its writes made, its COMMIT not yet sent) or at a random moment of a stream of
  approvals. Every proposal must afterwards be approved and applied whole, or pending and not
  applied at all; the store opens sound and the proposals left can still be approved.

"Applied" is read from the store itself: the proposal's status, the record's value, and the events
whose confirmation names the proposal (`proposal#ID approved via ...`).
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from typing import Any
from collections.abc import Mapping

from memkit.errors import LockedError, ProposalError, QuotaError
from memkit.store import Store, is_database_url, open_store
from classroom.lab.scaling import backend_of, open_target, prepare_store, store_options
from .workers import (WORKER_TIMEOUT_S, PathLike, answer, expect, run_together, send, start_worker,
                      stop, wait_for_go, worker)


def _open(target: str, schema: str | None, limits: Mapping[str, int]) -> Store:
    return open_store(target, **store_options(target, schema, limits, 1))


def seed(store: Store, user: str, *, records: int, new_keys: int, updates: int) -> list[int]:
    """Give `user` `records` records, then proposals: `new_keys` saves of new keys and `updates`
    saves of new values for existing ones, interleaved. Returns the proposal ids."""
    for number in range(records):
        store.put(user, "seed", "preference", f"have-{number}", f"value {number}")
    plans = [("preference", f"new-{n}", f"proposed new {n}") for n in range(new_keys)]
    changes = [("preference", f"have-{n % max(records, 1)}", f"proposed update {n}") for n in range(updates)]
    ordered = [p for n in range(max(len(plans), len(changes))) for p in plans[n:n + 1] + changes[n:n + 1]]
    ids = []
    for kind, key, value in ordered:
        ids.append(store.propose_put(user, "chat", kind, key, value)["id"])
    return ids


def applied(store: Store, user: str, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Per proposal: its status, how many events name it, and whether the record holds its value."""
    kept = {p["id"]: p for p in store.proposals(user, pending_only=False)}
    named: dict[int, int] = {}
    for key in {p["key"] for p in kept.values()}:
        for event in store.history(user, "preference", key):
            confirmation = event["confirmation"] or ""
            if confirmation.startswith("proposal#"):
                number = int(confirmation.split()[0].removeprefix("proposal#"))
                named[number] = named.get(number, 0) + 1
    state = {}
    for number in ids:
        proposal = kept[number]
        record = store.get(user, proposal["kind"], proposal["key"])
        state[number] = {"status": proposal["status"], "events": named.get(number, 0),
                         "holds": record is not None and record["value"] == proposal["value"],
                         "against": proposal["against_value"], "now": record["value"] if record else None}
    return state


def whole(entry: dict[str, Any]) -> str:
    """`applied` (approved, one event names it, the record holds its value), `not applied`
    (pending, no event names it, the record does not hold its value: every proposed value is
    unique), or `half` (anything else: must never happen)."""
    if entry["status"] == "approved" and entry["events"] == 1 and entry["holds"]:
        return "applied"
    if entry["status"] == "pending" and entry["events"] == 0 and not entry["holds"]:
        return "not applied"
    return "half"


# -- racing approvals ------------------------------------------------------------------------------


@worker("approve-race")
def _approve_race_worker(payload: dict[str, Any]) -> dict[str, Any]:
    outcomes = []
    with open_target(payload) as store:
        answer("ready")
        wait_for_go()
        for number in payload["ids"]:
            try:
                store.approve(payload["user"], number, origin=payload["origin"])
                outcomes.append({"id": number, "outcome": "approved"})
            except ProposalError as exc:
                outcomes.append({"id": number, "outcome": exc.reason})
            except QuotaError:
                outcomes.append({"id": number, "outcome": "quota"})
            except LockedError:
                outcomes.append({"id": number, "outcome": "busy"})
            except Exception as exc:  # reported, never hidden: the race counts it as unexplained
                outcomes.append({"id": number, "outcome": "unexplained", "error": f"{type(exc).__name__}: {exc}"})
    return {"outcomes": outcomes}


def approval_race(target: PathLike, *, approvers: int = 4, records: int = 6, new_keys: int = 6, updates: int = 8,
                  quota: int = 8, schema: str | None = None, user: str = "racer", seed_: int = 0) -> dict[str, Any]:
    """Approver processes race to approve the same proposals of one user, near the quota.

    The user holds `records` records and has `new_keys` proposals of new keys (of which only
    `quota - records` fit) and `updates` proposals of new values for existing keys (which need no
    slot; several update one key, so once one is applied the others of that key are stale). Every
    approver approves every proposal, in its own order (from `seed_`), all starting together.

    Returns:
        Figures: `approve calls`; `applied` (proposals applied, read from the store) and `applied
        twice` (a proposal with more than one event naming it, or approved by two calls: must be
        0); `half` (status and record disagree: must be 0); `refused: decided`, `stale`, `quota`,
        `busy`, `unexplained` (must be 0); `records` and `over quota` (must be 0);
        `counters_consistent`.
    """
    target = os.fspath(target)
    limits = {"max_records_per_user": quota, "max_records_total": 1_000_000, "busy_timeout_ms": 60_000,
              "max_pending_proposals_per_user": max(new_keys + updates, 1)}
    prepare_store(target, schema=schema, limits=limits)
    with _open(target, schema, limits) as store:
        ids = seed(store, user, records=records, new_keys=new_keys, updates=updates)
    rng = random.Random(seed_)
    orders = [rng.sample(ids, len(ids)) for _ in range(approvers)]
    processes = [start_worker("approve-race", {"target": target, "schema": schema, "limits": limits, "user": user,
                                               "ids": order, "origin": f"racer-{n}"})
                 for n, order in enumerate(orders)]
    results = run_together(processes, "approver")
    calls = [o for r in results for o in r["outcomes"]]
    with _open(target, schema, limits) as store:
        state = applied(store, user, ids)
        stored = store.users().get(user, 0)
        consistent = store.health()["counters_consistent"]
    approvals_per_id: dict[int, int] = {}
    for call in calls:
        if call["outcome"] == "approved":
            approvals_per_id[call["id"]] = approvals_per_id.get(call["id"], 0) + 1
    verdicts = {number: whole(entry) for number, entry in state.items()}
    return {
        "backend": backend_of(target), "approvers": approvers, "proposals": len(ids), "quota": quota,
        "approve calls": len(calls),
        "applied": sum(v == "applied" for v in verdicts.values()),
        "applied twice": sum(1 for n in ids if approvals_per_id.get(n, 0) > 1 or state[n]["events"] > 1),
        "approved without being applied": sum(1 for n in ids if approvals_per_id.get(n, 0) != (
            verdicts[n] == "applied")),
        "half": sum(v == "half" for v in verdicts.values()),
        **{f"refused: {reason}": sum(c["outcome"] == reason for c in calls)
           for reason in ("decided", "stale", "quota", "busy", "unexplained")},
        "records": stored, "over quota": max(0, stored - quota),
        "counters_consistent": consistent,
        "errors": [c["error"] for c in calls if c["outcome"] == "unexplained"][:3],
    }


# -- racing proposals: the per-user bound -----------------------------------------------------------


@worker("propose-race")
def _propose_race_worker(payload: dict[str, Any]) -> dict[str, Any]:
    outcomes = []
    with open_target(payload) as store:
        answer("ready")
        wait_for_go()
        for key, value in payload["proposals"]:
            try:
                made = store.propose_put(payload["user"], payload["session"], "preference", key, value)
                outcomes.append("proposed" if made["new"] else "same")
            except QuotaError:
                outcomes.append("quota")
            except Exception as exc:  # reported, never hidden
                outcomes.append(f"unexplained: {type(exc).__name__}: {exc}")
    return {"outcomes": outcomes}


def proposal_race(target: PathLike, *, proposers: int = 4, per_proposer: int = 6, bound: int = 8,
                  schema: str | None = None, user: str = "proposer") -> dict[str, Any]:
    """Proposer processes start together, each proposing saves of new keys for one user; half of
    each one's proposals are the same as another proposer's (which must come back as one).

    Returns:
        Figures: `proposals made`, `kept` (waiting, read from the store), `over the bound` (must be
        0), `refused: bound`, `same proposal` (answered with the one already waiting), `duplicates
        kept` (two waiting proposals alike: must be 0), `unexplained` (must be 0).
    """
    target = os.fspath(target)
    limits = {"max_pending_proposals_per_user": bound, "busy_timeout_ms": 60_000}
    prepare_store(target, schema=schema, limits=limits)
    plans = [[[f"shared-{n}", f"value {n}"] if n % 2 == 0 else [f"p{index}-{n}", f"value {index} {n}"]
              for n in range(per_proposer)] for index in range(proposers)]
    processes = [start_worker("propose-race", {"target": target, "schema": schema, "limits": limits, "user": user,
                                               "session": f"proposer-{n}", "proposals": plan})
                 for n, plan in enumerate(plans)]
    outcomes = [o for r in run_together(processes, "proposer") for o in r["outcomes"]]
    with _open(target, schema, limits) as store:
        kept = store.proposals(user)
    alike = len(kept) - len({(p["key"], p["value"]) for p in kept})
    return {"backend": backend_of(target), "proposers": proposers, "bound": bound,
            "proposals made": len(outcomes), "kept": len(kept), "over the bound": max(0, len(kept) - bound),
            "refused: bound": outcomes.count("quota"), "same proposal": outcomes.count("same"),
            "duplicates kept": alike, "unexplained": sum(o.startswith("unexplained") for o in outcomes)}


# -- SIGKILL during an approval ---------------------------------------------------------------------


@worker("approve-killed")
def _approve_killed_worker(payload: dict[str, Any]) -> None:
    with open_target(payload) as store:
        answer("ready")
        wait_for_go()
        if payload["inside"]:
            # The approval's writes are made (record, event, status) inside the outer transaction;
            # its COMMIT waits until the parent has killed this process.
            with store.transaction():
                store.approve(payload["user"], payload["ids"][0], origin="killed")
                answer("inside")
                sys.stdin.readline()
            answer("committed")  # reached only when the parent let it commit instead of killing it
            return
        for number in payload["ids"]:
            try:
                store.approve(payload["user"], number, origin="killed")
            except ProposalError as exc:  # stale: another proposal of its key was applied first
                sys.stdout.write(f"refused {number} {exc.reason}\n")
            else:
                sys.stdout.write(f"ack {number}\n")  # only after approve returned: committed
            sys.stdout.flush()
        answer("done")
        sys.stdin.readline()  # wait to be killed: every round ends with a SIGKILL


def _kill(process: Any) -> bool:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=WORKER_TIMEOUT_S)
    return bool(process.returncode == -signal.SIGKILL)


def approval_kill_experiment(target: PathLike, *, rounds: int = 6, proposals: int = 12, schema: str | None = None,
                             seed_: int = 0, max_delay_s: float = 0.004) -> dict[str, Any]:
    """Kill an approving process with SIGKILL, `rounds` times; every approval must be whole or absent.

    Even rounds kill it inside the approval's transaction (its writes made, COMMIT not sent): that
    proposal must be pending and unapplied. Odd rounds kill a stream of approvals at a random moment
    (after a random number of acknowledgements, plus up to `max_delay_s`): every acknowledged one
    must be applied, the one in flight whole or absent. Each round uses a user of its own; after the
    kill the store is opened anew (on SQLite, recovering from the `-wal`), checked, and a new
    proposal is made and approved, to show nothing stayed locked.

    Returns:
        Figures: `kills`, `inside a transaction`, `acknowledged`, `applied`, `not applied`, `half`
        (must be 0), `acknowledged but not applied` (must be 0), `in flight committed`,
        `approved after the kill`, `counters_consistent` and, on SQLite, `integrity`.
    """
    target = os.fspath(target)
    limits = {"max_records_per_user": 1_000, "max_records_total": 1_000_000, "busy_timeout_ms": 60_000,
              "max_pending_proposals_per_user": proposals + 1}  # + the one made after the kill
    prepare_store(target, schema=schema, limits=limits)
    rng = random.Random(seed_)
    totals: dict[str, Any] = {
              "backend": backend_of(target), "kills": 0, "inside a transaction": 0, "acknowledged": 0, "applied": 0,
              "not applied": 0, "half": 0, "acknowledged but not applied": 0, "in flight committed": 0,
              "approved after the kill": 0, "counters_consistent": True}
    integrity_ok = True
    for number in range(rounds):
        user = f"killed-{number}"
        with _open(target, schema, limits) as store:
            ids = seed(store, user, records=4, new_keys=proposals // 2, updates=proposals - proposals // 2)
        inside = number % 2 == 0
        process = start_worker("approve-killed", {"target": target, "schema": schema, "limits": limits,
                                                  "user": user, "ids": ids, "inside": inside})
        acked: list[int] = []
        try:
            expect(process, "ready")
            send(process, "go")
            if inside:
                expect(process, "inside")
            else:
                wanted = rng.randint(0, len(ids) - 1)
                while len(acked) < wanted:
                    line = process.stdout.readline() if process.stdout else ""
                    if line.startswith("ack "):
                        acked.append(int(line.split()[1]))
                    elif not line.startswith("refused "):
                        break  # "done", or the end of the stream
                time.sleep(rng.uniform(0, max_delay_s))
            killed = _kill(process)
        finally:
            stop(process)
        if not inside and process.stdout is not None:  # acknowledgements already in the pipe count too
            acked += [int(line.split()[1]) for line in process.stdout.read().splitlines() if line.startswith("ack ")]
        totals["kills"] += killed
        totals["inside a transaction"] += inside and killed
        totals["acknowledged"] += len(acked)
        with _open(target, schema, limits) as store:
            state = applied(store, user, ids)
            totals["counters_consistent"] = totals["counters_consistent"] and store.health()["counters_consistent"]
            if not is_database_url(target):
                integrity_ok = integrity_ok and store.connection.execute(
                    "PRAGMA integrity_check").fetchone()[0] == "ok"
            verdicts = {n: whole(entry) for n, entry in state.items()}
            for verdict in verdicts.values():
                totals[verdict] += 1
            totals["acknowledged but not applied"] += sum(verdicts[n] != "applied" for n in acked)
            totals["in flight committed"] += sum(1 for n, v in verdicts.items() if v == "applied" and n not in acked)
            # Nothing the killed process held stays locked: a new proposal is made and approved now.
            fresh = store.propose_put(user, "after-kill", "preference", "after-kill", f"round {number}")
            store.approve(user, fresh["id"], origin="after-kill")
            totals["approved after the kill"] += 1
    if not is_database_url(target):
        totals["integrity"] = "ok" if integrity_ok else "damaged"
    return totals
