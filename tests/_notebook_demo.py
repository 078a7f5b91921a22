"""What the tests of memkit.notebook share (tests/test_notebook_*.py import it first).

They need the notebook extra: importing this module skips the importing test module without it.
The `demo` store is real (a SQLite file under tmp_path); clicks in those tests are simulated with
`Button.click()` and slider or dropdown moves by setting `.value`, which runs the same handlers a
browser would.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from memkit import FakeClock, MemoryStore  # noqa: E402


@pytest.fixture
def demo(tmp_path):
    """Alice and Bob with the same keys and different values, on a fake clock."""
    with MemoryStore(tmp_path / "demo.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        for user, drink, city in (("alice", "jasmine tea", "Lisbon"), ("bob", "espresso", "Oslo")):
            store.put(user, "s0", "preference", "drink", drink)
            store.put(user, "s0", "preference", "city", city)
        store.put("alice", "s0", "episode", "trip.lisbon", "Walked the Alfama hills in May")
        yield store
