"""The reliability lab: another process holds the write lock.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _reliability import integrity
from _store_helpers import snapshot
import lab
from lab import read_answer, start_worker
from memkit.errors import StoreError
from memkit.limits import Limits
from memkit.store import MemoryStore


def test_a_held_exclusive_lock_refuses_writers_clearly_while_readers_go_on(tmp_path, figures):
    path = tmp_path / "locked.sqlite3"
    timeout = Limits().replace(busy_timeout_ms=300)
    store = MemoryStore(path, limits=timeout)
    store.put("alice", "s1", "preference", "drink", "tea")
    store.put("alice", "s1", "episode", "trip", "Kyoto in May")
    store.archive_turns("alice", "s1", [{"turn": 1, "role": "user", "content": "hi", "at": "t"}])
    bundle = store.export_user("alice")
    cli_writer = None
    # Another process holds the write lock (the store's own BEGIN IMMEDIATE, in WAL mode the same lock
    # as BEGIN EXCLUSIVE) with a new row and alice's values overwritten, uncommitted; leaving the block
    # kills it with SIGKILL.
    try:
        with lab.holding_write_lock(path, seconds=120, overwrite_user="alice"):
            # A CLI write with the default busy timeout (5 s) waits meanwhile, in its own process.
            cli_writer = subprocess.Popen(
                [sys.executable, "-m", "memkit", "put", "--db", str(path), "--user", "alice", "--key", "drink",
                 "--value", "coffee", "--confirm"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                cwd=Path(__file__).resolve().parents[2])
            before = snapshot(store)
            writes = {
                "put (update)": lambda: store.put("alice", "s2", "preference", "drink", "coffee"),
                "put (create)": lambda: store.put("bob", "s2", "preference", "drink", "water"),
                "delete": lambda: store.delete("alice", "preference", "drink"),
                "forget_user": lambda: store.forget_user("alice"),
                "import_records": lambda: store.import_records(bundle, user="carol"),
                "archive_turns": lambda: store.archive_turns("alice", "s1", [{"turn": 2, "role": "user",
                                                                             "content": "x", "at": "t"}]),
            }
            refused, tried = 0, 0
            for attempt in writes.values():
                tried += 1
                with pytest.raises(StoreError, match=r"locked by another writer.*\(300 ms\); nothing was written"):
                    attempt()
                refused += 1
            others = [start_worker("write", {"path": str(path), "op": op, "limits": {"busy_timeout_ms": 300}})
                      for op in ("put", "delete", "forget")]
            for other in others:
                answer = read_answer(other)
                other.communicate(timeout=60)
                tried += 1
                assert answer["outcome"] == "StoreError" and "locked by another writer" in answer["error"], answer
                refused += 1
            # WAL: readers neither wait nor see the holder's uncommitted rows.
            reads = [
                store.get("alice", "preference", "drink")["value"] == "tea",
                [r["key"] for r in store.search("alice", "tea")] == ["drink"],
                store.records("holder") == [],
                [e["new_value"] for e in store.history("alice", "preference", "drink")] == ["tea"],
                store.export_user("alice") == bundle,
                store.users() == {"alice": 2},
                store.health()["counters_consistent"],
                len(store.archived_turns("alice", "s1")) == 1,
            ]
            with MemoryStore(path, limits=timeout) as second:  # opening needs no write lock either
                reads.append(second.get("alice", "episode", "trip")["value"] == "Kyoto in May")
            reader = subprocess.run([sys.executable, "-m", "memkit", "get", "--db", str(path), "--user", "alice",
                                     "--key", "drink"], capture_output=True, text=True, timeout=60,
                                    cwd=Path(__file__).resolve().parents[2])
            reads.append(reader.returncode == 0 and json.loads(reader.stdout)["value"] == "tea")
            assert all(reads), reads
            _out, err = cli_writer.communicate(timeout=60)
            tried += 1
            assert cli_writer.returncode == 2 and err.startswith("error: ") and "locked by another writer" in err, err
            refused += 1
            assert snapshot(store) == before
    finally:
        if cli_writer is not None and cli_writer.poll() is None:
            cli_writer.kill()
            cli_writer.communicate()
    # The holder died without committing: none of its writes appear, and writing works again.
    half_written = len(store.records("holder")) + (store.get("alice", "preference", "drink")["value"] != "tea")
    assert store.put("alice", "s3", "preference", "drink", "coffee")["revision"] == 2
    assert integrity(store) == "ok" and store.health()["counters_consistent"]
    store.close()
    figures("Locked: an exclusive transaction held", **{
        "writes tried": tried, "refused with the locked error": refused, "reads served": len(reads),
        "half-written": half_written})
    assert half_written == 0 and refused == tried
