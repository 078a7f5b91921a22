"""The test suite's side of the lab's one worker protocol (`memkit.lab.workers`).

The experiments here are the tests' own, so their workers are registered in this package and run
as `python -m lab MODE` (this folder first on the worker's path, then the memkit under test). That
entry registers the kit's workers as well, so `start_worker` here starts any mode, the kit's or
the tests'. Everything else is the kit's protocol, re-exported so an experiment imports one module.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from memkit.lab.workers import (ROOMY_LIMITS, WORKER_TIMEOUT_S, WORKERS, Entry, PathLike, answer, expect, finish,
                                limits_from, read_answer, run_together, send, skip_iri_grammar, stderr_tail, stop,
                                wait_for, wait_for_go, worker)
from memkit.lab.workers import run_worker as _run_worker
from memkit.lab.workers import start_worker as _start_worker

TESTS = Entry("lab", str(Path(__file__).resolve().parents[1]))
"""`python -m lab MODE`, with the tests folder on the worker's path."""

__all__ = ["ROOMY_LIMITS", "TESTS", "WORKERS", "WORKER_TIMEOUT_S", "PathLike", "answer", "expect", "finish",
           "limits_from", "read_answer", "run_together", "run_worker", "send", "skip_iri_grammar", "start_worker",
           "stderr_tail", "stop", "wait_for", "wait_for_go", "worker"]


def start_worker(mode: str, payload: dict[str, Any], *, capture_stderr: bool = True) -> subprocess.Popen[str]:
    """`memkit.lab.workers.start_worker` from the tests' entry: the kit's modes and the tests' own."""
    return _start_worker(mode, payload, capture_stderr=capture_stderr, entry=TESTS)


def run_worker(mode: str, payload: dict[str, Any]) -> Any:
    """Run a worker (the kit's or the tests') to completion and return its last JSON answer."""
    return _run_worker(mode, payload, entry=TESTS)
