"""`python -m bench [SUITE ...]` (what `make bench` runs): the registered suites, then RESULTS.md and results.json.

    python -m bench                 # store, search-small, budget, peers, window, notebook-suite,
                                    # postgres: a few minutes
    python -m bench --quick         # a smoke run: 1k records, 2 rounds, small peers, no window, no notebooks
    python -m bench --sizes 200 --rounds 1 --no-notebooks --no-window --out OUT   # a small run
    python -m bench chat inspector  # named suites only (`--list` lists them all)
    python -m bench --render        # RESULTS.md rewritten from results.json (and notebook_times.json), nothing run

A suite's `run(args)` returns figures keyed as in results.json; `write(results, out)` puts its
section into RESULTS.md (the store suites share one block, written once however many of them ran),
replacing its older self and keeping every other section; results.json keeps the latest figures of
every suite. Timings are never asserted anywhere: the targets are judged in the tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import json
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import report

HERE = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Suite:
    """One registered suite: its name on the command line, what it measures, how it runs and reports."""

    name: str
    measures: str
    run: Callable[[argparse.Namespace], dict[str, Any]]
    write: Callable[[dict[str, Any], Path], None]
    keys: tuple[str, ...]
    """Its figures' keys in results.json (none: the suite keeps its own file)."""
    default: bool = False
    """Run by `python -m bench` when no suite is named (`make bench`)."""


def _pick(args: argparse.Namespace, name: str, full: Any, quick: Any) -> Any:
    """An option as given, else the suite's default for a full or a `--quick` run."""
    given = getattr(args, name, None)
    return given if given is not None else (quick if args.quick else full)


# -- run: each suite's figures --------------------------------------------------------------------

def _store(args: argparse.Namespace) -> dict[str, Any]:
    from . import store_bench

    config = store_bench.StoreConfig(synchronous=args.synchronous, rounds=_pick(args, "rounds", 7, 2),
                                     sizes=_pick(args, "sizes", (1_000, 10_000, 100_000), (1_000,)))
    config.read_cap_s = 0.05 if args.quick else config.read_cap_s
    print(f"  sizes {list(config.sizes)}, {config.rounds} rounds, synchronous={config.synchronous}")
    return {"store": store_bench.run(config)}


def _search_small(args: argparse.Namespace) -> dict[str, Any]:
    from . import store_bench

    config = store_bench.SmallSearchConfig(synchronous=args.synchronous, rounds=_pick(args, "rounds", 31, 2))
    config.calls_per_round = 30 if args.quick else config.calls_per_round
    print(f"  {config.users} users x {config.records_per_user} records, limit {config.limit}, {config.rounds} rounds")
    return {"search_small": store_bench.run_small_search(config)}


def _budget(args: argparse.Namespace) -> dict[str, Any]:
    from . import budget_bench

    config = budget_bench.BudgetConfig(rounds=_pick(args, "rounds", 7, 2),
                                       requests_per_round=50 if args.quick else 300)
    return {"budget": budget_bench.run(config)}


def _missing_peers() -> str | None:
    """Why the peers cannot run (the `bench` extra is absent), printed; None when they can."""
    from .peers import peers_available

    if missing := peers_available():
        print(f"  skipped, {missing}")
    return missing


def _peers(args: argparse.Namespace) -> dict[str, Any]:
    if missing := _missing_peers():
        return {"peers_status": missing}
    from . import peer_bench

    store, crowd = peer_bench.PeerConfig(), peer_bench.WritersConfig()
    if args.quick:
        store.size, store.rounds, store.read_cap_s = 1_000, 2, 0.05
        crowd.size, crowd.rounds, crowd.seconds, crowd.solo_rounds = 1_000, 1, 0.3, 1
    store.size = crowd.size = args.peer_size or store.size
    store.rounds = crowd.rounds = args.rounds or store.rounds
    # The pages first: the store run then times the sync of exactly those pages beside each write.
    print("  the pages a write adds:")
    out: dict[str, Any] = {"write_profile": peer_bench.run_profile(
        peer_bench.ProfileConfig(size=store.size, writes=10 if args.quick else 60))}
    print(f"  store: {store.size} records, synchronous {' and '.join(store.synchronous)}, {store.rounds} rounds")
    out["peers"] = peer_bench.run(store, pages=out["write_profile"]["pages"])
    print(f"  {crowd.processes} writer processes:")
    return {**out, "writers": peer_bench.run_writers(crowd)}


def _window(args: argparse.Namespace) -> dict[str, Any]:
    if missing := _missing_peers():
        return {"window_status": missing}
    from . import window_bench

    config = window_bench.WindowPeerConfig()
    if args.quick:
        config.rounds, config.reads, config.appends, config.histories = 2, 20, 10, (10, 100)
    config.rounds = args.rounds or config.rounds
    return {"window_peers": window_bench.run_peers(config)}


def _postgres(args: argparse.Namespace) -> dict[str, Any]:
    from . import pg_bench

    with pg_bench.server(args.url) as url:
        results = pg_bench.run(url, args.quick)
    notes = HERE / "pg_notes.md"
    results["notes"] = notes.read_text(encoding="utf-8") if notes.exists() and not args.quick else ""
    results["meta"]["command"] = args.command
    return {"postgres": results}


