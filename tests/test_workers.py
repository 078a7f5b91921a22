"""How `make test` shares the suite between two workers (tests/_workers.py, `work_unit`, used by
tests/conftest.py's scheduler): what must run whole on one worker does, and the timing-sensitive
experiments stay in one serial unit."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from _workers import SERIAL_FILES, SPLIT_FILES, work_unit

TESTS = Path(__file__).resolve().parent


def test_a_notebooks_cells_are_one_unit_and_another_notebook_another():
    cells = {work_unit(f"notebooks/05_restart_simulation.ipynb::Cell {n}") for n in range(30)}
    assert cells == {"notebooks/05_restart_simulation.ipynb"}
    assert work_unit("notebooks/09_scaling_out.ipynb::Cell 0") != cells.pop()


def test_a_plain_file_is_one_unit_and_the_long_self_contained_tests_are_one_each():
    assert work_unit("tests/test_codec.py::test_a") == work_unit("tests/test_codec.py::test_b[x-y]") \
        == "tests/test_codec.py"
    first = work_unit("tests/test_exercises.py::test_exercise_verdicts_and_run_all_twice[00_start_here.ipynb]")
    second = work_unit("tests/test_exercises.py::test_exercise_verdicts_and_run_all_twice[09_scaling_out.ipynb]")
    assert first != second and "serial" not in (first, second)


def test_kill_race_and_timing_files_and_every_postgresql_test_share_the_serial_unit():
    for nodeid in ("tests/test_reliability_crash.py::test_x", "tests/test_scaling.py::test_y",
                   "tests/test_postgres_processes.py::test_z", "tests/test_window.py::test_ttl",
                   # the conformance suite's PostgreSQL runs, alone or with other parameters
                   "tests/test_store_bundle.py::test_round_trip[pg]", "tests/test_store_search.py::test_s[pg-trgm]",
                   "tests/test_semantic.py::test_t[pg-2]",
                   # a file that asks for the session's server by name (pg_url)
                   "tests/test_mcp_server.py::test_any"):
        assert work_unit(nodeid) == "serial", nodeid
    assert work_unit("tests/test_store_bundle.py::test_round_trip[sqlite]") == "tests/test_store_bundle.py"
    assert work_unit("tests/test_watchdog.py::test_w[pgserver]") == "serial"  # by its file
    assert work_unit("tests/test_window_stores.py::test_v[pgserver]") == "tests/test_window_stores.py"


def test_every_named_file_exists():
    """A renamed file would silently leave the serial unit (or stop being split)."""
    names = [path.name for path in TESTS.rglob("test_*.py")]
    for pattern in (*SERIAL_FILES, *SPLIT_FILES):
        assert fnmatch.filter(names, pattern), f"{pattern} matches no test file"


def test_a_real_two_worker_run_keeps_each_file_whole_on_one_worker():
    """The hook in tests/conftest.py is what `make test` runs: without it xdist would deal these
    files' tests out to both workers one by one."""
    import os
    import re
    import subprocess
    import sys

    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}  # a run of its own
    files = ["tests/agent/test_approvals.py", "tests/window/test_codec.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup",
                           "--no-loadscope-reorder", "-v", *files], cwd=TESTS.parent, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    workers: dict[str, set[str]] = {}
    for worker, path in re.findall(r"^\[(gw\d)\] \[ *\d+%\] PASSED (\S+?)::", done.stdout, re.M):
        workers.setdefault(path, set()).add(worker)
    assert set(workers) == set(files) and all(len(found) == 1 for found in workers.values()), workers
