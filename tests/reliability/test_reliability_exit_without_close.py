"""The reliability lab: programs that end without close(), with a window on an embedded Redis whose
data is gone when it stops; and open/close cycles that must leave no exit hook behind.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import random

from _reliability import scale
from lab import redis_faults
from memkit.store import MemoryStore
from memkit.servers.redis import _is_alive


def test_a_program_that_ends_without_close_leaves_every_turn_in_the_archive(tmp_path, figures, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    rng = random.Random(7)
    db = tmp_path / "memory.sqlite3"
    totals = {"programs": 0, "turns appended": 0, "archived after the exit": 0, "lost": 0, "servers left running": 0}
    for number in range(scale(4, 40)):
        result = redis_faults.exit_without_close(db, turns=rng.randint(1, 30), size=rng.randint(1, 5),
                                                 own_server=number % 2 == 0, background=number % 4 >= 2,
                                                 session=f"p{number}")
        totals["programs"] += 1
        totals["turns appended"] += len(result["appended"])
        totals["archived after the exit"] += len(result["archived"])
        totals["lost"] += result["lost"]
        totals["servers left running"] += _is_alive(result["redis_pid"])
    figures("A program that ends without close()", **totals)
    assert totals["lost"] == totals["servers left running"] == 0
    assert totals["archived after the exit"] == totals["turns appended"]


def test_open_and_close_cycles_leave_no_exit_hook_and_no_handle_behind(tmp_path, figures, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        result = redis_faults.exit_hook_cycles(store, cycles=scale(10, 40))
    figures("Exit hooks: open/close cycles", **result)
    assert result["exit hooks left"] == result["handles alive"] == 0
