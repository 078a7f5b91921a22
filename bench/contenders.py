"""The three ways to keep the same memories, behind one small interface (plain tuples, so the
suite can check that they agree), all in WAL at the same `synchronous`:

* `RawLimit`  the physical limit: the store's own statements (`MemoryStore.statements()`) on one
              long-lived `sqlite3` connection to a copy of the kit's file; no validation, no dicts.
* `Naive`     the textbook first version: one table, a connection per call, `count(*)` quotas, a
              full-table `instr()` search.
* `Kit`       memkit's `MemoryStore` and `retrieve`, through their public API.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from memkit.clock import iso, utc_now
from memkit.limits import Limits
from memkit.retrieval import retrieve
from memkit.store import EXPORT_FORMAT, EXPORT_FORMAT_VERSION, SCHEMA_VERSION, MemoryStore, seal_bundle
from memkit.store.statements import put_read_args

from .data import DataSet, Memory

SESSION = "bench"
Hit = tuple[str, str, str]  # kind, key, value

BENCH_LIMITS = Limits().replace(
    max_records_per_user=900, max_records_total=10_000_000, max_db_bytes=1 << 40, max_events_per_user=3600,
)
"""The teaching quotas (64 per user, 1024 in all, 16 MiB) raised so that 100k records fit.

900 per user holds the largest user of every data set (495 records) and a run's writes, and stays
below `MemoryStore.fts_min_user_rows` (1000): as with the teaching quota, no user can reach the size
at which search asks the trigram index, so the store keeps none (`INDEXED_LIMITS` keeps it).

