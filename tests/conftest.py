"""Shared fixtures: every test gets its own real SQLite file under pytest's tmp_path, or (in the
store's conformance suite) its own schema on a real PostgreSQL server."""

from __future__ import annotations

import os

import pytest

# The helper modules are pytest plugins (below): their asserts are rewritten when this import loads
# them, as a plugin's would be (else pytest warns that it came too late to rewrite them).
pytest.register_assert_rewrite("_store_helpers", "_window_helpers")

from _store_helpers import ACTIVE, DEBIAN_POSTGRES, SQLITE, TEST_SERVER_SETTINGS, Backend  # noqa: E402

# The helper modules' fixtures (clocked, demo, own_server) reach every test through pytest, so a test
# names them as arguments without importing them.
pytest_plugins = ["_store_helpers", "_window_helpers"]

BACKENDS = ["sqlite", "pg", "pg-trgm"]
"""The conformance suite's backends: a SQLite file; PostgreSQL 16 of the pgserver wheel (no
pg_trgm: searches scan), or the server at MEMKIT_PG_URL; Debian's PostgreSQL 15 with pg_trgm."""


@pytest.fixture(scope="session")
def pg_url():
    """A PostgreSQL server for the session: $MEMKIT_PG_URL, else an embedded one (pgserver)."""
    given = os.environ.get("MEMKIT_PG_URL")
    if given:
        yield given
        return
    from memkit.store.postgres import start_embedded_postgres

    with start_embedded_postgres(settings=TEST_SERVER_SETTINGS) as server:
        yield server.url


@pytest.fixture(scope="session")
def pg_trgm_url():
    """Debian's PostgreSQL 15 with contrib, started in a temporary folder, pg_trgm installed."""
    if not (DEBIAN_POSTGRES / "initdb").exists():
        pytest.skip(f"NOT TESTED: the pg_trgm search path needs Debian's PostgreSQL 15 in {DEBIAN_POSTGRES} "
                    "(apt-get install postgresql-15 postgresql-contrib); CI installs it")
    import psycopg

    from memkit.store.postgres import start_embedded_postgres

    with start_embedded_postgres(bin_dir=DEBIAN_POSTGRES, settings=TEST_SERVER_SETTINGS) as server:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_trgm")  # where a DBA puts it: public
        yield server.url


@pytest.fixture(scope="module")
def backend(request):
    """The backend the store's conformance suite runs on: modules opt in with
    `pytestmark = pytest.mark.usefixtures("backend")`, and `pytest_generate_tests` runs each of
    their tests once per backend."""
    name = getattr(request, "param", "sqlite")
    if name == "sqlite":
        chosen = SQLITE
    else:
        chosen = Backend(name, request.getfixturevalue("pg_url" if name == "pg" else "pg_trgm_url"))
    ACTIVE.append(chosen)
    yield chosen
    ACTIVE.pop()


def pytest_generate_tests(metafunc):
    """Every test that uses `backend` runs on each of BACKENDS; one marked `sqlite_only` (it checks
    a SQLite file mechanism) on SQLite alone."""
    if "backend" in metafunc.fixturenames:
        names = ["sqlite"] if metafunc.definition.get_closest_marker("sqlite_only") else BACKENDS
        metafunc.parametrize("backend", names, indirect=True, scope="module")


@pytest.fixture
def store(tmp_path):
    """A fresh store with the teaching limits, on the backend under test (SQLite outside the
    conformance suite), closed after the test."""
    with ACTIVE[-1].open(tmp_path / "memory.sqlite3") as opened:
        yield opened


# -- the reliability lab's figures (tests/reliability/test_reliability_*.py) ------------------------------------

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
            if (getattr(report, "nodeid", None) and (report.when == "call" or report.outcome != "passed")
                    and outcome.get(report.nodeid) in (None, "passed")):
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
            "Reproduce with `make reliability` (`MEMKIT_FULL=1 pytest tests/reliability/test_reliability_*.py -s`).",
            f"Run on {_dt.date.today().isoformat()}, Python {_platform.python_version()}, "
            f"SQLite {_sqlite3.sqlite_version}, {_os.cpu_count()} CPUs.",
            "",
        ]
        RELIABILITY_RESULTS.write_text("\n".join(header + lines) + "\n", encoding="utf-8")
        terminalreporter.write_line(f"written to {RELIABILITY_RESULTS.name}")


# -- two workers (pytest-xdist, `make test`: -n 2 --dist loadgroup) ---------------------------------

from _workers import work_unit  # noqa: E402  (the units: tests/_workers.py)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup`: whole units (see `work_unit`) go to a worker, in collection order.

    xdist's own loadgroup reads `xdist_group` marks through a node id that pytest 9 no longer lets
    it change, so it would split a notebook's cells between workers; this scheduler groups by the
    node id alone.
    """
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    return UnitScheduling(config, log)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On an xdist worker, hand the reliability figures it recorded to the controller, which prints
    the table (a worker's own terminal summary is never shown)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["reliability_figures"] = dict(RELIABILITY_FIGURES)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """On the xdist controller: collect the figures a finished worker recorded."""
    RELIABILITY_FIGURES.update(getattr(node, "workeroutput", {}).get("reliability_figures", {}))
