"""bench/pg_*.py and bench/report.py keep their promises (timings are never asserted, only what they are made of): the
raw psycopg limit runs what PostgresStore runs and gives its answers, and the PostgreSQL section of
bench/RESULTS.md replaces its older self and leaves every other section as it was. `python -m bench
--quick` (tests/benchmarks/test_bench.py) runs the whole of it, with the writer curve."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # bench/ is a folder of the checkout, not of the package

from bench import report  # noqa: E402
from bench.data import MISS_QUERY_STEM, make_dataset  # noqa: E402
from bench.pg_store_bench import PgKit, RawPsycopg, load  # noqa: E402

pytestmark = pytest.mark.postgres


@pytest.fixture(params=["pg", "pg-trgm"])
def twin(request):
    """The same data set loaded into two schemas of one server: the store, and the raw limit."""
    url = request.getfixturevalue("pg_url" if request.param == "pg" else "pg_trgm_url")
    data = make_dataset(200, seed=3)
    tag = uuid.uuid4().hex[:8]
    load(url, f"kit_{tag}", data)
    load(url, f"raw_{tag}", data)
    kit = PgKit(url, f"kit_{tag}")
    raw = RawPsycopg(url, f"raw_{tag}", search_index=kit.search_index == "pg_trgm")
    yield data, kit, raw
    kit.close()
    raw.close()


def test_the_raw_limit_gives_the_stores_answers(twin):
    data, kit, raw = twin
    assert kit.search_index == ("pg_trgm" if raw.search_index else "scan")
    for record in data.records[:20]:
        assert [c.get(record.user, record.kind, record.key) for c in (kit, raw)] == [record.value] * 2
    user = data.records[0].user
    assert [c.put(user, "episode", "bench.new", "a brand new memory") for c in (kit, raw)] == [1, 1]
    assert [c.put(user, "episode", "bench.new", "a brand new memory") for c in (kit, raw)] == [1, 1]  # unchanged
    assert [c.put(user, "episode", "bench.new", "changed memory") for c in (kit, raw)] == [2, 2]
    assert kit.search(user, "CHANGED mem") == raw.search(user, "CHANGED mem") == [
        ("episode", "bench.new", "changed memory")]
    assert kit.search(user, MISS_QUERY_STEM) == raw.search(user, MISS_QUERY_STEM) == []
    assert kit.records(user) == raw.records(user)
    history = kit.store.history(user, "episode", "bench.new")
    assert [(e["action"], e["revision"]) for e in history] == [("create", 1), ("update", 2)]
    assert raw.conn.execute("SELECT action, revision FROM memory_events WHERE user_id = %s AND memory_key = %s"
                            " ORDER BY revision", (user, "bench.new")).fetchall() == [("create", 1), ("update", 2)]


RESULTS = {
    "meta": {"command": "python -m bench", "server": "PostgreSQL 15.0", "cores": 2, "wall_s": 1.0, "rounds": 1},
    "store": {"rows": [{"size": 200, "operation": "get", "search": "scan", "memkit_us": 200.0, "raw_us": 150.0,
                        "ratio": 0.75}], "checks": [{"size": 200, "questions": 9, "disagreements": 0}]},
    "writers": {"points": [{"backend": b, "processes": n, "writes_per_s": 100.0, "min": 90.0, "max": 110.0}
                           for b in ("SQLite (WAL)", "PostgreSQL") for n in (1, 2)],
                "seconds": 1.0, "rounds": 1, "lost_writes": 0, "refused_writes": 0},
}


@pytest.mark.parametrize("before", ["", "# Results\n\n## Store\n\ntable\n", "# Results\n\n## Store\n\ntable\n\n"
                                    "## PostgreSQL backend\n\nold figures\n\n## Window\n\nwindow table\n"])
def test_the_results_section_replaces_its_older_self_and_keeps_the_rest(tmp_path, before):
    path = tmp_path / "RESULTS.md"
    if before:
        path.write_text(before, encoding="utf-8")
    section = report.pg_markdown(RESULTS)
    report.write_section(path, section)
    report.write_section(path, section)  # a second run: still one section
    text = path.read_text(encoding="utf-8")
    assert text.count(report.PG_SECTION) == 1 and "old figures" not in text
    assert "| 200 | get | scan | 200.0 | 150.0 | 0.75 | held |" in text
    assert "| 2 | 100 (90-110) | 100 (90-110) |" in text
    for kept in ("## Store\n\ntable", "## Window\n\nwindow table"):
        assert (kept in text) == (kept in before)
    assert [t["holds"] for t in report.pg_targets(RESULTS)] == [True]