The history bound is raised with the quota, in the defaults' proportion (256 events for 64 records:
4 per record). Left at 256 under a quota of 900, every write of a user holding more records than
that would look for events to prune and find none (each held key keeps its newest event): a search
of the user's whole history, about 0.4 ms at 500 records, that no store with the default limits
makes (its users hold at most 64 records). What pruning costs a user at the bound is measured
apart, in the write profile."""

INDEXED_LIMITS = BENCH_LIMITS.replace(max_records_per_user=1_000_000)
"""A per-user quota above `fts_min_user_rows`: a store with it keeps the trigram index up to date."""

# The store's own statements (its public hook), so the raw limit runs exactly what memkit runs and
# follows schema changes.
_SQL = MemoryStore.statements()
_COLUMNS = _SQL.record_columns


def bundle(user: str, records: list[Memory]) -> str:
    """`records` as a memkit export bundle (the format `export_user` writes), one create event each."""
    lines: list[dict[str, Any]] = [{"format": EXPORT_FORMAT, "format_version": EXPORT_FORMAT_VERSION,
                                    "schema_version": SCHEMA_VERSION, "user": user,
                                    "records": len(records), "events": len(records)}]
    lines += [{"type": "record", "kind": r.kind, "key": r.key, "value": r.value, "source_session": "load",
               "revision": 1, "created_at": r.at, "updated_at": r.at} for r in records]
    lines += [{"type": "event", "kind": r.kind, "key": r.key, "action": "create", "revision": 1,
               "session": "load", "old_value": None, "new_value": r.value, "confirmation": None, "at": r.at}
              for r in records]
    return seal_bundle(lines)


def build_kit_file(path: Path, data: DataSet, limits: Limits = BENCH_LIMITS) -> float:
    """Load `data` into a new memkit file through the kit's own bulk path; return the seconds it took.

    The documented bulk path is `MemoryStore.import_records`: it validates every entry like a live
    write and inserts a user's records and events with `executemany`. All users go in one outer
    `transaction()` (each import is a savepoint), so the load costs one fsync, not one per user.
    """
    started = time.perf_counter()
    with MemoryStore(path, limits=limits) as store:
        load_kit(store, data)
    return time.perf_counter() - started


def load_kit(store: MemoryStore, data: DataSet) -> None:
    """`data` into `store` through `import_records`, every user in one outer transaction."""
    with store.transaction():
        for user, records in data.by_user().items():
            store.import_records(bundle(user, records))


def _connect(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    return conn


class Kit:
    """memkit through its public API."""

    journal_mode = "WAL"

    def __init__(self, path: Path, synchronous: str, limits: Limits = BENCH_LIMITS, name: str = "memkit",
                 data: DataSet | None = None) -> None:
        self.name = name
        self.store = MemoryStore(path, limits=limits, synchronous=synchronous, check_integrity=False)
        self.conn = self.store.connection  # for PRAGMA checks, as the peers' `conn`
        self.load_s = 0.0
        if data is not None:
            # Loaded on the connection that is then timed, as `LangGraphStore` loads its data: both
            # time their writes on a -wal their own load grew. A store reopened after its load starts
            # with none, and its first ~1000 pages of commits each grow the file (bench/NOTES.md).
            started = time.perf_counter()
            load_kit(self.store, data)
            self.load_s = time.perf_counter() - started

    def close(self) -> None:
        self.store.close()

    def put(self, user: str, kind: str, key: str, value: str) -> int:
        return self.store.put(user, SESSION, kind, key, value)["revision"]

    def get(self, user: str, kind: str, key: str) -> str | None:
        record = self.store.get(user, kind, key)
        return record["value"] if record else None

    def delete(self, user: str, kind: str, key: str) -> bool:
        return self.store.delete(user, kind, key, session=SESSION)

    def search(self, user: str, query: str, limit: int = 5) -> list[Hit]:
        return [(r["kind"], r["key"], r["value"]) for r in self.store.search(user, query, limit)]

    def retrieve(self, user: str, task: str) -> list[tuple[str, str]]:
        return [(m["kind"], m["key"]) for m in retrieve(self.store, user, task).memory]

    def records(self, user: str) -> list[tuple[str, str, str]]:
        return sorted((r["kind"], r["key"], r["value"]) for r in self.store.records(user))


class RawLimit:
    """The statements the kit's operations need, on its schema, straight through `sqlite3`.

    Mirrors `MemoryStore`'s SQL (same reads, same writes, same triggers fire, same search plan),
    minus everything Python adds around it: argument checks, the lock, record dicts.
    """

    name = "raw sqlite3"

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = _connect(path, synchronous)
        self.fts_min_user_rows = MemoryStore.fts_min_user_rows
        self.limits = BENCH_LIMITS  # for retrieve(), which reads the retrieval bounds from its store
        # As the store decides at open (search_index.TrigramIndex.fit_search_index): where no user can
        # reach the index's threshold, search scans without reading the user's count first.
        biggest = self.conn.execute("SELECT max(records) FROM user_counts").fetchone()[0] or 0
        self.index_reachable = max(self.limits.max_records_per_user, biggest) >= self.fts_min_user_rows

    def close(self) -> None:
        self.conn.close()

    def put(self, user: str, kind: str, key: str, value: str) -> int:
        conn = self.conn
        now = iso(utc_now())
        conn.execute("BEGIN IMMEDIATE")
        # id, the record's columns, its seq, the two quota counters, the key's last revision: one row always.
        row = conn.execute(_SQL.select_for_put, put_read_args(user, kind, key)).fetchone()
        seq = conn.execute(_SQL.take_sequence, (1,)).fetchone()[0]
        if row[0] is None:
            revision, action, old = (row[11] or 0) + 1, "create", None
            conn.execute(_SQL.insert_memory, (user, kind, key, value, SESSION, revision, now, now, key.casefold(),
                                              value.casefold(), seq))
        else:
            revision, action, old = row[5] + 1, "update", row[3]
            conn.execute(_SQL.update_memory, (value, value.casefold(), SESSION, revision, now, seq, user, kind, key))
        conn.execute(_SQL.insert_event, (user, kind, key, action, revision, SESSION, old, value, None, now))
        conn.execute("PRAGMA page_count").fetchone()  # the size cap check
        conn.execute("COMMIT")
        return revision

    def get(self, user: str, kind: str, key: str) -> str | None:
        row = self.conn.execute(f"SELECT {_COLUMNS} FROM memories {Naive.WHERE}", (user, kind, key)).fetchone()
        return row[2] if row else None

    def delete(self, user: str, kind: str, key: str) -> bool:
        conn = self.conn
        now = iso(utc_now())
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute(_SQL.select_current, (user, kind, key)).fetchone()
        if row is None:
            conn.execute("COMMIT")
            return False
        conn.execute(_SQL.delete_memory, (user, kind, key))
        conn.execute(_SQL.take_sequence, (1,)).fetchone()  # every commit takes a number: the event's id
        conn.execute(_SQL.insert_event, (user, kind, key, "delete", row[2], SESSION, row[1], None, None, now))
        conn.execute("COMMIT")
        return True

    def _rows(self, user: str, query: str, limit: int, kind: str | None) -> list[tuple[Any, ...]]:
        conn = self.conn
        folded = query.casefold()
        kind_sql, kind_args = ("AND kind = ?", (kind,)) if kind else ("", ())
        search = _SQL.search  # the store's own search statements
        if not folded:
            return conn.execute(search.newest(kind_sql), (user, *kind_args, limit)).fetchall()
        if len(folded) < 3 or not self.index_reachable or self._user_records(user) < self.fts_min_user_rows:
            return conn.execute(search.scan(kind_sql), (user, *kind_args, folded, folded, limit)).fetchall()
        if self.fts_min_user_rows > 0:
            rows = conn.execute(search.recent(kind_sql),
                                (user, *kind_args, self.fts_min_user_rows, folded, folded, limit)).fetchall()
            if len(rows) == limit:
                return rows
        return conn.execute(search.indexed(kind_sql), (user, *kind_args, *search.index_terms(folded), limit)).fetchall()

    def _user_records(self, user: str) -> int:
        row = self.conn.execute(_SQL.user_records, (user,)).fetchone()
        return row[0] if row else 0

    def _many(self, user: str, queries: list[str], limit: int,
              kinds: tuple[str, ...]) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
        """The kit's `search_many` statement: every term and kind in one pass over the user's rows."""
        unique = list(dict.fromkeys(queries))
        if not unique:
            return {}
        if self.index_reachable and self._user_records(user) >= self.fts_min_user_rows:
            return {(q, k): self._rows(user, q, limit, k) for q in unique for k in kinds}
        rows = self.conn.execute(_SQL.search.flagged(len(unique), len(kinds)),
                                 (*(f for q in unique for f in (q.casefold(),) * 2), user, *kinds)).fetchall()
        found: dict[tuple[str, str], list[tuple[Any, ...]]] = {(q, k): [] for q in unique for k in kinds}
        for row in rows:
            for n, query in enumerate(unique, start=8):  # the flags follow the record columns and seq
                hits = found[(query, row[0])]
                if row[n] and len(hits) < limit:
                    hits.append(row)
        return found

    def search(self, user: str, query: str, limit: int = 5) -> list[Hit]:
        return [(r[0], r[1], r[2]) for r in self._rows(user, query, limit, None)]

    def retrieve(self, user: str, task: str) -> list[tuple[str, str]]:
        # The same packing code as the kit (retrieval.retrieve), fed by the raw statements above.
        return [(m["kind"], m["key"]) for m in retrieve(_RecordSource(self), user, task).memory]  # type: ignore[arg-type]


def _as_record(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"kind": row[0], "key": row[1], "value": row[2], "updated_at": row[6]}


class _RecordSource:
    """What `retrieve` needs of a store (`search`, `search_many`, `limits`), over a contender's rows."""

    def __init__(self, contender: RawLimit | Naive) -> None:
        self.contender = contender
        self.limits = BENCH_LIMITS

    def search(self, user: str, query: str = "", limit: int = 5, kind: str | None = None) -> list[dict[str, Any]]:
        return [_as_record(r) for r in self.contender._rows(user, query, limit, kind)]

    def search_many(self, user: str, queries: list[str], limit: int = 5,
                    kinds: tuple[str, ...] = ("preference", "episode")) -> dict[tuple[str, str], list[dict[str, Any]]]:
        found = self.contender._many(user, queries, limit, kinds)
        return {pair: [_as_record(r) for r in rows] for pair, rows in found.items()}


