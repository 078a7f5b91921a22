"""The reliability lab: racing writer processes at the quota edges.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from _reliability import ROOMY, integrity, scale
import lab
from memkit.limits import Limits
from memkit.store import MemoryStore


def race(path: Path, *, writers: int, creates: int, updates: int, per_user: int, total: int,
         prefill: dict[str, int], create_for: list[str], seed: int) -> dict[str, Any]:
    """Prefill, then start `writers` processes at once, each creating new keys and updating prefilled ones."""
    rng = random.Random(seed)
    with MemoryStore(path, limits=Limits().replace(**ROOMY)) as store:
        for user, count in prefill.items():
            for n in range(count):
                store.put(user, "prefill", "preference", f"base-{n}", f"prefilled {n}")
    plans = []
    for w in range(writers):
        ops = [[rng.choice(create_for), "preference", f"w{w}-new-{n}", f"created by writer {w}"]
               for n in range(creates)]
        for n in range(updates):
            user = rng.choice(sorted(prefill))
            ops.append([user, "preference", f"base-{rng.randrange(prefill[user])}", f"update {n} by writer {w}"])
        rng.shuffle(ops)
        plans.append(ops)
    # The history bound (max_events_per_user) stays out of the way: this experiment reads every
    # update back from the history, and at full size one user's updates pass the default 256.
    limits = {"max_records_per_user": per_user, "max_records_total": total, "busy_timeout_ms": 30_000,
              "max_events_per_user": ROOMY["max_events_per_user"]}
    results = lab.run_racers(path, plans, limits=limits, session="w")
    outcomes = [(op, outcome) for ops, result in zip(plans, results, strict=True)
                for op, outcome in zip(ops, result, strict=True)]
    creates_ok = sum(1 for op, o in outcomes if op[2].startswith("w") and o["outcome"] == "ok")
    updates = [(op, o) for op, o in outcomes if op[2].startswith("base-")]
    with MemoryStore(path, limits=Limits().replace(**ROOMY)) as store:
        counts = store.users()
        checked, consistent = integrity(store), store.health()["counters_consistent"]
        # Every accepted update is in its key's history exactly once, and revisions run 1, 2, 3, ...
        broken_updates = 0
        for user, count in prefill.items():
            for n in range(count):
                history = store.history(user, "preference", f"base-{n}")
                values = [e["new_value"] for e in history]
                applied = [op[3] for op, o in updates if (op[0], op[2]) == (user, f"base-{n}") and o["outcome"] == "ok"]
                broken_updates += [e["revision"] for e in history] != list(range(1, len(history) + 1))
                broken_updates += sorted(values[1:]) != sorted(applied) or len(history) != 1 + len(applied)
                broken_updates += store.get(user, "preference", f"base-{n}")["revision"] != len(history)
    over = sum(max(0, n - per_user) for n in counts.values()) + max(0, sum(counts.values()) - total)
    return {
        "writers": writers, "attempts": len(outcomes), "creates accepted": creates_ok,
        "rejected by quota": sum(1 for _, o in outcomes if o["outcome"] == "quota"),
        "updates refused": sum(1 for _, o in updates if o["outcome"] != "ok"),
        "busy errors": sum(1 for _, o in outcomes if o["outcome"] == "busy"),
        "unexplained errors": [o["error"] for _, o in outcomes if o["outcome"] == "unexplained"],
        "over quota": over, "broken updates": broken_updates, "counts": counts,
        "stored": sum(counts.values()), "integrity": checked, "counters_consistent": consistent,
        "free before": min(sum(per_user - prefill.get(u, 0) for u in create_for), total - sum(prefill.values())),
    }


RACES = {
    # One user one slot... a few slots short of its quota, every writer creating keys for that user.
    "one user at its quota": dict(per_user=40, total=100_000, prefill={"racer": 36}, create_for=["racer"]),
    # Many users with room of their own, the whole store a few records short of its global quota.
    "whole store at its quota": dict(per_user=64, total=66, prefill={f"u{n}": 10 for n in range(6)},
                                     create_for=[f"u{n}" for n in range(6)]),
}


@pytest.mark.parametrize("name", RACES, ids=str)
def test_racing_writers_never_pass_a_quota_and_apply_every_update_once(tmp_path, figures, name):
    rounds, writers, updates = scale(1, 4), scale(6, 12), scale(6, 25)
    summary: dict[str, Any] = {"writers": writers, "rounds": rounds, "attempts": 0, "rejected by quota": 0,
                               "busy errors": 0, "unexplained errors": 0, "over quota": 0, "updates lost or doubled": 0}
    for number in range(rounds):
        result = race(tmp_path / f"race-{number}.sqlite3", writers=writers, creates=3, updates=updates,
                      seed=number, **RACES[name])
        assert result["unexplained errors"] == [], result["unexplained errors"][:3]
        assert result["over quota"] == 0 and result["broken updates"] == 0
        assert result["updates refused"] == 0  # updates are allowed at the quota, and none waited out the timeout
        # More creates were tried than there was room for: the room is filled exactly, not overshot.
        assert result["creates accepted"] == result["free before"]
        assert result["rejected by quota"] == writers * 3 - result["free before"] - result["busy errors"]
        assert result["integrity"] == "ok" and result["counters_consistent"]
        for figure in ("attempts", "rejected by quota", "busy errors", "over quota"):
            summary[figure] += result[figure]
        summary["updates lost or doubled"] += result["broken updates"]
    figures(f"Racing writers: {name}", **summary)
