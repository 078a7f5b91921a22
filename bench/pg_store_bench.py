"""The PostgreSQL store against its limit: raw psycopg running the same statements on one connection.

* `RawPsycopg`  one long-lived psycopg connection (autocommit, parameters bound on the client, as the
                store's), running for each operation the statements `PostgresStore` runs, in the
                same order, with the same row locks: no validation, no pool, no record dicts.
* `PgKit`       `PostgresStore` through its public API (its pool, one connection per call).

Each contender has a schema of its own in one server, loaded with the same data set through the
store's bulk path (`import_records`), so the writes of one never change what the other reads.
Operations, rounds and timing are the store benchmark's (`bench.timing`: alternating contenders,
medians); afterwards both must give the same answers to the same questions.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from memkit.clock import iso, utc_now
from memkit.store.postgres import _CHECK_USER_SQL, _SETTLE_SQL
from memkit.store.postgres import _BEGIN_SETTLING as BEGIN_SETTLING
from memkit.store.statements import RECORD_SQL, put_read_args

from .contenders import BENCH_LIMITS, SESSION, Hit, Kit, bundle
from .data import DataSet, make_dataset
from .store_bench import METHOD, StoreConfig, time_operations, workload, written_users

OPERATIONS = ("put (new key)", "put (update)", "get", "search (hit)", "search (miss)")
KIT, RAW = "memkit PostgresStore", "raw psycopg"


@dataclasses.dataclass
class PgStoreConfig:
    sizes: tuple[int, ...] = (1_000, 10_000)
    rounds: int = 7
    writes_per_round: int = 30
    reads_per_round: int = 200
    read_cap_s: float = 0.25
    seed: int = 1


def load(url: str, schema: str, data: DataSet) -> None:
    """`data` into a new store in `schema`, through the store's bulk path, in one transaction."""
    from memkit.store.pg_store import PostgresStore

    with PostgresStore(url, schema=schema, limits=BENCH_LIMITS) as store, store.transaction():
        for user, records in data.by_user().items():
            store.import_records(bundle(user, records))


class PgKit(Kit):
    """memkit's `PostgresStore` through its public API (the SQLite `Kit`'s calls, on PostgreSQL)."""

    name = KIT

    def __init__(self, url: str, schema: str) -> None:  # not Kit.__init__, which opens SQLite
        from memkit.store.pg_store import PostgresStore

        self.store = PostgresStore(url, schema=schema, limits=BENCH_LIMITS)
        self.search_index = self.store.health()["search_index"]


