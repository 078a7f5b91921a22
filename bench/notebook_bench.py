"""How long each notebook takes to Run All, as a class waits for it (`python -m bench notebooks`),
and the wall time of the notebook suite under nbval (suite `notebook-suite`).

Each notebook runs top to bottom in a fresh `python3` kernel in the notebooks' folder (nbclient), the
kernel's start timed apart; the slowest cells say where the time goes. The figures are merged into
bench/notebook_times.json (a run of some keeps the others'), which the teacher's guide reads.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
NOTEBOOKS = HERE.parent / "notebooks"


def time_notebook(path: Path) -> dict[str, Any]:
    """Run every cell of the notebook in a fresh kernel; the kernel's start and each cell, timed."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                     resources={"metadata": {"path": str(NOTEBOOKS)}})
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with client.setup_kernel():
        kernel_s = time.perf_counter() - started
        cells = []
        run_started = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            t0 = time.perf_counter()
            client.execute_cell(cell, index)
            cells.append((index, time.perf_counter() - t0))
        run_all_s = time.perf_counter() - run_started
    # The kernel has exited and been reaped here, and it reaped its own processes (workers, servers):
    # their CPU time, the work the notebook needs whatever the load of the machine.
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    slowest = sorted(cells, key=lambda c: -c[1])[:3]
    return {"notebook": path.stem, "run_all_s": round(run_all_s, 2), "kernel_start_s": round(kernel_s, 2),
            "cpu_s": round(cpu_s, 1),
            "code_cells": len(cells), "slowest": [{"cell": i, "s": round(s, 2)} for i, s in slowest]}


def stated_minutes(path: Path) -> int | None:
    """The class time the notebook's first cell states ("about 25 minutes"), if it states one."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    first = "".join(nb["cells"][0]["source"]) if nb["cells"] else ""
    match = re.search(r"(?i)time needed:?\**\s*about\s+(\d+)\s*min", first)
    return int(match.group(1)) if match else None


def label(path: Path) -> str:
    """A notebook's name in the table; another version names its folder too."""
    return path.stem if path.parent.resolve() == NOTEBOOKS.resolve() else f"{path.stem} ({path.parent.name})"


def run(names: list[str], repeat: int, log: Any = print) -> dict[str, Any]:
    """Time each notebook `repeat` times; keep every run and the median."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if names:
        files = [Path(n) for n in names if n.endswith(".ipynb")]  # another version of a notebook
        paths = [p for p in paths if any(p.name.startswith(n) for n in names)] + files
    rows = []
    loads = os.getloadavg()
    runs: dict[Path, list[dict[str, Any]]] = {path: [] for path in paths}
    for _ in range(repeat):  # round after round, so every notebook meets the same load
        for path in paths:
            runs[path].append(time_notebook(path))
            log(f"  {label(path)}: {runs[path][-1]['run_all_s']:.1f} s "
                f"(kernel {runs[path][-1]['kernel_start_s']:.1f} s)")
    for path, timed in runs.items():
        median = statistics.median(r["run_all_s"] for r in timed)
        slowest = min(timed, key=lambda r: abs(r["run_all_s"] - median))["slowest"]
        rows.append({"notebook": label(path), "runs_s": [r["run_all_s"] for r in timed],
                     "median_s": round(median, 1),
                     "kernel_start_s": round(statistics.median(r["kernel_start_s"] for r in timed), 1),
                     "code_cells": timed[0]["code_cells"], "slowest": slowest,
                     "cpu_s": statistics.median(r["cpu_s"] for r in timed),
                     "stated_minutes": stated_minutes(path)})
    load = os.getloadavg()[0]
    return {"meta": {"load_before": round(loads[0], 1), "load_after": round(load, 1),
                     "date": dt.date.today().isoformat(), "cores": os.cpu_count(), "python": platform.python_version(),
                     "machine": f"{platform.system()} {platform.machine()}", "repeat": repeat}, "notebooks": rows}


def merge(path: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Keep the earlier figures of notebooks not timed in this run (a run of `05 09` keeps the rest)."""
    if not path.exists():
        return results
    earlier = json.loads(path.read_text(encoding="utf-8"))
    timed = {row["notebook"] for row in results["notebooks"]}
    rows = [row for row in earlier.get("notebooks", []) if row["notebook"] not in timed] + results["notebooks"]
    return {"meta": results["meta"], "notebooks": sorted(rows, key=lambda row: row["notebook"])}


def run_nbval(log: Any = print) -> dict[str, Any]:
    """Wall time of the whole nbval run (`pytest notebooks --nbval`), as `make test` runs it."""
    notebooks = sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        return {"notebooks": 0, "status": "no notebooks yet", "wall_s": None}
    command = [sys.executable, "-m", "pytest", "notebooks", "--nbval",
               "--nbval-sanitize-with", "notebooks/sanitize.cfg", "-q", "-p", "no:cacheprovider"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=NOTEBOOKS.parent, capture_output=True, text=True)
    wall = time.perf_counter() - started
    tail = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-200:]
    counts = {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped)", tail)}
    log(f"    {len(notebooks)} notebooks, {wall:.1f} s wall: {tail}")
    return {"notebooks": len(notebooks), "names": notebooks, "wall_s": round(wall, 1),
            "exit_code": done.returncode, "summary": tail, "cells": counts}
