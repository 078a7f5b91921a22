"""A wrong command line, through the real `memkit` entry point: exit 2, the command's usage, and one
line that names the mistake and what to do (a "did you mean" where one is close); nothing created.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from _cli_helpers import env_with

MEMKIT = Path(sys.executable).with_name("memkit")  # the console script pip made, as a person runs it
REMEDIES = ("did you mean", "--help", "goes after the command", "choose one of them", ", as in ")


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(MEMKIT), *argv], capture_output=True, text=True, cwd=cwd, env=env_with(), timeout=60)


WRONG_USAGES = [
    # a mistyped or unknown command
    (["gett", "--user", "a"], "unknown command 'gett'; did you mean 'get'?"),
    (["serch", "--user", "a"], "did you mean 'search'?"),
    (["forget", "--user", "a", "--confirm"], "did you mean 'forget-user'?"),
    (["proposal", "--user", "a"], "did you mean 'proposals'?"),
    (["zzz"], "unknown command 'zzz'; the commands are demo, put, get"),
    (["--versoin"], "unknown option --versoin; did you mean '--version'?"),
    (["--db", "x.sqlite3", "get", "--user", "a", "--key", "k"], "--db goes after the command"),
    # a required option left out: named as required, as the usage shows it
    (["get", "--user", "a"], "--key is required"),
    (["get", "--key", "k"], "--user is required"),
    (["get"], "--user, --key are required"),
    (["put", "--user", "a", "--key", "k", "--confirm"], "--value is required"),
    (["delete", "--user", "a", "--confirm"], "--key is required"),
    (["history", "--user", "a"], "--key is required"),
    (["import", "--confirm"], "--file is required"),
    (["approve", "--user", "a", "--confirm"], "ID is required"),
    (["mcp"], "--user is required"),
    # a mistyped option
    (["get", "--usr", "a", "--key", "k"], "unknown option --usr; did you mean '--user'?"),
    (["put", "--user", "a", "--key", "k", "--value", "v", "--confrim"], "did you mean '--confirm'?"),
    (["get", "--user", "a", "--key", "k", "--sesion", "s"], "did you mean '--session'?"),
    (["search", "--user", "a", "--querry", "tea"], "did you mean '--query'?"),
    (["search", "--user", "a", "--by-meening", "--query", "x"], "did you mean '--by-meaning'?"),
    (["limits", "--sett", "max_records_total=5"], "did you mean '--set'?"),
    (["windows", "--dorp", "redis://h:6379/0"], "did you mean '--drop'?"),
    (["export", "--user", "a", "--outt", "a.jsonl"], "did you mean '--out'?"),
    (["reindex", "--modle", "m", "--confirm"], "did you mean '--model'?"),
    (["get", "--user", "a", "--key", "k", "-x"], "unknown option -x"),
    # an abbreviation: refused with the whole name (argparse would take it, and change its meaning the
    # day another option starting with those letters is added)
    (["get", "--us", "a", "--key", "k"], "unknown option --us; did you mean '--user'?"),
    (["put", "--user", "a", "--key", "k", "--val", "v", "--confirm"], "unknown option --val; did you mean '--value'?"),
    (["put", "--user", "a", "--key", "k", "--value", "v", "--conf"], "did you mean '--confirm'?"),
    # an option of another command
    (["get", "--user", "a", "--key", "k", "--value", "v"], "memkit get has no option --value (put takes it)"),
    (["get", "--user", "a", "--key", "k", "--confirm"], "memkit get has no option --confirm ("),
    # a value argparse cannot take
    (["get", "--user", "a", "--kind", "pref", "--key", "k"], "--kind 'pref' is not one of preference, episode; "
                                                              "did you mean 'preference'?"),
    (["get", "--user", "a", "--kind", "episodes", "--key", "k"], "did you mean 'episode'?"),
    (["search", "--user", "a", "--kind", "fact"], "--kind 'fact' is not one of preference, episode"),
    (["chat", "--user", "a", "--window", "redis"], "--window 'redis' is not one of kept, process"),
    (["search", "--user", "a", "--limit", "five"], "--limit 'five' is not a whole number"),
    (["chat", "--user", "a", "--budget", "lots"], "--budget 'lots' is not a whole number"),
    (["search", "--user", "a", "--by-meaning", "--query", "x", "--min-similarity", "high"],
     "--min-similarity 'high' is not a number"),
    (["get", "--user", "a", "--key"], "--key needs a value after it"),
    (["chat", "--user", "a", "--confirm-preference", "drink"], "--confirm-preference needs 2 values after it"),
    # words no argument takes
    (["get", "--user", "a", "--key", "k", "extra"], "unexpected argument extra"),
    (["approve", "1", "2", "--user", "a", "--confirm"], "unexpected argument 2"),
]


@pytest.mark.parametrize(("argv", "expected"), WRONG_USAGES, ids=[" ".join(argv) for argv, _ in WRONG_USAGES])
def test_a_wrong_usage_says_what_to_do(tmp_path, argv, expected):
    done = run(*argv, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout)
    assert done.stderr.startswith("usage: memkit") and "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and done.stderr.endswith(errors[0] + "\n"), done.stderr  # one line, after the usage
    assert expected in errors[0], errors[0]
    assert any(remedy in errors[0] for remedy in REMEDIES), errors[0]
    assert "invalid choice" not in errors[0] and "unrecognized arguments" not in errors[0], errors[0]
    assert list(tmp_path.iterdir()) == []  # refused before anything was opened or created


def test_the_table_is_long_enough_and_each_case_distinct():
    assert len(WRONG_USAGES) >= 30 and len({tuple(argv) for argv, _ in WRONG_USAGES}) == len(WRONG_USAGES)


def test_the_error_names_the_command_whose_usage_it_shows(tmp_path):
    done = run("get", "--user", "a", "--key", "k", "extra", cwd=tmp_path)
    assert done.stderr.startswith("usage: memkit get ") and "memkit get: error: " in done.stderr


def test_version_names_the_distribution_and_its_version(tmp_path):
    done = run("--version", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"memkit {metadata.version('memkit-course')} (memkit-course)\n"


@pytest.mark.parametrize("command", ["get", "put", "delete", "history"])
def test_the_usage_shows_key_as_required(tmp_path, command):
    usage = " ".join(run(command, "--help", cwd=tmp_path).stdout.split("\n\n", 1)[0].split())  # unwrapped
    assert " --key KEY" in usage and "[--key KEY]" not in usage, usage


def test_a_right_command_line_still_runs(tmp_path):
    db = str(tmp_path / "m.sqlite3")
    done = run("put", "--db", db, "--user", "a", "--key", "drink", "--value", "tea", "--confirm", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    negative = run("search", "--db", db, "--user", "a", "--query", "x", "--by-meaning", "--min-similarity", "-0.5",
                   cwd=tmp_path)  # a negative number is a value, not a mistyped option
    assert "unknown option" not in negative.stderr and "Traceback" not in negative.stderr, negative.stderr
