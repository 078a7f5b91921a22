"""The reliability lab: Redis restarts from a state older than the archive (a stock server's RDB
snapshot, or the last second of an AOF lost), and the window goes on.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import random

from _reliability import scale
from lab import redis_faults


def test_a_redis_restarted_from_an_older_snapshot_reuses_no_archived_number_and_drops_no_turn(tmp_path, figures,
                                                                                              monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)  # the experiment kills and restarts its own server
    rng = random.Random(12)
    totals = {"restarts": 0, "of them with the caller's own clients": 0, "turns acknowledged after a restart": 0,
              "kept": 0, "dropped": 0, "doubled": 0, "numbers reused": 0, "renumbered and reported": 0,
              "lost with the older state (never archived)": 0}
    for number in range(scale(3, 30)):
        size = rng.randint(1, 4)
        before = rng.randint(size + 6, 25)
        # The snapshot is older than what the archive will hold: the counter goes back behind it.
        # Every other round the windows run on plain clients of the caller's own: their appends ask
        # INFO for the server's life, where kit clients read the key their connect hook keeps.
        own = number % 2 == 1
        result = redis_faults.older_state_restart(tmp_path / f"round-{number}", before=before, after=rng.randint(1, 6),
                                                  size=size, snapshot_at=rng.randint(3, before - size - 2),
                                                  own_clients=own)
        assert result["counter after the restart"] < result["archived before the restart"]  # it did go back
        totals["restarts"] += 1
        totals["of them with the caller's own clients"] += own
        totals["turns acknowledged after a restart"] += result["acknowledged after the restart"]
        for figure in ("kept", "dropped", "doubled", "numbers reused"):
            totals[figure] += result[figure]
        totals["renumbered and reported"] += result["renumbered"]
        totals["lost with the older state (never archived)"] += result["lost with the older state"]
    figures("Redis restarted from an older state", **totals)
    assert totals["dropped"] == totals["doubled"] == totals["numbers reused"] == 0
    assert totals["kept"] == totals["turns acknowledged after a restart"]
