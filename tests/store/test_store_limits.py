"""A store's own limits travel with it: recorded at creation (both backends), used by every later
open that passes none, shown and changed by `memkit limits` (never below what is stored)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest

from memkit import Limits, MemoryStore
from memkit.errors import QuotaError, StoreError, ValidationError
from memkit.store import MIGRATIONS, open_store
from memkit.store.recorded_limits import LIMIT_NAMES, parse_settings

LARGE = Limits(max_records_total=3000, max_records_per_user=2000, max_value_chars=1000)


def memkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memkit", *args], capture_output=True, text=True)


def _fill(store: MemoryStore, records: int, users: int = 10) -> None:
    with store.transaction():
        for n in range(records):
            store.put(f"u{n % users}", "s0", "preference", f"k{n}", "v")


def test_a_store_made_with_larger_limits_is_written_to_by_the_cli(tmp_path):
    path = tmp_path / "big.sqlite3"
    with MemoryStore(path, limits=LARGE) as store:
        _fill(store, 1100)  # more than the default global quota (1024)
    with MemoryStore(path) as store:  # no limits given: the recorded ones
        assert store.limits == LARGE
    put = memkit("put", "--db", str(path), "--user", "newcomer", "--key", "drink", "--value", "tea", "--confirm")
    assert put.returncode == 0, put.stderr
    shown = json.loads(memkit("limits", "--db", str(path)).stdout)
    assert shown["recorded"] and shown["limits"]["max_records_total"] == 3000
    assert shown["holds"]["max_records_total"] == 1101 and shown["holds"]["max_records_per_user"] == 110
    assert set(shown["limits"]) == set(LIMIT_NAMES)


def test_limits_change_only_confirmed_and_never_below_what_is_stored(tmp_path):
    path = tmp_path / "big.sqlite3"
    with MemoryStore(path, limits=LARGE) as store:
        _fill(store, 1100)
    before = path.read_bytes()
    unconfirmed = memkit("limits", "--db", str(path), "--set", "max_records_total=5000")
    assert unconfirmed.returncode == 2 and "needs --confirm" in unconfirmed.stderr
    below = memkit("limits", "--db", str(path), "--set", "max_records_total=1000", "--confirm")
    assert below.returncode == 2 and "below what the store already holds (1100)" in below.stderr
    for bad, says in (("max_records=5", "no such limit"), ("max_records_total=lots", "whole number"),
                      ("max_records_total=0", "positive")):
        refused = memkit("limits", "--db", str(path), "--set", bad, "--confirm")
        assert refused.returncode == 2 and says in refused.stderr, bad
    assert path.read_bytes() == before
    done = memkit("limits", "--db", str(path), "--set", "max_records_total=1100", "--set",
                  "max_records_per_user=110", "--confirm")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] == {"max_records_total": 1100, "max_records_per_user": 110}
    full = memkit("put", "--db", str(path), "--user", "newcomer", "--key", "drink", "--value", "tea", "--confirm")
    assert full.returncode == 2 and "global quota is 1100" in full.stderr
    with MemoryStore(path) as store:
        assert store.limits.max_records_total == 1100
        with pytest.raises(QuotaError):
            store.put("newcomer", "s0", "preference", "drink", "tea")


def test_an_older_store_records_the_defaults_on_its_next_write_open_only(tmp_path):
    path = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for steps in MIGRATIONS[:5]:
        for statement in steps:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 5")
    conn.close()
    with MemoryStore(path, read_only=True) as store:  # read-only: nothing recorded, nothing migrated
        assert store.limits == Limits()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 5
    with MemoryStore(path) as store:
        assert store.limits == Limits()
    rows = dict(sqlite3.connect(path).execute("SELECT name, value FROM store_limits").fetchall())
    assert rows == {name: getattr(Limits(), name) for name in LIMIT_NAMES}


def test_limits_given_to_an_open_apply_to_it_and_leave_the_recorded_ones(tmp_path):
    path = tmp_path / "m.sqlite3"
    MemoryStore(path, limits=LARGE).close()
    with MemoryStore(path, limits=Limits()) as store:
        assert store.limits == Limits()
    with MemoryStore(path) as store:
        assert store.limits == LARGE


def test_parse_settings_names_what_is_wrong():
    assert parse_settings(["max_db_bytes=64_000_000"]) == {"max_db_bytes": 64_000_000}
    with pytest.raises(ValidationError, match="name=value"):
        parse_settings(["max_db_bytes"])


def test_postgresql_records_its_limits_too(pg_url):
    pytest.importorskip("psycopg")
    schema = "limits_travel"
    with open_store(pg_url, schema=schema, limits=LARGE) as store:
        _fill(store, 1100)
    with open_store(pg_url, schema=schema) as store:
        assert store.limits == LARGE
        store.put("newcomer", "s0", "preference", "drink", "tea")  # past the default global quota
    with open_store(pg_url, schema=schema, read_only=True) as store:
        assert store.limits == LARGE
        with pytest.raises(StoreError):
            store.put("newcomer", "s0", "preference", "food", "rice")


def _fresh_database(pg_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return pg_url.replace("/postgres?", f"/{name}?", 1)


def test_memkit_migrate_and_limits_on_postgresql(pg_url):
    psycopg = pytest.importorskip("psycopg")
    from memkit.store.postgres.schema import PG_SCHEMA_VERSION
    from memkit.store.postgres.steps import PG_MIGRATIONS

    url = _fresh_database(pg_url, "limits_cli")
    with psycopg.connect(url, autocommit=True) as conn:  # a store made by the first memkit
        for statement in PG_MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO memkit_meta VALUES (1, 1)")
    with pytest.raises(StoreError, match="older than this memkit's"):
        open_store(url, read_only=True)  # read-only never migrates
    refused = memkit("migrate", "--db", url)
    assert refused.returncode == 2 and f"from schema version 1 to {PG_SCHEMA_VERSION}" in refused.stderr
    done = memkit("migrate", "--db", url, "--confirm")
    assert done.returncode == 0, done.stderr
    assert (json.loads(done.stdout)["from_version"], json.loads(done.stdout)["to_version"]) == (1, PG_SCHEMA_VERSION)
    shown = json.loads(memkit("limits", "--db", url).stdout)
    assert shown["limits"]["max_records_total"] == Limits().max_records_total  # recorded at the migrating open
    changed = memkit("limits", "--db", url, "--set", "max_records_total=4000", "--confirm")
    assert changed.returncode == 0, changed.stderr
    with open_store(url) as store:
        assert store.limits.max_records_total == 4000


def version_one_file(path) -> None:
    """A store file as memkit's first schema version left it (WAL, step 1 only)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.close()


