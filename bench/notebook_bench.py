"""How long each notebook takes to Run All, as a class waits for it: `python -m bench.notebook_bench`.

Each notebook runs top to bottom in a fresh `python3` kernel started in the notebooks' folder (what
JupyterLab's Run All does, without the browser), timed with nbclient: the Run All time is from the
first cell to the last (the kernel's start is timed apart, since a student's kernel is usually
already up). The slowest cells are listed, so a slow notebook says where its time goes.

    python -m bench.notebook_bench                       # every notebook, once
    python -m bench.notebook_bench 05 09 --repeat 3      # some, three times each (the median is kept)
    python -m bench.notebook_bench --write               # ... and put the section into bench/RESULTS.md
    python -m bench.notebook_bench old/09_x.ipynb 09     # another version of 09 beside today's (not written)

The figures go into the section "## Notebooks: Run All" of bench/RESULTS.md (the rest of the file is
kept) and into bench/notebook_times.json, which the teacher's guide takes its minutes from. Times
are never asserted anywhere: issue 26's target (05 and 09 each at most 20 s) is judged in the table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from .sections import write_section

HERE = Path(__file__).resolve().parent
NOTEBOOKS = HERE.parent / "notebooks"
SECTION = "## Notebooks: Run All"
TARGET_S = {"05": 20.0, "09": 20.0}
"""Issue 26's targets: these notebooks Run All in at most this many seconds."""


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
    import re

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


def section(results: dict[str, Any]) -> str:
    """The markdown section for bench/RESULTS.md."""
    meta = results["meta"]
    lines = [SECTION, "",
             f"Written by `python -m bench.notebook_bench` on {meta['date']}. Machine: {meta['cores']} cores, "
             f"{meta['machine']}, Python {meta['python']}. Each notebook ran top to bottom in a fresh kernel "
             f"(nbclient, {meta['repeat']} run(s) each, the median kept); *Run All* is the first cell to the "
             "last, the kernel's start apart. *Class time* is what the notebook's first cell states (reading, "
             "the exercise, discussion); the teacher's guide adds the two. The machine was shared: load "
             f"average {meta.get('load_before', '?')} when the run began and {meta.get('load_after', '?')} "
             "when it ended (on 2 cores), so an idle machine is faster. A row marked *(before)* is an earlier "
             "version of a notebook (for issue 26: as it was before that round, commit 60cb204), timed in the "
             "same run as today's, round after round, so both met the same load. *CPU* is the processor time "
             "the kernel and every process it started used (user and system, from `getrusage` once they "
             "were reaped; a server that detaches, PostgreSQL in 09, is not counted): the notebook's work "
             "whatever the load; on an idle 2-core machine Run All takes at least half of it, plus the time "
             "its experiments wait (sleeps, pauses).", "",
             "| notebook | Run All | runs | kernel start | CPU | code cells | slowest cells | class time | target |",
             "|---|---:|---|---:|---:|---:|---|---:|---|"]
    for row in results["notebooks"]:
        number = row["notebook"][:2]
        target = TARGET_S.get(number)
        held = "" if target is None else (f"≤ {target:.0f} s: " + ("held" if row["median_s"] <= target else "**missed**"))
        slowest = ", ".join(f"[{c['cell']}] {c['s']:.1f} s" for c in row["slowest"])
        runs = " / ".join(f"{s:.1f}" for s in row["runs_s"])
        stated = f"{row['stated_minutes']} min" if row["stated_minutes"] else "–"
        cpu = f"{row['cpu_s']:.1f} s" if row.get("cpu_s") is not None else "–"
        lines.append(f"| `{row['notebook']}` | {row['median_s']:.1f} s | {runs} | {row['kernel_start_s']:.1f} s | "
                     f"{cpu} | {row['code_cells']} | {slowest} | {stated} | {held} |")
    total = sum(row["median_s"] for row in results["notebooks"] if "(" not in row["notebook"])
    lines += ["", f"All of today's notebooks: {total:.0f} s of Run All. Cell numbers count every cell from 0, "
              "as the notebook file does."]
    return "\n".join(lines) + "\n"


