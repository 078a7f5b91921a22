"""The PostgreSQL section of bench/RESULTS.md and its plot (pg_writers.png), from `pg_bench.run`'s figures.

The rest of RESULTS.md belongs to `bench.report`; this module only replaces (or appends) the one
section that starts with `SECTION`, so either can be regenerated without losing the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .sections import write_section  # noqa: F401  (pg_bench and its test write through pg_report)

SECTION = "## PostgreSQL backend"
TARGET = 0.7
"""memkit/limit at least this for put, get and search (issue 14)."""
PLOT = "pg_writers.png"


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (operation, size): memkit/limit against the 0.7 target."""
    return [{"target": f"PostgreSQL {row['operation']} at {row['size']:,} records: memkit/limit >= {TARGET}",
             "measured": f"{row['ratio']:.2f}", "holds": row["ratio"] >= TARGET}
            for row in results["store"]["rows"]]


def markdown(results: dict[str, Any]) -> str:
    """The section: how it was run, the store against its limit, the writer curve and its plot."""
    meta, store, curve = results["meta"], results["store"], results["writers"]
    lines = [
        SECTION, "",
        f"`{meta['command']}` on {meta['server']} (embedded, a Unix socket; `synchronous_commit = on`), "
        f"{meta['cores']} cores shared with everything else on the machine; {meta['wall_s']} s in all.",
        "",
        "### The store against its limit",
        "",
        "`PostgresStore` through its public API against raw psycopg running the same statements, in the",
        "same order, with the same row locks, on one long-lived connection (`bench/pg_store_bench.py`).",
        f"Medians over {meta['rounds']} alternating rounds; memkit/limit is the limit's time over memkit's",
        f"(1.0: no overhead; target >= {TARGET} for put, get and search).",
        "",
        "| records | operation | search index | memkit µs | raw psycopg µs | memkit/limit | target |",
        "|---:|---|---|---:|---:|---:|---|",
    ]
    for row in store["rows"]:
        verdict = "held" if row["ratio"] >= TARGET else "MISSED"
        lines.append(f"| {row['size']:,} | {row['operation']} | {row['search']} | {row['memkit_us']:.1f} | "
                     f"{row['raw_us']:.1f} | {row['ratio']:.2f} | {verdict} |")
    checks = "; ".join(f"{c['size']:,} records: {c['questions']} questions, {c['disagreements']} answers differed"
                       for c in store["checks"])
    lines += ["", f"Same answers afterwards (gets, searches, every written user's records): {checks}.", ""]
    lines += [
        "### Writer processes: SQLite against PostgreSQL",
        "",
        f"`memkit.lab.scaling.writer_curve` (notebook 09's measurement; `bench/pg_writers.py` repeats it): "
        f"1 to {max(p['processes'] for p in curve['points'])} real processes, each putting new keys for its own user "
        f"for {curve['seconds']} s through `MemoryStore.put`, durably; the median of {curve['rounds']} rounds, each "
        "on a fresh file and schema (min-max in brackets); confirmed puts over the time from the first start "
        "to the last stop.",
        "",
        "| writer processes | SQLite (WAL) writes/s | PostgreSQL writes/s |",
        "|---:|---:|---:|",
    ]
    by = {(p["backend"], p["processes"]): p for p in curve["points"]}
    for n in sorted({p["processes"] for p in curve["points"]}):
        cells = [f"{by[(b, n)]['writes_per_s']:.0f} ({by[(b, n)]['min']:.0f}-{by[(b, n)]['max']:.0f})"
                 for b in ("SQLite (WAL)", "PostgreSQL")]
        lines.append(f"| {n} | {cells[0]} | {cells[1]} |")
    lines += [
        "",
        f"Every confirmed put was found afterwards ({curve['lost_writes']} missing); "
        f"{curve['refused_writes']} puts refused (lock wait past 60 s, or another error).",
        "",
        f"![writes per second against writer processes]({PLOT})",
        "",
    ]
    if results.get("notes"):
        lines += [results["notes"].strip(), ""]
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    """The writer curve: writes per second of each backend against the number of writer processes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    points = results["writers"]["points"]
    for backend, marker in (("SQLite (WAL)", "o"), ("PostgreSQL", "s")):
        mine = sorted((p for p in points if p["backend"] == backend), key=lambda p: p["processes"])
        ax.errorbar([p["processes"] for p in mine], [p["writes_per_s"] for p in mine],
                    yerr=[[p["writes_per_s"] - p["min"] for p in mine], [p["max"] - p["writes_per_s"] for p in mine]],
                    marker=marker, capsize=3, label=backend)
    ax.set_xscale("log", base=2)
    ax.set_xticks([p["processes"] for p in points if p["backend"] == "PostgreSQL"])
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("writer processes")
    ax.set_ylabel("durable writes per second (all)")
    ax.set_ylim(bottom=0)
    ax.set_title(f"Writers on one store ({results['meta']['cores']} cores)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

