"""The reliability lab: a writer killed with SIGKILL mid-stream, hundreds of times.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import random


from _reliability import ROOMY, integrity, scale
import lab
from memkit.limits import KINDS, Limits
from memkit.store import MemoryStore


def test_crash_sigkill_mid_stream_loses_no_acknowledged_write(tmp_path, figures):
    """A writer streams confirmed creates and updates and is killed with SIGKILL at random moments.

    After every kill the file is opened the way the next session would: `PRAGMA integrity_check`
    must say ok, every acknowledged write must be there with its value and revision, and the only
    write beyond the acknowledgements may be the single one in flight (committed, killed before it
    could say so). A row the writer never attempted must not exist.
    """
    kills = scale(12, 300)
    rng = random.Random(1)
    path = tmp_path / "crash.sqlite3"
    user = "crash"
    pool = [(kind, f"{kind[:4]}-{n}") for kind in KINDS for n in range(10)]
    state: dict[tuple[str, str], tuple[str, int]] = {}  # what the file must hold: value, revision
    acked_values: dict[tuple[str, str, int], str] = {}  # every acknowledged (kind, key, revision)
    totals = {"kills": 0, "after the stream ended": 0, "acknowledged": 0, "in_flight_committed": 0,
              "lost": 0, "phantom": 0, "corrupt": 0}
    for round_number in range(kills):
        ops = []
        for n in range(60):
            kind, key = rng.choice(pool) if rng.random() < 0.75 else ("episode", f"new-{round_number}-{n}")
            ops.append([kind, key, f"round {round_number} op {n} {key} ☕ " + "x" * rng.randrange(300)])
        wanted = rng.randint(0, 25)
        # The kill lands anywhere: in a put, a commit, a checkpoint. The writer waits to be killed
        # after its last op, so every round ends with a SIGKILL.
        stream = lab.stream_writes(path, user=user, session=f"r{round_number}", ops=ops, kill_after_acks=wanted,
                                   delay_s=rng.uniform(0, 0.004), wait_when_done=True,
                                   synchronous="FULL" if round_number % 2 == 0 else "NORMAL")
        assert stream["killed"], stream["stderr"]
        # Acknowledgements already in the pipe count too: the writer said them, a user could have seen them.
        acks = stream["acks"]
        totals["kills"] += 1
        # A kill that lands after the writer's last op is a fact to count, not a failure.
        totals["after the stream ended"] += stream["done"]
        assert [number for number, _ in acks] == list(range(len(acks)))
        for number, revision in acks:
            kind, key, value = ops[number]
            previous = state.get((kind, key))
            assert revision == (previous[1] + 1 if previous else 1), (kind, key, revision, previous)
            state[(kind, key)] = (value, revision)
            acked_values[(kind, key, revision)] = value
        totals["acknowledged"] += len(acks)
        in_flight = ops[len(acks)] if len(acks) < len(ops) else None

        with MemoryStore(path, limits=Limits().replace(**ROOMY)) as store:
            checked = integrity(store)
            stored = {(r["kind"], r["key"]): (r["value"], r["revision"]) for r in store.records(user)}
            consistent = store.health()["counters_consistent"]
        totals["corrupt"] += checked != "ok" or not consistent
        for place, expected in state.items():
            found = stored.get(place)
            if found == expected:
                continue
            if in_flight is not None and place == tuple(in_flight[:2]) and found == (in_flight[2], expected[1] + 1):
                continue
            totals["lost"] += 1
        for place, found in stored.items():
            if place in state:
                continue
            if in_flight is not None and place == tuple(in_flight[:2]) and found == (in_flight[2], 1):
                continue
            totals["phantom"] += 1
        if in_flight is not None and stored.get(tuple(in_flight[:2])) != state.get(tuple(in_flight[:2])):
            totals["in_flight_committed"] += 1
            state[tuple(in_flight[:2])] = stored[tuple(in_flight[:2])]
            acked_values[(*in_flight[:2], stored[tuple(in_flight[:2])][1])] = in_flight[2]

    # The history of every key: revisions 1, 2, 3, ... with no gap, each acknowledged value in it.
    with MemoryStore(path, limits=Limits().replace(**ROOMY)) as store:
        for (kind, key), (value, revision) in state.items():
            history = store.history(user, kind, key)
            assert [event["revision"] for event in history] == list(range(1, revision + 1)), (kind, key)
            assert history[-1]["new_value"] == value
        for (kind, key, revision), value in acked_values.items():
            events = [e for e in store.history(user, kind, key) if e["revision"] == revision]
            totals["lost"] += [e["new_value"] for e in events] != [value]
        final = integrity(store)
    figures("Crash: SIGKILL mid-stream", kills=totals["kills"], **{
        "kills after the stream ended": totals["after the stream ended"],
        "acknowledged writes": totals["acknowledged"],
        "in-flight writes committed unacknowledged": totals["in_flight_committed"],
        "lost": totals["lost"], "never-attempted rows": totals["phantom"], "corrupt": totals["corrupt"],
    })
    assert totals["kills"] == kills
    assert (totals["lost"], totals["phantom"], totals["corrupt"], final) == (0, 0, 0, "ok")
    assert totals["acknowledged"] > kills  # the kills landed in a stream, not before it