class RawPsycopg:
    """The statements `PostgresStore` runs for each operation, straight through one psycopg connection.

    The same reads and writes, the same row locks (the user's counter row, then a free shard of the
    store-wide counters, whose allowances are far from short here), the same triggers, the same
    search plan (scan, or the trigram index for a large user where the server has `pg_trgm`); minus
    the argument checks, the pool and the record dicts.
    """

    name = RAW

    def __init__(self, url: str, schema: str, search_index: bool) -> None:
        import psycopg

        from memkit.store.pg_connection import pyformat
        from memkit.store.pg_store import PostgresStore

        self.conn = psycopg.Connection.connect(url, autocommit=True, cursor_factory=psycopg.ClientCursor,
                                               options=f"-c search_path={schema} -c synchronous_commit=on")
        sql = PostgresStore.statements()
        self.fts_min_user_rows = PostgresStore.fts_min_user_rows
        self.search_index = search_index
        q = pyformat  # the store's SQL, once, in psycopg's placeholders
        self.lock = q("SELECT records FROM user_counts WHERE user_id = ? FOR UPDATE")
        self.make_counter = q("INSERT INTO user_counts VALUES (?, 0) ON CONFLICT (user_id) DO NOTHING")
        self.for_put = q(sql.select_for_put)
        self.seq = q(sql.take_sequence)
        self.insert, self.update, self.event = q(sql.insert_memory), q(sql.update_memory), q(sql.insert_event)
        self.user_records = q(sql.user_records)
        self.checking, self.settle = q(_CHECK_USER_SQL), q(_SETTLE_SQL)
        self.caps = (BENCH_LIMITS.max_records_total, BENCH_LIMITS.max_db_bytes // 8192 * 8192)
        self.get_sql = q(f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?")
        self.scan, self.newest, self.like = q(sql.search.scan()), q(sql.search.recent()), q(sql.search.indexed())
        self.like_terms = sql.search.index_terms

    def close(self) -> None:
        self.conn.close()

    def _locked(self, user: str) -> int:
        row = self.conn.execute(self.lock, (user,)).fetchone()
        if row is None:
            self.conn.execute(self.make_counter, (user,))
            row = self.conn.execute(self.lock, (user,)).fetchone()
        return int(row[0])

    def put(self, user: str, kind: str, key: str, value: str) -> int:
        execute = self.conn.execute
        now = iso(utc_now())
        execute(BEGIN_SETTLING)
        self._locked(user)
        # id, record columns, seq, the two counters, the last revision: one statement (the store's)
        row = execute(self.for_put, put_read_args(user, kind, key)).fetchone()
        if row[0] is not None and row[3] == value:
            execute("COMMIT")
            return int(row[5])
        seq = execute(self.seq, (1,)).fetchone()[0]
        if row[0] is None:
            execute(self.checking, (1, user)).fetchone()  # the quota check: the user's row, the global one noted
            revision, action, old = (row[11] or 0) + 1, "create", None
            execute(self.insert, (user, kind, key, value, SESSION, revision, now, now, key.casefold(),
                                  value.casefold(), seq))
        else:
            revision, action, old = row[5] + 1, "update", row[3]
            execute(self.update, (value, value.casefold(), SESSION, revision, max(now, row[7]), seq, row[0]))
        execute(self.event, (user, kind, key, action, revision, SESSION, old, value, None, now))
        self._settle()  # the size check: the counts settled into a free shard (no rebalance: never short here)
        execute("COMMIT")
        return int(revision)

    def _settle(self) -> None:
        """The store's fast path of settling a write's counts (postgres.py, `_settle`): a free shard
        whose allowances take them, locked and changed, in one call."""
        self.conn.execute(self.settle, (*self.caps, True)).fetchone()

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
        return execute(self.like, (user, *self.like_terms(folded), limit)).fetchall()

    def search(self, user: str, query: str, limit: int = 5) -> list[Hit]:
        return [(r[0], r[1], r[2]) for r in self._rows(user, query, limit)]

    def records(self, user: str) -> list[tuple[str, str, str]]:
        rows = self.conn.execute("SELECT kind, memory_key, value FROM memories WHERE user_id = %s", (user,))
        return sorted((r[0], r[1], r[2]) for r in rows)


def _agreement(data: DataSet, plan: dict[str, list[list[tuple[Any, ...]]]], kit: PgKit,
               raw: RawPsycopg) -> dict[str, Any]:
    """The same questions to both after the timed writes: how many answers differed."""
    asked = differed = 0
    for op in ("get", "search (hit)", "search (miss)"):
        for item in plan[op][0][:50]:
            asked += 1
            differed += getattr(kit, METHOD[op])(*item) != getattr(raw, METHOD[op])(*item)
    for user in sorted(written_users(plan)):
        asked += 1
        differed += kit.records(user) != raw.records(user)
    return {"size": data.size, "questions": asked, "disagreements": differed}


def run(url: str, config: PgStoreConfig, log: Any = print) -> dict[str, Any]:
    """Time every operation at every size on the server at `url`; rows of medians, and the checks."""
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    for size in config.sizes:
        data = make_dataset(size, config.seed)
        tag = uuid.uuid4().hex[:8]
        kit_schema, raw_schema = f"bench_kit_{tag}", f"bench_raw_{tag}"
        load(url, kit_schema, data)
        load(url, raw_schema, data)
        kit = PgKit(url, kit_schema)
        raw = RawPsycopg(url, raw_schema, search_index=kit.search_index == "pg_trgm")
        log(f"  {size:>7} records, {len(data.users)} users, search by {kit.search_index}")
        # The store benchmark's workload and timing (alternating rounds, medians), for these operations.
        timing = StoreConfig(rounds=config.rounds, writes_per_round=config.writes_per_round,
                             reads_per_round=config.reads_per_round, read_cap_s=config.read_cap_s)
        plan = workload(data, timing)
        try:
            med = {(r["operation"], r["contender"]): r["median_s"]
                   for r in time_operations(size, [kit, raw], plan, OPERATIONS, timing, log)}
            rows += [{"size": size, "operation": op, "search": kit.search_index,
                      "memkit_us": round(med[(op, KIT)] * 1e6, 1), "raw_us": round(med[(op, RAW)] * 1e6, 1),
                      "ratio": round(med[(op, RAW)] / med[(op, KIT)], 2)} for op in OPERATIONS]
            checks.append(_agreement(data, plan, kit, raw))
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
