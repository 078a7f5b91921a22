"""The PostgreSQL store against its limit: the same statements without the store around them.

`PgKit` is `PostgresStore` through its public API; `RawPsycopg` runs its statements in its order with
its row locks (reads on one long-lived connection, writes inside the backend's own transaction). Each
has a schema of its own in one server, loaded with the same data set through `import_records`; the
timing is the store benchmark's, and afterwards both must give the same answers.
"""

from __future__ import annotations

import uuid
from typing import Any

from memkit.clock import iso, utc_now
from memkit.store import MemoryStore
from memkit.store.statements import put_read_args

from .contenders import BENCH_LIMITS, SESSION, Hit, Kit, bundle
from .data import DataSet, make_dataset
from .store_bench import StoreConfig, agreement, time_operations, workload, written_users

OPERATIONS = ("put (new key)", "put (update)", "get", "search (hit)", "search (miss)")
KIT, RAW = "memkit PostgresStore", "raw psycopg"


def config() -> StoreConfig:
    """The store benchmark's workload and timing at the sizes and batches PostgreSQL runs."""
    return StoreConfig(sizes=(1_000, 10_000), writes_per_round=30, reads_per_round=200)


def load(url: str, schema: str, data: DataSet) -> None:
    """`data` into a new store in `schema`, through the store's bulk path, in one transaction."""
    from memkit.store.postgres.store import PostgresStore

    with PostgresStore(url, schema=schema, limits=BENCH_LIMITS) as store, store.transaction():
        for user, records in data.by_user().items():
            store.import_records(bundle(user, records))


class PgKit(Kit):
    """memkit's `PostgresStore` through its public API (the SQLite `Kit`'s calls, on PostgreSQL)."""

    name = KIT

    def __init__(self, url: str, schema: str) -> None:  # not Kit.__init__, which opens SQLite
        from memkit.store.postgres.store import PostgresStore

        self.store = PostgresStore(url, schema=schema, limits=BENCH_LIMITS)
        self.search_index = self.store.health()["search_index"]


class RawPsycopg:
    """The statements `PostgresStore` runs for each operation, without the store around them.

    Reads go straight through one psycopg connection. A write runs the store's statements
    (`statements()`) in the store's order, inside the backend's own write protocol (the public
    `Backend` methods of `PostgresDatabase`: the transaction that settles the store-wide counts, the
    user's lock, the quota check, the size check), so it holds the same row locks and takes a free
    shard as the store does; minus the argument checks and the record dicts.
    """

    name = RAW

    def __init__(self, url: str, schema: str, search_index: bool) -> None:
        import psycopg

        from memkit.store.postgres.connection import pyformat
        from memkit.store.postgres.backend import PostgresDatabase

        self.db = PostgresDatabase(url, BENCH_LIMITS, "FULL", schema, pool_size=1)
        self.conn = psycopg.Connection.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor,
                                               options=f"-c search_path={schema} -c synchronous_commit=on")
        self.sql = sql = self.db.statements
        self.fts_min_user_rows = MemoryStore.fts_min_user_rows
        self.search_index = search_index
        q = pyformat  # the store's SQL, once, in psycopg's placeholders
        self.get_sql = q(f"SELECT {sql.record_columns} FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?")
        self.user_records = q(sql.user_records)
        self.scan, self.newest, self.like = q(sql.search.scan()), q(sql.search.recent()), q(sql.search.indexed())

    def close(self) -> None:
        self.conn.close()
        self.db.close()

    def put(self, user: str, kind: str, key: str, value: str) -> int:
        db, sql = self.db, self.sql
        now = iso(utc_now())
        with db.transaction() as conn:
            db.lock_user(conn, user, creating=True)
            # id, record columns, seq, the two counters, the last revision: one statement (the store's)
            row: Any = conn.execute(sql.select_for_put, put_read_args(user, kind, key)).fetchone()
            if row[0] is not None and row[3] == value:
                return int(row[5])
            seq = db.take_sequence(conn)
            if row[0] is None:
                db.check_quotas(conn, user)
                revision, action, old = (row[11] or 0) + 1, "create", None
                conn.execute(sql.insert_memory, (user, kind, key, value, SESSION, revision, now, now, key.casefold(),
                                                 value.casefold(), seq))
            else:
                revision, action, old = row[5] + 1, "update", row[3]
                conn.execute(sql.update_memory, (value, value.casefold(), SESSION, revision, max(now, row[7]), seq,
                                                 user, kind, key))
            conn.execute(sql.insert_event, (user, kind, key, action, revision, SESSION, old, value, None, now))
            db.check_size(conn)  # the counts settled into a free shard (never short here: no rebalance)
        return int(revision)

    def get(self, user: str, kind: str, key: str) -> str | None:
        row = self.conn.execute(self.get_sql, (user, kind, key)).fetchone()
        return row[2] if row else None

    def _rows(self, user: str, query: str, limit: int) -> list[Any]:
        folded = query.casefold()
        execute = self.conn.execute
        if not self.search_index or len(folded) < 3 or \
                (execute(self.user_records, (user,)).fetchone() or (0,))[0] < self.fts_min_user_rows:
            return execute(self.scan, (user, folded, folded, limit)).fetchall()
        if self.fts_min_user_rows > 0:
            rows = execute(self.newest, (user, self.fts_min_user_rows, folded, folded, limit)).fetchall()
            if len(rows) == limit:
                return rows
        return execute(self.like, (user, *self.sql.search.index_terms(folded), limit)).fetchall()

    def search(self, user: str, query: str, limit: int = 5) -> list[Hit]:
        return [(r[0], r[1], r[2]) for r in self._rows(user, query, limit)]

    def records(self, user: str) -> list[tuple[str, str, str]]:
        rows = self.conn.execute("SELECT kind, memory_key, value FROM memories WHERE user_id = %s", (user,))
        return sorted((r[0], r[1], r[2]) for r in rows)


def run(url: str, timing: StoreConfig, log: Any = print) -> dict[str, Any]:
    """Time every operation at every size on the server at `url`; rows of medians, and the checks."""
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for size in timing.sizes:
        data = make_dataset(size, timing.seed)
        tag = uuid.uuid4().hex[:8]
        kit_schema, raw_schema = f"bench_kit_{tag}", f"bench_raw_{tag}"
        load(url, kit_schema, data)
        load(url, raw_schema, data)
        kit = PgKit(url, kit_schema)
        raw = RawPsycopg(url, raw_schema, search_index=kit.search_index == "pg_trgm")
        log(f"  {size:>7} records, {len(data.users)} users, search by {kit.search_index}")
        plan = workload(data, timing)
        try:
            med = {(r["operation"], r["contender"]): r["median_s"]
                   for r in time_operations(size, [kit, raw], plan, OPERATIONS, timing, log)}
            rows += [{"size": size, "operation": op, "search": kit.search_index,
                      "memkit_us": round(med[(op, KIT)] * 1e6, 1), "raw_us": round(med[(op, RAW)] * 1e6, 1),
                      "ratio": round(med[(op, RAW)] / med[(op, KIT)], 2)} for op in OPERATIONS]
            found = agreement(data, [kit, raw], touched=written_users(plan))  # after the timed writes
            checks.append({"size": size, "questions": sum(c["questions"] for c in found),
                           "disagreements": sum(c["disagreements"] for c in found)})
        finally:
            kit.close()
            raw.close()
            drop_schemas(url, kit_schema, raw_schema)
    return {"rows": rows, "checks": checks}


def drop_schemas(url: str, *schemas: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
