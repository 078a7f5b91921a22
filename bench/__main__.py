"""`python -m bench [SUITE ...]` (what `make bench` runs): the suites, then RESULTS.md and results.json.

    python -m bench                 # store, budget, peers, window, notebook-suite, postgres: a few minutes
    python -m bench --quick         # a smoke run: 1k records, 2 rounds, small peers, no window, no notebooks
    python -m bench --sizes 200 --rounds 1 --no-notebooks --no-window --out OUT   # a small run
    python -m bench chat inspector  # named suites only (`--list` lists them all)
    python -m bench --render        # RESULTS.md rewritten from results.json (and notebook_times.json), nothing run

Each suite's section of RESULTS.md is replaced and every other section kept; results.json keeps
the latest figures of every suite. Timings are never asserted anywhere: the targets are judged in
the tables.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from . import report
from .suites import BY_NAME, HERE, STORE_SUITES, SUITES, Suite


def sizes(text: str) -> tuple[int, ...]:
    """`--sizes 1000,10000`: the record counts."""
    return tuple(int(x) for x in text.split(","))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; an unknown suite is refused with the list of suites."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("suites", nargs="*", metavar="SUITE", help="suites to run (default: those of `make bench`; see --list)")
    add("--list", action="store_true", help="list the suites and what each measures")
    add("--quick", action="store_true", help="smoke run: 1k records, 2 rounds, no window, no notebooks")
    add("--out", type=Path, default=HERE, help="where RESULTS.md, results.png and results.json go (default: bench/)")
    add("--rounds", type=int, help="rounds (default: each suite's own; 2 with --quick)")
    add("--sizes", type=sizes, help="store: comma-separated record counts (default 1000,10000,100000)")
    add("--synchronous", choices=("FULL", "NORMAL"), default="FULL", help="store: durability (default FULL)")
    for name, what in (("notebooks", "the nbval run of the notebook suite"), ("window", "the window suite"),
                       ("peers", "the peers suite (the bench extra)")):
        add(f"--{name}", dest=f"with_{name}", action=argparse.BooleanOptionalAction, default=None,
            help=f"{what} in the default run (default: on; window and notebooks off with --quick)")
    add("--peer-size", type=int, help="peers: records (default 10000; --quick 1000)")
    add("--url", help="postgres: a PostgreSQL server (default: an embedded one)")
    add("--names", nargs="*", default=[], help="notebooks: notebook numbers, name prefixes or .ipynb files")
    add("--repeat", type=int, help="notebooks: runs per notebook (1); semantic: timed calls (50)")
    add("--tracks", action="store_true", help="print the teacher's guide's track tables (notebook_times.json)")
    add("--baseline", type=Path, help="chat: a folder with another memkit package to time alongside")
    add("--label", default="baseline", help="chat: the baseline's name in the table")
    add("--records", type=int, default=10_000, help="inspector: records")
    add("--users", type=int, default=500, help="inspector: users")
    add("--pg", action=argparse.BooleanOptionalAction, default=True, help="semantic: time PostgreSQL too")
    add("--render", action="store_true", help="rewrite every section from OUT/results.json; run nothing")
    args = parser.parse_args(argv)
    unknown = [name for name in args.suites if name not in BY_NAME]
    if unknown:
        parser.error(f"no suite {', '.join(unknown)}; the suites are {', '.join(BY_NAME)}")
    return args


def chosen(args: argparse.Namespace) -> list[Suite]:
    """The suites named, else the default ones less those switched off."""
    if args.suites:
        return [BY_NAME[name] for name in dict.fromkeys(args.suites)]
    switch = {"notebook-suite": args.with_notebooks, "window": args.with_window, "peers": args.with_peers}

    def wanted(suite: Suite) -> bool:
        on = switch.get(suite.name)
        return on if on is not None else not (args.quick and suite.name in ("notebook-suite", "window"))
    return [s for s in SUITES if s.default and wanted(s)]


def _meta(args: argparse.Namespace) -> dict[str, Any]:
    return {"command": args.command, "date": dt.date.today().isoformat(), "cores": os.cpu_count(),
            "platform": f"{platform.system()} {platform.machine()}", "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "rounds": args.rounds or (2 if args.quick else 7),
            "synchronous": args.synchronous, "sizes": list(args.sizes or ((1_000,) if args.quick else
                                                                          (1_000, 10_000, 100_000)))}


def save(path: Path, results: dict[str, Any], suites: list[Suite]) -> dict[str, Any]:
    """results.json: this run's figures in place of the same suites' older ones, the rest kept.

    Returns every suite's latest figures (this run's over the saved ones), which the report renders:
    a run of one of the store suites rewrites their block with the others' latest figures.
    """
    saved = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for key in {key for suite in suites for key in suite.keys} | ({"meta"} & set(results)):
        saved.pop(key, None)
    saved.update({k: v for k, v in results.items() if k == "meta" or any(k in s.keys for s in suites)})
    path.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
    return {**saved, **results}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen suites, save results.json, write each suite's section; print the targets."""
    args = parse_args(argv)
    if args.render:
        latest = json.loads((args.out / "results.json").read_text(encoding="utf-8"))
        times = args.out / "notebook_times.json"
        latest["notebook_times"] = json.loads(times.read_text(encoding="utf-8")) if times.exists() else None
        rendered = [s for s in SUITES if any(latest.get(k) for k in s.keys or ("notebook_times",))]
        for write in dict.fromkeys(s.write for s in rendered):
            write(latest, args.out)
        print(f"wrote {args.out / 'RESULTS.md'} from {args.out / 'results.json'}")
        return 0
    if args.list or args.tracks:
        times = json.loads((args.out / "notebook_times.json").read_text(encoding="utf-8")) if args.tracks else None
        print(report.tracks(times) if times else "\n".join(f"{s.name:15} {s.measures}" for s in SUITES))
        return 0
    given = " ".join(argv if argv is not None else sys.argv[1:])
    args.command = ("python -m bench " + given.replace(str(args.out), "OUT")).strip()
    suites = chosen(args)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for suite in suites:
        print(f"{suite.name}: {suite.measures}")
        results.update(suite.run(args))
    names = {s.name for s in suites}
    if "store" in names or (STORE_SUITES & names and not (args.out / "results.json").exists()):
        results["meta"] = {**_meta(args), "wall_s": round(time.perf_counter() - started, 1)}  # the store run's
    latest = save(args.out / "results.json", results, suites)
    for write in dict.fromkeys(s.write for s in suites):
        write(latest, args.out)
    found = report.targets(results) + (report.pg_targets(results["postgres"]) if "postgres" in results else [])
    print(f"\n{len(found)} targets measured ({round(time.perf_counter() - started, 1)} s in all)")
    for t in found:
        print(f"  {'ok  ' if t['holds'] else 'MISS'} {t['target']}: {t['measured']}")
    print(f"wrote {args.out / 'RESULTS.md'} and {args.out / 'results.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