TRACKS: dict[str, dict[str, Any]] = {
    "A 90-minute taster": {
        "limit": 90, "notebooks": ["00", "03", "05"],
        "extra": {"closing: the cheat sheet, questions": 10}},
    "A three-hour class": {
        "limit": 180, "notebooks": ["00", "01", "03", "04", "05", "07"],
        "extra": {"a break": 10, "closing: the cheat sheet, questions": 5}},
    "A full day": {
        "limit": None, "notebooks": ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10",
                                     "11", "12"],
        "extra": {"two breaks of 15 minutes": 30, "lunch": 60}},
}
"""The teacher's guide's tracks: notebooks in order, and the minutes of the class that are not a notebook."""


def tracks(results: dict[str, Any]) -> str:
    """The guide's track tables: per notebook its stated class minutes and its measured Run All."""
    import math

    rows = {row["notebook"][:2]: row for row in results["notebooks"] if "(" not in row["notebook"]}
    out = []
    for title, track in TRACKS.items():
        lines = [f"**{title}**", "", "| notebook | class (stated) | Run All (measured) | minutes |",
                 "|---|---:|---:|---:|"]
        total = 0
        missing = []
        for number in track["notebooks"]:
            row = rows.get(number)
            if row is None or row.get("stated_minutes") is None:
                missing.append(number)
                lines.append(f"| `{number}` | not measured yet | – | – |")
                continue
            run_all = math.ceil(row["median_s"] / 60)
            minutes = row["stated_minutes"] + run_all
            total += minutes
            lines.append(f"| `{row['notebook']}` | {row['stated_minutes']} | {row['median_s']:.0f} s "
                         f"(≤ {run_all} min) | {minutes} |")
        for what, minutes in track["extra"].items():
            total += minutes
            lines.append(f"| {what} | {minutes} | – | {minutes} |")
        fits = "" if track["limit"] is None else (f" of {track['limit']}: fits" if total <= track["limit"]
                                                  else f" of {track['limit']}: **does not fit**")
        note = f" (without {', '.join(missing)}: not measured on this branch)" if missing else ""
        lines.append(f"| **total** | | | **{total}**{fits}{note} |")
        out.append("\n".join(lines))
    return "\n\n".join(out) + "\n"




def merge(path: Path, results: dict[str, Any]) -> dict[str, Any]:
    """Keep the earlier figures of notebooks not timed in this run (a run of `05 09` keeps the rest)."""
    if not path.exists():
        return results
    earlier = json.loads(path.read_text(encoding="utf-8"))
    timed = {row["notebook"] for row in results["notebooks"]}
    rows = [row for row in earlier.get("notebooks", []) if row["notebook"] not in timed] + results["notebooks"]
    return {"meta": results["meta"], "notebooks": sorted(rows, key=lambda row: row["notebook"])}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.notebook_bench", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook numbers or name prefixes (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per notebook; the median is kept")
    parser.add_argument("--tracks", action="store_true",
                        help="print the teacher's guide's track tables from bench/notebook_times.json")
    parser.add_argument("--write", action="store_true",
                        help="write bench/notebook_times.json and the section of bench/RESULTS.md")
    args = parser.parse_args(argv)
    if args.tracks:
        print(tracks(json.loads((HERE / "notebook_times.json").read_text(encoding="utf-8"))))
        return 0
    results = run(args.names, args.repeat)
    if args.write:
        times = HERE / "notebook_times.json"
        results = merge(times, results)
        times.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        write_section(HERE / "RESULTS.md", section(results))
        print(f"wrote {times} and the section {SECTION!r} of {HERE / 'RESULTS.md'}")
    else:
        print(section(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