def test_limits_are_not_set_on_an_older_store_before_it_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite3"
    version_one_file(path)
    before = path.read_bytes()
    shown = memkit("limits", "--db", str(path))
    assert shown.returncode == 0 and json.loads(shown.stdout)["recorded"] is False
    refused = memkit("limits", "--db", str(path), "--set", "max_records_total=5000", "--confirm")
    assert refused.returncode == 2 and "schema version 1" in refused.stderr and "memkit migrate" in refused.stderr
    assert path.read_bytes() == before


def test_the_cli_checks_sizes_against_the_stores_own_limits(tmp_path):
    path = tmp_path / "long.sqlite3"
    MemoryStore(path, limits=LARGE).close()  # values up to 1000 characters
    long = memkit("put", "--db", str(path), "--user", "ann", "--key", "essay", "--value", "x" * 800, "--confirm")
    assert long.returncode == 0, long.stderr
    too_long = memkit("put", "--db", str(path), "--user", "ann", "--key", "essay2", "--value", "y" * 1200, "--confirm")
    assert too_long.returncode == 2 and "at most 1000" in too_long.stderr
    with MemoryStore(path) as store:
        assert (store.get("ann", "preference", "essay2") is None
                and len(store.get("ann", "preference", "essay")["value"]) == 800)
    missing = tmp_path / "new.sqlite3"  # a store still to be made gets the defaults, checked before it is made
    refused = memkit("put", "--db", str(missing), "--user", "ann", "--key", "essay", "--value", "x" * 800, "--confirm")
    assert refused.returncode == 2 and "at most 512" in refused.stderr and not missing.exists()


def test_a_limit_is_never_set_below_an_id_or_value_kept_outside_the_records(tmp_path):
    """The history, proposals and agent session items hold ids and values too: a limit below them
    would leave a user that cannot be forgotten, or an export that cannot be imported again."""
    from memkit.integrations.openai_agents import MemkitSession
    import asyncio

    path = tmp_path / "kept.sqlite3"
    long_user, long_value = "u" * 40, "v" * 100
    with MemoryStore(path) as store:
        store.put("ann", "s1", "preference", "note", long_value)   # kept in the history after the update
        store.put("ann", "s1", "preference", "note", "short")
        store.propose_put("ann", "s2", "preference", "motto", "w" * 90)
        session = MemkitSession("trip", store, user=long_user)
        asyncio.run(session.add_items([{"role": "user", "content": "hello"}]))
    for setting, held in (("max_id_chars=20", 40), ("max_value_chars=95", 100), ("max_value_chars=50", 100)):
        refused = memkit("limits", "--db", str(path), "--set", setting, "--confirm")
        assert refused.returncode == 2 and f"({held})" in refused.stderr, (setting, refused.stderr)
    with MemoryStore(path) as store:
        assert store.forget_user(long_user)["transcript"] == 1


@pytest.mark.parametrize("text", ["postgresql://bob:s3c/ret@127.0.0.1/db", "postgresql://bob@db/m?sslpassword=s3c/ret",
                                  "host=db sslpassword=s3c/ret dbname=m"])
def test_every_secret_of_a_connection_string_is_masked(text):
    from memkit.store.targets import masked

    assert "s3c" not in masked(text) and "***" in masked(text)


def test_commands_that_only_read_never_migrate_an_older_store(tmp_path):
    """`get`, `search`, `history`, `export` and `proposals` read: an older file stays as it is (an
    older memkit keeps opening it); only a command that writes, or `memkit migrate`, moves it on."""
    path = tmp_path / "old.sqlite3"
    version_one_file(path)
    before = path.read_bytes()
    for argv in (("get", "--key", "drink"), ("search", "--query", "tea"), ("history", "--key", "drink"),
                 ("export",), ("proposals",)):
        done = memkit(*argv[:1], "--db", str(path), "--user", "ann", *argv[1:])
        # The file holds nothing of ann: export opens it (read-only) and says so instead of an empty bundle.
        refused_as_empty = argv == ("export",) and "nothing stored for user 'ann'" in done.stderr
        assert done.returncode == 0 or (done.returncode == 2 and refused_as_empty), (argv, done.stderr)
        assert path.read_bytes() == before, argv
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == 1


@pytest.mark.parametrize("url", ["postgresql://bob@127.0.0.1:9/db?sslpassword=s3c/ret&connect_timeout=2",
                                 "postgresql://bob:s3c/ret@127.0.0.1:9/db?connect_timeout=2"])
def test_a_refused_connection_never_prints_a_secret_of_the_url(url):
    """The connection error goes through the same masking as every other message."""
    pytest.importorskip("psycopg")
    done = memkit("get", "--db", url, "--user", "a", "--key", "b")
    assert done.returncode == 2 and "s3c" not in done.stderr + done.stdout and "***" in done.stderr