class Naive:
    """The textbook first version: what a tutorial writes before anyone measures.

    One table, no index besides the rowid; a new connection for every operation (WAL and the same
    `synchronous` set on each, as durability demands); quotas checked with `count(*)`; search with
    a case-insensitive `instr()` over every row of the table.
    """

    name = "naive"
    WHERE = "WHERE user_id = ? AND kind = ? AND memory_key = ?"

    def __init__(self, path: Path, synchronous: str, data: DataSet | None = None) -> None:
        self.path, self.synchronous, self.limits = path, synchronous, BENCH_LIMITS
        if data is not None:
            with contextlib.closing(_connect(path, synchronous)) as conn, conn:
                conn.execute("BEGIN")
                conn.execute("CREATE TABLE memories (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, kind TEXT NOT NULL,"
                             " memory_key TEXT NOT NULL, value TEXT NOT NULL, source_session TEXT NOT NULL,"
                             " revision INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)")
                conn.executemany("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
                                 " created_at, updated_at) VALUES (?, ?, ?, ?, 'load', 1, ?, ?)",
                                 [(r.user, r.kind, r.key, r.value, r.at, r.at) for r in data.records])
                conn.execute("COMMIT")

    def close(self) -> None:
        pass  # nothing is kept open between operations

    def _open(self) -> contextlib.closing[sqlite3.Connection]:
        return contextlib.closing(_connect(self.path, self.synchronous))

    def put(self, user: str, kind: str, key: str, value: str) -> int:
        with self._open() as conn:
            now = iso(utc_now())
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(f"SELECT id, revision FROM memories {self.WHERE}", (user, kind, key)).fetchone()
            if row is None:
                mine = conn.execute("SELECT count(*) FROM memories WHERE user_id = ?", (user,)).fetchone()[0]
                total = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
                if mine >= self.limits.max_records_per_user or total >= self.limits.max_records_total:
                    conn.execute("ROLLBACK")
                    raise RuntimeError("quota")
                conn.execute("INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision,"
                             " created_at, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)",
                             (user, kind, key, value, SESSION, now, now))
                revision = 1
            else:
                revision = row[1] + 1
                conn.execute("UPDATE memories SET value = ?, source_session = ?, revision = ?, updated_at = ?"
                             " WHERE id = ?", (value, SESSION, revision, now, row[0]))
            conn.execute("COMMIT")
            return revision

    def get(self, user: str, kind: str, key: str) -> str | None:
        with self._open() as conn:
            row = conn.execute(f"SELECT value FROM memories {self.WHERE}", (user, kind, key)).fetchone()
            return row[0] if row else None

    def delete(self, user: str, kind: str, key: str) -> bool:
        with self._open() as conn:
            return conn.execute(f"DELETE FROM memories {self.WHERE}", (user, kind, key)).rowcount > 0

    def _rows(self, user: str, query: str, limit: int, kind: str | None) -> list[tuple[Any, ...]]:
        with self._open() as conn:
            return conn.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE user_id = ? AND (? IS NULL OR kind = ?)"
                " AND (instr(lower(memory_key), lower(?)) > 0 OR instr(lower(value), lower(?)) > 0)"
                " ORDER BY updated_at DESC, id DESC LIMIT ?", (user, kind, kind, query, query, limit)).fetchall()

    def _many(self, user: str, queries: list[str], limit: int,
              kinds: tuple[str, ...]) -> dict[tuple[str, str], list[tuple[Any, ...]]]:
        # The obvious way: one search per term and kind, each through its own new connection.
        return {(q, k): self._rows(user, q, limit, k) for q in queries for k in kinds}

    def search(self, user: str, query: str, limit: int = 5) -> list[Hit]:
        return [(r[0], r[1], r[2]) for r in self._rows(user, query, limit, None)]

    def retrieve(self, user: str, task: str) -> list[tuple[str, str]]:
        # The same packing code as the kit, fed by the naive searches.
        return [(m["kind"], m["key"]) for m in retrieve(_RecordSource(self), user, task).memory]  # type: ignore[arg-type]