def _notebooks(args: argparse.Namespace) -> dict[str, Any]:
    from . import notebook_bench

    times = args.out / "notebook_times.json"
    results = notebook_bench.merge(times, notebook_bench.run(args.names, args.repeat or 1))
    times.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return {"notebook_times": results}


def _inspector(args: argparse.Namespace) -> dict[str, Any]:
    from . import inspector_bench

    if args.records < args.users * 4:
        raise SystemExit(f"--records {args.records} for --users {args.users}: give at least 4 records a user")
    rows = inspector_bench.run(args.records, args.users, args.rounds or 7)
    return {"inspector": {"rows": rows, "records": args.records, "users": args.users, "rounds": args.rounds or 7}}


# -- write: each suite's section of RESULTS.md ----------------------------------------------------

def _write_store_suites(results: dict[str, Any], out: Path) -> None:
    notes = HERE / "NOTES.md"
    text = report.markdown(results, notes.read_text(encoding="utf-8") if notes.exists() else "")
    report.write_sections(out / "RESULTS.md", text, at_start=True)
    if results.get("store"):
        report.plot(results, out / "results.png")


def _write_postgres(results: dict[str, Any], out: Path) -> None:
    report.pg_plot(results["postgres"], out / report.PG_PLOT)
    report.write_section(out / "RESULTS.md", report.pg_markdown(results["postgres"]))


def _section(render: Callable[[Any], str], key: str) -> Callable[[dict[str, Any], Path], None]:
    return lambda results, out: report.write_section(out / "RESULTS.md", render(results[key]))


def _bench(module: str) -> Any:
    """One of the suites' modules, imported when its suite runs (some need an extra)."""
    return importlib.import_module(f".{module}", __package__)


SUITES = (
    Suite("store", "store operations at each size: memkit against the raw SQLite limit and the naive way",
          _store, _write_store_suites, ("store",), default=True),
    Suite("search-small", "search on 15 users x 60 records, limit 5: memkit against the statement it runs",
          _search_small, _write_store_suites, ("search_small",), default=True),
    Suite("budget", "the budget wrapper's cost per request against sending it unmeasured",
          _budget, _write_store_suites, ("budget",), default=True),
    Suite("peers", "memkit's store against langgraph SqliteStore: operations, a write's pages, writers (bench extra)",
          _peers, _write_store_suites, ("peers", "write_profile", "writers", "peers_status"), default=True),
    Suite("window", "memkit's short-term window against openai-agents' sessions (the bench extra)",
          _window, _write_store_suites, ("window_peers", "window_status"), default=True),
    Suite("notebook-suite", "the wall time of the notebook suite under nbval, as make test runs it",
          lambda args: {"notebooks": _bench("notebook_bench").run_nbval()}, _write_store_suites, ("notebooks",),
          default=True),
    Suite("postgres", "PostgresStore against raw psycopg, and the SQLite and PostgreSQL writer curve",
          _postgres, _write_postgres, ("postgres",), default=True),
    Suite("notebooks", "each notebook's Run All in a fresh kernel (into OUT/notebook_times.json)",
          _notebooks, _section(report.notebooks_markdown, "notebook_times"), ()),
    Suite("chat", "one `memkit chat --message` in fresh processes against `python -c pass`",
          lambda args: {"chat": _bench("chat_bench").run(args.rounds or 5, args.baseline, args.label)},
          _section(report.chat_markdown, "chat"), ("chat",)),
    Suite("inspector", "each inspector click's plain method and with the widget, at 10,000 records",
          _inspector, _section(lambda f: report.inspector_markdown(f["rows"], f["records"], f["users"], f["rounds"]),
                               "inspector"), ("inspector",)),
    Suite("semantic", "retrieval by meaning: recall at 3 on a labelled set, and its time at the quota",
          lambda args: {"semantic": _bench("semantic_bench").run(postgres=args.pg, repeat=args.repeat or 50)},
          _section(report.semantic_markdown, "semantic"), ("semantic",)),
)
BY_NAME = {suite.name: suite for suite in SUITES}
STORE_SUITES = {"store", "search-small", "budget", "peers", "window", "notebook-suite"}
"""The suites of the one block at the top of RESULTS.md (and of results.json's `meta`)."""


# -- the runner -------------------------------------------------------------------------------------

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
    add("--guide", action="store_true", help="tracks: write them into docs/TEACHER_GUIDE.md too")
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
        if not times:
            print("\n".join(f"{s.name:15} {s.measures}" for s in SUITES))
            return 0
        minutes = report.stated()  # every notebook's first cell, read once for the tables and the verdict
        text = report.tracks(times, minutes)
        print(text)
        if args.guide:
            changed = report.write_guide_tracks(report.GUIDE, text)
            print(f"{'wrote the track tables into' if changed else 'the track tables are already in'} {report.GUIDE}")
        over = report.tracks_that_do_not_fit(times, minutes)
        if over:
            print(f"over its minutes: {', '.join(over)} (bench/report.py TRACKS, or the notebooks' stated minutes)",
                  file=sys.stderr)
        return 1 if over else 0
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
