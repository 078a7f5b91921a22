"""The reliability lab: approvals of proposals raced by several processes, and an approving process
killed with SIGKILL, on SQLite and on PostgreSQL.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from _reliability import scale
import lab

WHERE = ["sqlite", "pg"]


def target_for(where: str, request: Any, tmp_path: Any, name: str) -> tuple[Any, str | None]:
    """A fresh SQLite file, or a fresh schema of the session's PostgreSQL server."""
    if where == "sqlite":
        return tmp_path / f"{name}.sqlite3", None
    return request.getfixturevalue("pg_url"), f"t_{name}_{uuid.uuid4().hex[:12]}"


def added(totals: dict[str, Any], figures_: dict[str, Any]) -> None:
    for name, value in figures_.items():
        if isinstance(value, bool):
            totals[name] = totals.get(name, True) and value
        elif isinstance(value, int):
            totals[name] = totals.get(name, 0) + value


@pytest.mark.parametrize("where", WHERE)
def test_racing_approvals_apply_each_proposal_once_and_never_pass_the_quota(tmp_path, request, figures, where):
    """Approver processes start together, each approving every proposal of one user near the quota.

    Each proposal must be applied once or not at all (read from the store: its status, the record's
    value, the events naming it), no two calls may both approve one, and the user never pass the
    quota; every refusal is one the store explains (decided, stale, quota)."""
    totals: dict[str, Any] = {}
    rounds = scale(2, 20)
    for number in range(rounds):
        target, schema = target_for(where, request, tmp_path, f"race{number}")
        result = lab.approval_race(target, schema=schema, approvers=4, seed_=number)
        assert result["errors"] == [], result
        added(totals, {k: v for k, v in result.items() if k not in ("quota", "approvers", "proposals")})
    figures(f"Racing approvals ({'SQLite' if where == 'sqlite' else 'PostgreSQL'})", rounds=rounds,
            approvers=4, **{k: totals[k] for k in ("approve calls", "applied", "applied twice", "half",
                                                    "refused: decided", "refused: stale", "refused: quota",
                                                    "over quota")})
    assert totals["applied twice"] == totals["half"] == totals["over quota"] == 0
    assert totals["approved without being applied"] == 0 and totals["refused: unexplained"] == 0
    assert totals["refused: busy"] == 0 and totals["counters_consistent"] is True
    # 6 records, quota 8: two new keys fit; 8 updates of 6 keys: 6 apply, 2 go stale. Every round.
    assert totals["applied"] == rounds * (2 + 6) and totals["refused: quota"] > 0 and totals["refused: stale"] > 0


@pytest.mark.parametrize("where", WHERE)
def test_sigkill_during_an_approval_leaves_it_whole_or_absent(tmp_path, request, figures, where):
    """An approving process is killed with SIGKILL: inside the approval's transaction (its writes
    made, COMMIT not sent) in even rounds, at a random moment of a stream of approvals in odd ones.

    Afterwards every proposal is applied whole or not at all, every acknowledged approval is there,
    the store opens sound (on SQLite recovering from the -wal), and a proposal left pending can
    still be approved: no lock outlived the killed process."""
    target, schema = target_for(where, request, tmp_path, "killed")
    rounds = scale(6, 60)
    result = lab.approval_kill_experiment(target, schema=schema, rounds=rounds, seed_=1)
    figures(f"SIGKILL during an approval ({result['backend']})",
            **{k: v for k, v in result.items() if k not in ("backend", "counters_consistent")})
    assert result["kills"] == rounds and result["inside a transaction"] == (rounds + 1) // 2
    assert result["half"] == 0 and result["acknowledged but not applied"] == 0
    assert result["counters_consistent"] is True and result.get("integrity", "ok") == "ok"
    assert result["approved after the kill"] == rounds
    assert result["acknowledged"] > 0 and result["not applied"] > 0


@pytest.mark.parametrize("where", WHERE)
def test_racing_proposals_never_pass_the_per_user_bound_nor_keep_one_twice(tmp_path, request, figures, where):
    """Proposer processes start together on one user at the per-user bound of waiting proposals,
    half of each one's proposals the same as the others'. (On PostgreSQL, READ COMMITTED, the
    per-user proposal lock is what keeps the count exact: without it this experiment kept 11-12
    proposals against a bound of 8, and 5-6 duplicates, in each of 4 rounds.)"""
    totals: dict[str, Any] = {}
    rounds = scale(2, 20)
    for number in range(rounds):
        target, schema = target_for(where, request, tmp_path, f"propose{number}")
        added(totals, {k: v for k, v in lab.proposal_race(target, schema=schema, proposers=6).items()
                       if k not in ("proposers", "bound")})
    figures(f"Racing proposals ({'SQLite' if where == 'sqlite' else 'PostgreSQL'})", rounds=rounds, proposers=6,
            bound=8, **{k: totals[k] for k in ("proposals made", "kept", "over the bound", "refused: bound",
                                               "same proposal", "duplicates kept")})
    assert totals["over the bound"] == totals["duplicates kept"] == totals["unexplained"] == 0
    assert totals["kept"] == rounds * 8 and totals["refused: bound"] > 0


@pytest.mark.parametrize("where", WHERE)
def test_forgetting_a_user_while_their_approval_is_in_flight_leaves_nothing(tmp_path, request, where):
    """A user with nothing but a proposal; another process approves it and holds its transaction
    open (the first record written, not committed) while this one forgets the user. The forget must
    wait for the approval and then remove what it wrote. (On PostgreSQL the user has no counter row
    to lock yet: the per-user proposal lock is what makes the forget wait; without it the approved
    record would outlive the forget.)"""
    import threading
    import time

    from classroom.lab.scaling import prepare_store
    from lab.workers import expect, finish, send, start_worker
    from memkit.store import open_store

    target, schema = target_for(where, request, tmp_path, "forget")
    limits = {"busy_timeout_ms": 60_000}
    options = {"schema": schema} if schema else {}
    prepare_store(target, schema=schema, limits=limits)
    with open_store(str(target), **options) as store:
        number = store.propose_put("ghost", "s1", "preference", "city", "Porto")["id"]
    approver = start_worker("approve-killed", {"target": str(target), "schema": schema, "limits": limits,
                                               "user": "ghost", "ids": [number], "inside": True})
    expect(approver, "ready")
    send(approver, "go")
    expect(approver, "inside")
    removed: dict[str, Any] = {}
    with open_store(str(target), limits=lab.limits_from(limits), **options) as store:
        forgetting = threading.Thread(target=lambda: removed.update(store.forget_user("ghost")))
        forgetting.start()
        time.sleep(0.5)
        assert forgetting.is_alive()  # waiting for the approval's transaction
        send(approver, "commit")
        assert finish(approver, "approver") == "committed"
        forgetting.join(timeout=60)
        assert removed == {"records": 1, "events": 1, "transcript": 0, "proposals": 1}
        assert store.traces("ghost") == {"records": 0, "events": 0, "transcript": 0, "proposals": 0}
        assert store.health()["counters_consistent"]
