"""The reliability lab: `memkit migrate` killed with SIGKILL in the middle of a step.

A store made at schema version 3 by memkit's own steps and filled with plain SQL as that version
wrote (enough records that step 4, which numbers every record and indexes the numbers, and step 15,
which rebuilds the records and their history clustered by key, take a while) is migrated by the real
`memkit migrate --confirm`, SIGKILLed at a random moment after it was seen holding the write lock.
Each kill records whether the migrator had begun writing and which version the file was left at:
kills inside a step (the lock seen, a version below the last still on disk) show the hold is tested
where it matters. After every kill the file passes `PRAGMA integrity_check`, is
sound at the version it says (every object and column that version's steps make: never half a
step), keeps every record and event, and a second `memkit migrate` finishes.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from _cli_helpers import env_with
from _reliability import scale
from lab.workers import wait_for
from memkit.store import MIGRATIONS, SCHEMA_VERSION, MemoryStore
from memkit.store.schema import SqliteSchema, check_schema

OLD_VERSION = 3
"""Steps up to 3 made the file; step 4 (`seq` for every record, and its index) and step 15 (every
record and event copied into tables clustered by key) are the long ones."""


def old_store(path: Path, records: int) -> Path:
    """A file at `OLD_VERSION`, made by memkit's steps, holding `records` memories (50 users) and a
    create event each, written with plain SQL as that version wrote them."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statements in MIGRATIONS[:OLD_VERSION]:
        for statement in statements:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {OLD_VERSION}")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision, created_at,"
        " updated_at, key_fold, value_fold) VALUES (?, 'preference', ?, ?, 's1', 1,"
        " '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', ?, ?)",
        ((f"u{n % 50}", f"k{n}", f"value {n}", f"k{n}", f"value {n}") for n in range(records)))
    conn.executemany(
        "INSERT INTO memory_events (user_id, kind, memory_key, action, revision, new_value, at)"
        " VALUES (?, 'preference', ?, 'create', 1, ?, '2026-01-01T00:00:00.000000Z')",
        ((f"u{n % 50}", f"k{n}", f"value {n}") for n in range(records)))
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


def migrate(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "memkit", "migrate", "--db", str(path), "--confirm"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_with())


def write_lock_held(path: Path) -> bool:
    """Whether another connection holds the file's write lock (a probe that takes it for an instant)."""
    probe = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return True
        raise
    finally:
        probe.close()


def state(path: Path) -> dict[str, object]:
    """What a killed migrate left: the version, integrity, whether the file is sound at that version,
    and the records and events it holds (read with plain SQLite: a memkit open would migrate it)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
        try:
            sound_at = check_schema(SqliteSchema(conn, path, check_integrity=True))
        except Exception as exc:  # the finding, not a crash of the test: asserted below
            sound_at = f"refused: {exc}"
        memories = conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        events = conn.execute("SELECT count(*) FROM memory_events").fetchone()[0]
        return {"version": version, "integrity": integrity, "sound_at": sound_at,
                "memories": memories, "events": events}
    finally:
        conn.close()


def test_migrate_killed_inside_a_step_leaves_a_whole_version_and_every_record(tmp_path, figures):
    records = scale(20_000, 200_000)
    kills = scale(6, 60)
    template = old_store(tmp_path / "template.sqlite3", records)
    rng = random.Random(33)

    # One migrate that runs to the end: how long it runs, and for how long after it was first seen
    # holding the write lock (the steps, and the open's own writes after them).
    timed = tmp_path / "timed.sqlite3"
    shutil.copy(template, timed)
    started = time.monotonic()
    finished = migrate(timed)
    assert wait_for(lambda: write_lock_held(timed) or finished.poll() is not None, 120)
    locked_at = time.monotonic()
    out, err = finished.communicate(timeout=300)
    whole_run, writing = time.monotonic() - started, time.monotonic() - locked_at
    assert finished.returncode == 0, err
    assert json.loads(out)["to_version"] == SCHEMA_VERSION

    lock_seen = inside = 0
    left_at: dict[int, int] = {}
    for n in range(kills):
        path = tmp_path / f"killed{n}.sqlite3"
        shutil.copy(template, path)
        process = migrate(path)
        # Two kills in three wait for the migrator to take the write lock (it has begun a step's
        # transaction), then a random part of the time it writes; the rest land at a random moment
        # from its start.
        if n % 3 != 2:
            seen = wait_for(lambda: write_lock_held(path) or process.poll() is not None, 120)  # noqa: B023
            seen = seen and process.poll() is None
            time.sleep(rng.uniform(0, writing / 2))
        else:
            seen = False
            time.sleep(rng.uniform(0, whole_run))
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        after = state(path)
        lock_seen += seen
        inside += seen and after["version"] < SCHEMA_VERSION
        left_at[after["version"]] = left_at.get(after["version"], 0) + 1  # type: ignore[index]
        assert after["integrity"] == ["ok"], (n, after)
        assert after["sound_at"] == after["version"], (n, after)  # a whole version, never half a step
        assert OLD_VERSION <= after["version"] <= SCHEMA_VERSION, (n, after)  # type: ignore[operator]
        assert (after["memories"], after["events"]) == (records, records), (n, after)  # nothing lost

        again = migrate(path)
        out, err = again.communicate(timeout=300)
        assert again.returncode == 0 and not err.strip(), (n, err)
        assert json.loads(out)["to_version"] == SCHEMA_VERSION
        with MemoryStore(path) as store:
            health = store.health()
            assert (health["schema_version"], health["records_total"]) == (SCHEMA_VERSION, records)
            assert health["counters_consistent"] is True
            key = rng.randrange(records)
            assert store.get(f"u{key % 50}", "preference", f"k{key}")["value"] == f"value {key}"
            assert len(store.history(f"u{key % 50}", "preference", f"k{key}")) == 1

    figures("migrate killed mid-step",
            **{"records in the version-3 store": records, "kills": kills,
               "a whole migrate (s)": round(whole_run, 2), "of it writing (s)": round(writing, 2),
               "kills after the migrator took the write lock": lock_seen,
               "of them with an older version still on disk (inside a step)": inside,
               "versions the kills left (version: files)": dict(sorted(left_at.items())),
               "files half-migrated, damaged or missing a record": 0})
    assert inside >= 1, f"no kill landed inside a step: {left_at}"
