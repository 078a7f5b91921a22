"""The reliability lab: the size cap holds while another connection keeps a read open.

SQLite writes commits to the `-wal` and copies them back into the database at checkpoints; a
reader that holds an older snapshot (an unfinished SELECT) stops a checkpoint from starting the log
over, so every commit makes it longer. Unchecked, database plus `-wal` grew to 16 times the cap with
one SELECT left open. The store refuses writes while the log is past the cap, naming the reason,
and writes again once the reader is done. See `tests/_reliability.py` for the sizes and conftest.py
for the `figures` fixture.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from _reliability import FULL, scale
from memkit.errors import QuotaError
from memkit.limits import Limits
from memkit.store import MemoryStore


def _on_disk(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def test_the_size_cap_holds_with_a_select_left_open(tmp_path, figures):
    cap = Limits().max_db_bytes if FULL else 1 << 20  # the default cap at full size
    limits = Limits(max_db_bytes=cap)
    attempts = scale(2000, 10_000)
    path = tmp_path / "memory.sqlite3"
    accepted = refused = other = 0
    largest = 0
    message = ""
    with MemoryStore(path, limits=limits, synchronous="NORMAL") as store:
        for n in range(40):
            store.put("alice", "s1", "episode", f"note{n}", "x" * 400)
        reader = sqlite3.connect(path)
        cursor = reader.execute("SELECT * FROM memories")
        cursor.fetchone()  # an unfinished SELECT: its snapshot stays until the cursor is done
        for n in range(attempts):
            try:
                store.put("alice", "s1", "episode", f"note{n % 40}", f"{n:06d} " + "y" * 400)
                accepted += 1
            except QuotaError as exc:
                refused += 1
                message = str(exc)
            except Exception:
                other += 1
            largest = max(largest, _on_disk(path))
        cursor.close()
        reader.close()
        # The reader is gone: the next write checkpoints the log and goes through.
        store.put("alice", "s1", "episode", "after", "the reader is gone")
        after = _on_disk(path)
    figures("Size cap with an open reader",
            **{"writes tried with a SELECT open": attempts, "accepted": accepted, "refused": refused,
               "other errors": other, "cap (bytes)": cap,
               "largest database + -wal (share of the cap)": round(largest / cap, 2),
               "after the reader closed (share of the cap)": round(after / cap, 2)})
    assert other == 0 and refused > 0 and "finish or close that reader" in message
    assert largest <= 2.1 * cap and after <= cap
