"""How `make test` shares the suite between two workers (pytest-xdist, `-n 2 --dist loadgroup`): the
unit of work each test belongs to. tests/conftest.py's scheduler hook uses it, and
tests/test_workers.py checks it; it lives here, not in conftest.py, so that importing it names one
module (a conftest.py of a subfolder, tests/cli/conftest.py, would make `conftest` ambiguous)."""

from __future__ import annotations

import fnmatch
import functools
from pathlib import Path

__all__ = ["POSTGRES_FIXTURES", "SERIAL_FILES", "SPLIT_FILES", "work_unit"]

SERIAL_FILES = ("test_reliability_*.py", "test_scaling.py", "test_postgres_processes.py", "test_watchdog.py",
                "test_window_faults.py", "test_window.py", "test_inspect_page.py")
"""Test files that kill, race or time real processes (SIGKILL at random points, TTLs, idle timeouts,
lock waits): on two workers they run one after another on one worker, in the "serial" unit, so at
most one other test runs beside them, as on a 2-core machine that runs nothing else."""

SPLIT_FILES = ("test_exercises.py", "test_course.py")
"""Files of long, self-contained tests (each starts its own kernel, no module fixture): each test is
a unit of its own, so the two workers share them."""

POSTGRES_FIXTURES = ("pg_url", "pg_trgm_url")


@functools.cache
def _postgres_files() -> frozenset[str]:
    """Test files that use the session's PostgreSQL servers by name (pg_url, pg_trgm_url)."""
    return frozenset(path.name for path in Path(__file__).parent.rglob("test_*.py")
                     if any(name in path.read_text(encoding="utf-8") for name in POSTGRES_FIXTURES))


def work_unit(nodeid: str) -> str:
    """The unit of work a test belongs to on two workers: a unit runs in order on one worker.

    "serial": the files of SERIAL_FILES, and every test of a session PostgreSQL server (the files
    that name one, and the conformance suite's `pg` and `pg-trgm` runs), so each server starts once
    per run (a session fixture starts once per worker that needs it). A test of SPLIT_FILES: itself.
    Else its file: a module's fixtures are set up once, and a notebook's cells run in order in one
    kernel, as nbval needs.
    """
    path = nodeid.split("::", 1)[0]
    name = path.rsplit("/", 1)[-1]
    params = nodeid.rsplit("[", 1)[1].rstrip("]").split("-") if nodeid.endswith("]") else []
    if any(fnmatch.fnmatch(name, pattern) for pattern in SERIAL_FILES) or name in _postgres_files() \
            or "pg" in params:
        return "serial"
    return nodeid if name in SPLIT_FILES else path
