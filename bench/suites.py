"""The registry: every suite `python -m bench` can run, what it measures, and where its figures go.

A suite's `run(args)` returns figures keyed as in results.json; `write(results, out)` puts its
section into RESULTS.md (the store suites share one block, written once however many of them ran).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
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


def _budget(args: argparse.Namespace) -> dict[str, Any]:
    from . import budget_bench

    config = budget_bench.BudgetConfig(rounds=_pick(args, "rounds", 7, 2),
                                       requests_per_round=50 if args.quick else 300)
    return {"budget": budget_bench.run(config)}


def _peers(args: argparse.Namespace) -> dict[str, Any]:
    from .peers import peers_available

    missing = peers_available()
    if missing:
        print(f"  skipped, {missing}")
        return {"peers_status": missing}
    from . import peer_bench

    store, crowd = peer_bench.PeerConfig(), peer_bench.WritersConfig()
    if args.quick:
        store.size, store.rounds, store.read_cap_s = 1_000, 2, 0.05
        crowd.size, crowd.rounds, crowd.seconds = 1_000, 1, 0.3
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
    from .peers import peers_available

    missing = peers_available()
    if missing:
        print(f"  skipped, {missing}")
        return {"window_status": missing}
    from . import window_bench

    config = window_bench.WindowPeerConfig()
    if args.quick:
        config.rounds, config.reads, config.appends, config.histories = 2, 20, 10, (10, 100)
    config.rounds = args.rounds or config.rounds
    return {"window_peers": window_bench.run_peers(config)}


def _notebook_suite(args: argparse.Namespace) -> dict[str, Any]:
    from . import notebook_bench

    return {"notebooks": notebook_bench.run_nbval()}


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


def _chat(args: argparse.Namespace) -> dict[str, Any]:
    from . import chat_bench

    return {"chat": chat_bench.run(args.rounds or 5, args.baseline, args.label)}


def _inspector(args: argparse.Namespace) -> dict[str, Any]:
    from . import inspector_bench

    if args.records < args.users * 4:
        raise SystemExit(f"--records {args.records} for --users {args.users}: give at least 4 records a user")
    rows = inspector_bench.run(args.records, args.users, args.rounds or 7)
    return {"inspector": {"rows": rows, "records": args.records, "users": args.users, "rounds": args.rounds or 7}}


def _semantic(args: argparse.Namespace) -> dict[str, Any]:
    from . import semantic_bench

    return {"semantic": semantic_bench.run(postgres=args.pg, repeat=args.repeat or 50)}


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


def _semantic_section(figures: dict[str, Any]) -> str:
    from memkit.semantic import DEFAULT_MIN_SIMILARITY

    return report.semantic_markdown(figures, DEFAULT_MIN_SIMILARITY)


def _inspector_section(figures: dict[str, Any]) -> str:
    return report.inspector_markdown(figures["rows"], figures["records"], figures["users"], figures["rounds"])


SUITES = (
    Suite("store", "store operations at each size: memkit against the raw SQLite limit and the naive way",
          _store, _write_store_suites, ("store",), default=True),
    Suite("budget", "the budget wrapper's cost per request against sending it unmeasured",
          _budget, _write_store_suites, ("budget",), default=True),
    Suite("peers", "memkit's store against langgraph SqliteStore: operations, a write's pages, writers (bench extra)",
          _peers, _write_store_suites, ("peers", "write_profile", "writers", "peers_status"), default=True),
    Suite("window", "memkit's short-term window against openai-agents' sessions (the bench extra)",
          _window, _write_store_suites, ("window_peers", "window_status"), default=True),
    Suite("notebook-suite", "the wall time of the notebook suite under nbval, as make test runs it",
          _notebook_suite, _write_store_suites, ("notebooks",), default=True),
    Suite("postgres", "PostgresStore against raw psycopg, and the SQLite and PostgreSQL writer curve",
          _postgres, _write_postgres, ("postgres",), default=True),
    Suite("notebooks", "each notebook's Run All in a fresh kernel (into OUT/notebook_times.json)",
          _notebooks, _section(report.notebooks_markdown, "notebook_times"), ()),
    Suite("chat", "one `memkit chat --message` in fresh processes against `python -c pass`",
          _chat, _section(report.chat_markdown, "chat"), ("chat",)),
    Suite("inspector", "each inspector click's plain method and with the widget, at 10,000 records",
          _inspector, _section(_inspector_section, "inspector"), ("inspector",)),
    Suite("semantic", "retrieval by meaning: recall at 3 on a labelled set, and its time at the quota",
          _semantic, _section(_semantic_section, "semantic"), ("semantic",)),
)
BY_NAME = {suite.name: suite for suite in SUITES}
STORE_SUITES = {"store", "budget", "peers", "window", "notebook-suite"}
"""The suites of the one block at the top of RESULTS.md (and of results.json's `meta`)."""
