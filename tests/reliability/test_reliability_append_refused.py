"""The reliability lab: an append whose back-pressure write the archive refuses (locked by another
process, or at its size cap) either stored its turn and returned, or stored nothing and raised.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

from _reliability import scale
from lab import redis_faults


def test_an_append_the_archive_refuses_is_stored_and_returns_or_raises_and_stores_nothing(tmp_path, figures):
    totals = {"appends tried": 0, "raised": 0, "raised but stored": 0, "returned but not stored": 0,
              "retried": 0, "copies after the retries": 0}
    errors: set[str] = set()
    for cause in ("locked", "full"):
        folder = tmp_path / cause
        folder.mkdir()
        result = redis_faults.refused_appends(folder, attempts=scale(4, 30), cause=cause)
        totals["appends tried"] += result["attempts"]
        for figure in ("raised", "raised but stored", "returned but not stored", "retried", "copies after the retries"):
            totals[figure] += result[figure]
        errors.update(result["errors"])
    figures("Append when the archive refuses", **totals, **{"errors raised": " ".join(sorted(errors))})
    assert totals["raised"] > 0 and {"LockedError", "QuotaError"} <= errors  # the refusals did happen
    assert totals["raised but stored"] == totals["returned but not stored"] == totals["copies after the retries"] == 0
