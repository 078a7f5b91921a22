"""`classroom.processes`: a function written in a notebook cell runs in real new processes,
started through the lab's one worker protocol (`python -m classroom.lab function`)."""

from __future__ import annotations

import os

import pytest

from classroom import processes


def greet(name, times):
    import os

    for _ in range(times):
        print("hello", name, os.getpid(), flush=True)


def fail(reason):
    raise ValueError(reason)


def wait_to_be_killed():
    import time

    print("waiting", flush=True)
    time.sleep(60)


def test_run_together_runs_each_argument_list_in_its_own_process():
    finished = processes.run_together(greet, [["alice", 2], ["bob", 1]])
    assert [line.split()[:2] for line in finished[0].lines] == [["hello", "alice"]] * 2
    assert [line.split()[:2] for line in finished[1].lines] == [["hello", "bob"]]
    pids = {int(f.lines[0].split()[2]) for f in finished}
    assert len(pids) == 2 and os.getpid() not in pids
    assert all(f.returncode == 0 and f.error == "" for f in finished)


def test_a_failing_function_names_its_error():
    with pytest.raises(RuntimeError, match="process 1 of fail failed: ValueError: no such ticket"):
        processes.run_together(fail, [["no such ticket"]])
    done = processes.Process(fail, "bad input").finish()
    assert done.returncode != 0 and done.error == "ValueError: bad input"


def test_a_killed_process_dies_with_sigkill():
    process = processes.Process(wait_to_be_killed)
    process.expect("waiting")
    process.kill()
    done = process.finish()
    assert done.returncode == -9 and done.lines == ["waiting"]


def test_a_function_without_source_is_refused():
    with pytest.raises(ValueError, match="cannot be read; define it with `def`"):
        processes.Process(print)
