"""The test suite's side of the lab's one worker protocol (`classroom.lab.workers`).

The experiments here are the tests' own, so their workers are registered in this package and run
as `python -m lab MODE` (this folder first on the worker's path, then the memkit under test). That
entry registers the kit's workers as well, so `start_worker` here starts any mode, the kit's or
the tests'. The rest is the kit's protocol, re-exported so an experiment imports one module, and
two helpers only the tests need: `run_together` (racers started at one moment) and `wait_for`.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable, Sequence

from classroom.lab.workers import (ROOMY_LIMITS, WORKER_TIMEOUT_S, WORKERS, Entry, PathLike, answer, expect, finish,
                                limits_from, read_answer, send, skip_iri_grammar, stderr_tail, stop, wait_for_go,
                                worker)
from classroom.lab.workers import run_worker as _run_worker
from classroom.lab.workers import start_worker as _start_worker

TESTS = Entry("lab", str(Path(__file__).resolve().parents[1]))
"""`python -m lab MODE`, with the tests folder on the worker's path."""

__all__ = ["ROOMY_LIMITS", "TESTS", "WORKERS", "WORKER_TIMEOUT_S", "PathLike", "answer", "expect", "finish",
           "limits_from", "read_answer", "run_together", "run_worker", "send", "skip_iri_grammar", "start_worker",
           "stderr_tail", "stop", "wait_for", "wait_for_go", "worker"]


def start_worker(mode: str, payload: dict[str, Any], *, capture_stderr: bool = True) -> subprocess.Popen[str]:
    """`classroom.lab.workers.start_worker` from the tests' entry: the kit's modes and the tests' own."""
    return _start_worker(mode, payload, capture_stderr=capture_stderr, entry=TESTS)


def run_worker(mode: str, payload: dict[str, Any]) -> Any:
    """Run a worker (the kit's or the tests') to completion and return its last JSON answer."""
    return _run_worker(mode, payload, entry=TESTS)


def run_together(processes: Sequence[subprocess.Popen[str]], what: str) -> list[Any]:
    """Start workers that each wait for "go" at once, then return each one's last JSON line, in order.

    Each must say "ready" first; the "go" lines follow one another as closely as the pipes allow, so
    the workers race for real. Whatever happens, no worker is left running.

    Raises:
        RuntimeError: a worker failed, or did not end within `WORKER_TIMEOUT_S`.
    """
    try:
        for process in processes:
            expect(process, "ready")
        for process in processes:
            send(process, "go")
        return [finish(process, what) for process in processes]
    finally:
        for process in processes:
            stop(process)


def wait_for(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Poll `condition` every 10 ms until it holds (True) or `timeout` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True
