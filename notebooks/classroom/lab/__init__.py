"""The lab: experiments with real processes that the notebooks run (sessions in fresh processes,
agent instances sharing a Redis session, writers racing at a quota, replicas behind a round-robin).

Every experiment that involves "another process" starts a real one through the one worker
protocol of `classroom.lab.workers` (`python -m classroom.lab MODE`, a JSON payload on stdin); a
function written in a notebook cell runs through the same protocol (`classroom.processes`).
Public functions return plain dicts and lists, easy to put in a pandas DataFrame or to assert on.

The test suite's own experiments (racing and killed writers, held locks, Redis faults, sidecar
files, approvals under SIGKILL, the conversation crash experiment) live beside the tests, in
`tests/lab/`, and run their workers through the same protocol.

Error messages handed back for display have the workspace folder removed (only file names remain),
so notebook outputs carry no machine paths.
"""

from __future__ import annotations

from .display import scrub
from .instances import spawn_instance
from .refusals import attempt_puts, sha256_file, try_open
from .replicas import HOP_SCRIPT, Instance, isolation_scan, reply_figures
from .scaling import quota_race, writer_curve, writer_throughput
from .sessions import GoldfishAgent, run_session
from .workers import ROOMY_LIMITS, limits_from, read_answer, run_worker, start_worker

__all__ = [
    "HOP_SCRIPT",
    "ROOMY_LIMITS",
    "GoldfishAgent",
    "Instance",
    "attempt_puts",
    "isolation_scan",
    "limits_from",
    "quota_race",
    "read_answer",
    "reply_figures",
    "run_session",
    "run_worker",
    "scrub",
    "sha256_file",
    "spawn_instance",
    "start_worker",
    "try_open",
    "writer_curve",
    "writer_throughput",
]