def make_contenders(workdir: Path, data: DataSet, synchronous: str) -> tuple[list[Any], dict[str, float]]:
    """Build the three databases from `data` and open the contenders; return them and load times."""
    kit_path, raw_path, naive_path = workdir / "kit.sqlite3", workdir / "raw.sqlite3", workdir / "naive.sqlite3"
    load = {"memkit (import_records)": build_kit_file(kit_path, data)}
    shutil.copyfile(kit_path, raw_path)  # closed, so checkpointed: the main file holds everything
    started = time.perf_counter()
    naive = Naive(naive_path, synchronous, data)
    load["naive (executemany)"] = time.perf_counter() - started
    return [RawLimit(raw_path, synchronous), naive, Kit(kit_path, synchronous)], load


class KitSearch:
    """memkit's `MemoryStore.search` as an application calls it: the bound method, nothing around it.

    For the small store's search (`store_bench.run_small_search`), beside `BareSearch`.
    """

    name = "memkit"

    def __init__(self, path: Path, synchronous: str, limits: Limits) -> None:
        self.store = MemoryStore(path, limits=limits, synchronous=synchronous, check_integrity=False)  # type: ignore[arg-type]
        self.conn = self.store.connection  # traced by the agreement check: which statements the call ran
        self.search = self.store.search

    def close(self) -> None:
        self.store.close()

    def answer(self, user: str, query: str, limit: int) -> list[tuple[Any, ...]]:
        """The records found, each as its values in column order (a record is the selected columns, zipped)."""
        return [tuple(record.values()) for record in self.store.search(user, query, limit)]


class BareSearch:
    """The one statement `MemoryStore.search` runs for a literal query of 3 characters or more where
    no user can reach `fts_min_user_rows` (the store's own `search.scan`, so it follows the schema),
    on its own long-lived `sqlite3` connection to a copy of the kit's file: the query folded, the
    statement run, its rows fetched, and nothing else."""

    name = "bare statement"

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = _connect(path, synchronous)
        self.sql = _SQL.search.scan()

    def close(self) -> None:
        self.conn.close()

    def search(self, user: str, query: str, limit: int = 5) -> list[tuple[Any, ...]]:
        folded = query.casefold()
        return self.conn.execute(self.sql, (user, folded, folded, limit)).fetchall()

    def answer(self, user: str, query: str, limit: int) -> list[tuple[Any, ...]]:
        return [tuple(row) for row in self.search(user, query, limit)]
