"""The reliability lab: the store's files on a shared machine.

Another Unix user on the same machine (a classroom JupyterHub) must not read a user's memory: every
file the store creates (the database, its `-wal` and `-shm`, an exported bundle) is 0600 whatever
the umask, and an export never writes through a symbolic link planted where it writes (at its
temporary name or at the target), which would let another user overwrite any file of this one.
See `tests/_reliability.py` for the sizes and conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from _reliability import scale
from memkit.errors import StoreError
from memkit.store import MemoryStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _memkit(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memkit", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_an_export_never_writes_through_a_planted_link(tmp_path, figures, umask_022):
    victim = tmp_path / "bashrc"
    victim.write_text("the victim's own file\n")
    trials = scale(5, 50)
    refused = followed = leftovers = 0
    modes = set()
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        for n in range(trials):
            out = tmp_path / f"alice-{n}.jsonl"
            # At the temporary name an earlier memkit wrote through (path.partial), and at the target.
            Path(f"{out}.partial").symlink_to(victim)
            bundle = store.export_user("alice", out)
            modes.add(mode(out))
            followed += victim.read_text() != "the victim's own file\n" or out.read_text() != bundle
            linked = tmp_path / f"linked-{n}.jsonl"
            linked.symlink_to(victim)
            with pytest.raises(StoreError, match="symbolic link") as error:
                store.export_user("alice", linked)
            refused += "nothing was written" in str(error.value)
            followed += victim.read_text() != "the victim's own file\n" or not linked.is_symlink()
        leftovers = len([p for p in tmp_path.iterdir() if p.name.endswith(".partial") and not p.is_symlink()])
    # The command line writes through the same function: a link at --out is refused even with --force.
    out = tmp_path / "cli.jsonl"
    out.symlink_to(victim)
    done = _memkit("export", "--db", "memory.sqlite3", "--user", "alice", "--out", "cli.jsonl", "--force",
                   cwd=tmp_path)
    cli_refused = done.returncode == 2 and "symbolic link" in done.stderr and out.is_symlink()
    followed += victim.read_text() != "the victim's own file\n"
    figures("Export and planted links",
            **{"exports with a link at path.partial": trials, "links at the target refused": refused,
               "CLI --force onto a link refused": int(cli_refused), "writes through a link": followed,
               "temporary files left": leftovers, "bundle modes": " ".join(sorted(f"{m:o}" for m in modes))})
    assert (refused, followed, leftovers, cli_refused) == (trials, 0, 0, True)
    assert modes == {0o600}


def test_an_exported_bundle_replacing_a_readable_file_is_private(tmp_path, umask_022):
    out = tmp_path / "alice.jsonl"
    out.write_text("old\n")
    out.chmod(0o644)
    with MemoryStore(tmp_path / "memory.sqlite3") as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        store.export_user("alice", out)
    assert mode(out) == 0o600 and json.loads(out.read_text().splitlines()[0])["records"] == 1


def test_every_file_the_store_creates_is_private_whatever_the_umask(tmp_path, figures, umask_022):
    stores = scale(3, 20)
    seen: dict[str, set[int]] = {"database": set(), "-wal": set(), "-shm": set()}
    for n in range(stores):
        path = tmp_path / f"memory-{n}.sqlite3"
        with MemoryStore(path) as store:
            store.put("alice", "s1", "preference", "drink", "tea")
            store.archive_turns("alice", "s1", [{"turn": 1, "role": "user", "content": "hi", "at": "t"}])
            for name, file in (("database", path), ("-wal", Path(f"{path}-wal")), ("-shm", Path(f"{path}-shm"))):
                seen[name].add(mode(file))
    # The command line creates its database through the same store (a --db file in an existing folder).
    done = _memkit("put", "--db", "cli.sqlite3", "--user", "alice", "--key", "drink", "--value", "tea",
                   "--confirm", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cli_mode = mode(tmp_path / "cli.sqlite3")
    # A database its owner made readable to their group keeps the mode they chose (never changed).
    chosen = tmp_path / "shared.sqlite3"
    MemoryStore(chosen).close()
    chosen.chmod(0o640)
    with MemoryStore(chosen) as store:
        store.put("alice", "s1", "preference", "drink", "tea")
        kept = mode(chosen)
    readable = [name for name, modes in seen.items() if modes != {0o600}] + ([] if cli_mode == 0o600 else ["cli"])
    figures("Private store files (umask 022)",
            **{"stores created": stores + 1, **{f"{name} modes": " ".join(f"{m:o}" for m in sorted(modes))
                                                 for name, modes in seen.items()},
               "CLI database mode": f"{cli_mode:o}", "readable by others": len(readable),
               "an existing 0640 file kept": f"{kept:o}"})
    assert readable == [] and kept == 0o640
