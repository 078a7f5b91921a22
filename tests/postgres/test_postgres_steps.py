"""PostgreSQL's form of the schema steps (`memkit/store/postgres/steps.py`) against SQLite's
(`memkit/store/steps.py`): no server needed, the steps' own text is compared."""

from __future__ import annotations

from memkit.store.schema import MIGRATIONS, SCHEMA_VERSION, expected_columns
from memkit.store.postgres.steps import PG_MIGRATIONS


def test_every_step_has_its_postgresql_form():
    """A step appended to steps.py needs its PostgreSQL form (an empty list where there is nothing
    to do): version N must name the same step on both backends."""
    assert len(PG_MIGRATIONS) == len(MIGRATIONS) == SCHEMA_VERSION


def test_every_version_names_the_same_tables_and_columns_on_both_backends():
    """Each step is declared in both forms: the records they make agree at every version, so an
    export bundle of version N imports into either backend."""
    # Each backend's bookkeeping (SQLite's store-wide count moved into store_meta at step 12,
    # PostgreSQL's counters into memkit_shards at step 13).
    own = {"sqlite": {"store_meta", "total_count"},
           "postgres": {"memkit_meta", "store_size", "total_count", "memkit_shards"}}
    steps = {"sqlite": MIGRATIONS, "postgres": PG_MIGRATIONS}
    for version in range(1, SCHEMA_VERSION + 1):
        sqlite, postgres = ({table: columns for table, columns in expected_columns(version, steps[dialect]).items()
                             if table not in own[dialect]} for dialect in ("sqlite", "postgres"))
        if version >= 15:  # SQLite keeps the retire mark beside the count (history_retired is a view of it)
            sqlite["user_counts"] = sqlite["user_counts"] - {"retired_at"}
        assert sqlite == postgres, version
        assert "memories" in sqlite
