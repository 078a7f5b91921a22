"""The parts of the suite that run something else: the notebook suite and the window benchmark.

Both run as subprocesses with this interpreter, from the repository root, so they measure what a
reader's `make test` and the window script would do, and cannot disturb the store timings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WINDOW_SCRIPT = ROOT / "bench" / "bench_window.py"
WINDOW_RESULTS = ROOT / "bench" / "results_window.md"


def run_notebooks(log: Any = print) -> dict[str, Any]:
    """Wall time of the whole nbval run (`pytest notebooks --nbval`), as `make test` runs it."""
    notebooks = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        return {"notebooks": 0, "status": "no notebooks yet", "wall_s": None}
    command = [sys.executable, "-m", "pytest", "notebooks", "--nbval",
               "--nbval-sanitize-with", "notebooks/sanitize.cfg", "-q", "-p", "no:cacheprovider"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", tail))
    log(f"    {len(notebooks)} notebooks, {wall:.1f} s wall: {tail}")
    return {"notebooks": len(notebooks), "names": notebooks, "wall_s": round(wall, 1),
            "exit_code": done.returncode, "summary": tail, "cells": counts}


def run_window(log: Any = print, timeout_s: float = 600) -> dict[str, Any]:
    """Run the short-term window benchmark (`bench/bench_window.py`, owned by the window's author).

    Its table goes to a scratch file and into RESULTS.md; `bench/results_window.md` stays as the
    script's own runs leave it.
    """
    if not WINDOW_SCRIPT.exists():
        return {"status": "not landed yet (bench/bench_window.py is missing)", "table": None}
    scratch = Path(tempfile.mkdtemp(prefix="memkit-bench-window-"))
    try:
        return _run_window(scratch / WINDOW_RESULTS.name, log, timeout_s)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_window(target: Path, log: Any, timeout_s: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, str(WINDOW_SCRIPT), "--out", str(target)], cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"status": f"bench/bench_window.py ran past {timeout_s:.0f} s and was stopped", "table": None}
    wall = time.perf_counter() - started
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or ["no output"])[-1]
        log(f"    window benchmark failed: {reason}")
        return {"status": f"bench/bench_window.py failed (exit {done.returncode}): {reason}", "table": None}
    table = target.read_text(encoding="utf-8") if target.exists() else None
    log(f"    window benchmark done in {wall:.1f} s")
    return {"status": "ok", "wall_s": round(wall, 1), "table": table}
