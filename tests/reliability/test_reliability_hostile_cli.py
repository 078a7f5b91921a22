"""The reliability lab: hostile input to every CLI command round-trips or exits 2.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from _reliability import examples, ids, keys, texts
from _store_helpers import folder_state, snapshot
from memkit import cli
from memkit.limits import KINDS
from memkit.store import MemoryStore


CLI_COMMANDS = {
    "put": ["--user", "--session", "--kind", "--key", "--value"],
    "get": ["--user", "--kind", "--key"],
    "search": ["--user", "--query", "--limit", "--kind"],
    "delete": ["--user", "--kind", "--key"],
    "history": ["--user", "--kind", "--key"],
    "export": ["--user"],
    "forget-user": ["--user"],
    "health": [],
    "chat": ["--user", "--message", "--confirm-preference", "--confirm-episode", "--budget"],
    "import": ["--file", "--as-user"],
}
argv_text = st.one_of(ids, keys, st.sampled_from(list(KINDS)), texts.filter(lambda t: "\x00" not in t),
                      st.integers(-3, 60).map(str))


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """The real entry point, in this process: exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exc:  # argparse refuses a malformed command line this way (code 2)
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def test_hostile_input_to_every_cli_command_round_trips_or_exits_2(tmp_path, figures):
    db = tmp_path / "cli.sqlite3"
    assert run_cli(["put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm"])[0] == 0
    bundle_file = tmp_path / "alice.jsonl"
    assert run_cli(["export", "--db", str(db), "--user", "alice", "--out", str(bundle_file)])[0] == 0
    watcher = MemoryStore(db)
    tally = {"commands": 0, "succeeded": 0, "exit 2 with error:": 0, "other outcomes": 0, "changed by a refusal": 0}

    @examples(60, 600)
    @given(command=st.sampled_from(list(CLI_COMMANDS)), data=st.data(), confirm=st.booleans())
    def one_command(command, data, confirm):
        argv = [command, "--db", str(db)]
        for flag in CLI_COMMANDS[command]:
            if data.draw(st.integers(0, 5)) == 0:
                continue  # a missing flag is hostile input too
            count = 2 if flag.startswith("--confirm-") else 1
            argv += [flag, *(data.draw(argv_text) for _ in range(count))]
        if command == "chat" and "--message" not in argv:
            argv += ["--message", "hello"]  # without one, chat would read standard input
        if command == "import" and "--file" not in argv:
            argv += ["--file", str(bundle_file)]
        if confirm:
            argv.append("--confirm")
        before = snapshot(watcher)
        tally["commands"] += 1
        code, out, err = run_cli(argv)
        if code == 0:
            tally["succeeded"] += 1
            if command != "export":
                json.loads(out)  # every command prints JSON
            if command == "put":
                value = argv[argv.index("--value") + 1]
                user, key = argv[argv.index("--user") + 1], argv[argv.index("--key") + 1]
                kind = argv[argv.index("--kind") + 1] if "--kind" in argv else "preference"
                assert watcher.get(user, kind, key)["value"] == value
            if command in ("put", "import", "chat"):
                for user in list(watcher.users()):
                    if user != "alice":
                        watcher.forget_user(user)
            return
        if code == 2 and "error:" in err and "Traceback" not in err:
            tally["exit 2 with error:"] += 1
            tally["changed by a refusal"] += snapshot(watcher) != before
            assert snapshot(watcher) == before, argv
            return
        tally["other outcomes"] += 1
        raise AssertionError(f"{argv!r:.300} -> exit {code}: {err[-300:]}")

    try:
        one_command()
    finally:
        watcher.close()
    figures("Hostile input: CLI commands", **tally)
    assert tally["other outcomes"] == tally["changed by a refusal"] == 0


def forged_bundle(tmp_path: Path, field: str, value: str) -> Path:
    """A bundle whose record `field` is the JSON text `value`, with a checksum that matches (it is no MAC)."""
    import hashlib

    with MemoryStore(tmp_path / "source.sqlite3") as source:
        source.put("alice", "s1", "preference", "drink", "tea")
        lines = [json.loads(line) for line in source.export_user("alice").splitlines()[:-1]]
    lines = [dict(item, **{field: "@@"}) if item.get("type") == "record" else item for item in lines]
    body = "".join(json.dumps(item, sort_keys=True) + "\n" for item in lines).replace('"@@"', value)
    path = tmp_path / f"forged-{field}-{len(value)}.jsonl"
    path.write_text(body + json.dumps({"type": "checksum", "sha256": hashlib.sha256(body.encode()).hexdigest()}) + "\n")
    return path


def test_the_real_cli_process_refuses_undecodable_and_crafted_input_with_exit_2(tmp_path):
    """What only a real process can receive: argv bytes that are not UTF-8, files it cannot write."""
    db = tmp_path / "memory.sqlite3"
    assert run_cli(["put", "--db", str(db), "--user", "alice", "--key", "drink", "--value", "tea", "--confirm"])[0] == 0
    cases = [
        [b"put", b"--db", bytes(db), b"--user", b"alice", b"--key", b"drink", b"--value", b"\xff\xfe tea",
         b"--confirm"],
        [b"put", b"--db", bytes(db), b"--user", b"al\xffice", b"--key", b"drink", b"--value", b"tea", b"--confirm"],
        [b"search", b"--db", bytes(db), b"--user", b"alice", b"--query", b"\xed\xa0\x80"],
        [b"export", b"--db", bytes(db), b"--user", b"alice", b"--out", bytes(tmp_path / "missing" / "out.jsonl")],
        [b"export", b"--db", bytes(db), b"--user", b"alice", b"--out", bytes(tmp_path)],
        [b"import", b"--db", bytes(db), b"--file", bytes(forged_bundle(tmp_path, "revision", str(2**64))),
         b"--as-user", b"bob", b"--confirm"],
        [b"import", b"--db", bytes(db), b"--file", bytes(forged_bundle(tmp_path, "revision", "9" * 5000)),
         b"--as-user", b"bob", b"--confirm"],
        [b"chat", b"--db", bytes(db), b"--user", b"alice", b"--message", b"\xc3\x28 remember my drink is \xff"],
    ]
    before = folder_state(tmp_path)
    for argv in cases:
        done = subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, timeout=120,
                              cwd=Path(__file__).resolve().parents[2])
        stderr = done.stderr.decode("utf-8", "replace")
        assert done.returncode == 2 and stderr.startswith("error: ") and "Traceback" not in stderr, (argv, stderr)
    after = folder_state(tmp_path)
    assert {k: v for k, v in after.items() if k != "memory.sqlite3"} == {
        k: v for k, v in before.items() if k != "memory.sqlite3"}
    with MemoryStore(db) as store:
        assert store.users() == {"alice": 1} and store.get("alice", "preference", "drink")["revision"] == 1
