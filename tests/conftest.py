"""Shared fixtures: every test gets its own real SQLite file under pytest's tmp_path."""

from __future__ import annotations

import pytest

from memkit.store import MemoryStore


@pytest.fixture
def store(tmp_path):
    """A fresh store with the teaching limits, closed after the test."""
    with MemoryStore(tmp_path / "memory.sqlite3") as opened:
        yield opened


# -- the reliability lab's figures (tests/test_reliability_*.py) ------------------------------------

import datetime as _dt  # noqa: E402
import os as _os  # noqa: E402
import platform as _platform  # noqa: E402
import sqlite3 as _sqlite3  # noqa: E402
from pathlib import Path as _Path  # noqa: E402

RELIABILITY_FIGURES: dict[str, dict] = {}
"""Experiment name -> {"test": node id, "values": {figure: value}}, filled by the `figures` fixture."""

RELIABILITY_RESULTS = _Path(__file__).with_name("reliability_results.md")
"""Where a full run (MEMKIT_FULL=1, `make reliability`) writes its table for the README."""


@pytest.fixture
def figures(request):
    """Record (and print) the figures of one experiment: `figures("Crash", kills=300, lost=0)`.

    They are printed at once and again in one table at the end of the run; a full run also writes
    the table to tests/reliability_results.md.
    """

    def record(experiment: str, **values) -> None:
        RELIABILITY_FIGURES[experiment] = {"test": request.node.nodeid, "values": values}
        print(f"\n[{experiment}] " + ", ".join(f"{name} = {value}" for name, value in values.items()))

    return record


def _reliability_table(terminalreporter) -> list[str]:
    outcome: dict[str, str] = {}
    for key in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(key, []):
            if getattr(report, "nodeid", None) and (report.when == "call" or report.outcome != "passed"):
                if outcome.get(report.nodeid) in (None, "passed"):
                    outcome[report.nodeid] = report.outcome
    lines = ["| experiment | figures | result |", "|---|---|---|"]
    for name, entry in RELIABILITY_FIGURES.items():
        shown = ", ".join(f"{figure} {value}" for figure, value in entry["values"].items())
        lines.append(f"| {name} | {shown} | {outcome.get(entry['test'], 'not finished')} |")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print one table of every reliability figure recorded in this run (none: print nothing)."""
    if not RELIABILITY_FIGURES:
        return
    full = _os.environ.get("MEMKIT_FULL") == "1"
    lines = _reliability_table(terminalreporter)
    terminalreporter.write_sep("=", f"reliability figures ({'full' if full else 'default'} size)")
    for line in lines:
        terminalreporter.write_line(line)
    if full:
        header = [
            "# Reliability lab: figures of the last full run",
            "",
            "Reproduce with `make reliability` (`MEMKIT_FULL=1 pytest tests/test_reliability_*.py -s`).",
            f"Run on {_dt.date.today().isoformat()}, Python {_platform.python_version()}, "
            f"SQLite {_sqlite3.sqlite_version}, {_os.cpu_count()} CPUs.",
            "",
        ]
        RELIABILITY_RESULTS.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
        terminalreporter.write_line(f"written to {RELIABILITY_RESULTS.name}")
