"""Turn the suite's results into `RESULTS.md` (tables, targets) and a plot (log scale by size).

Ratios are speeds, so bigger is better for memkit:
* `vs limit` = time of raw sqlite3 / time of memkit: 1.0 means as fast as the bare SQL; the
  target is at least 0.5 (memkit within 2x of the limit).
* `vs naive` = time of the naive way / time of memkit: how many times faster the kit is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import report_peers
from .budget_bench import ENCODE, WITH_PARTS, WRAPPED
from .store_bench import CONTENDERS, OPERATIONS

LIMIT_OPS = ("get", "put (new key)", "put (update)", "search (hit)", "search (miss)")
NAIVE_10X = ("get", "search (hit)", "search (miss)")
NAIVE_2X = ("put (new key)", "put (update)")


def _fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def _medians(rows: list[dict[str, Any]]) -> dict[tuple[int, str, str], float]:
    return {(r["size"], r["operation"], r["contender"]): r["median_s"] for r in rows}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of the issue, with the measured value and whether it holds."""
    store = results["store"]
    med = _medians(store["rows"])
    sizes = sorted({r["size"] for r in store["rows"]})
    out: list[dict[str, Any]] = []

    def add(target: str, measured: str, holds: bool) -> None:
        out.append({"target": target, "measured": measured, "holds": holds})

    for op in LIMIT_OPS:
        ratios = {n: med[(n, op, "raw sqlite3")] / med[(n, op, "memkit")] for n in sizes}
        worst = min(ratios, key=ratios.get)
        add(f"{op}: memkit/limit ≥ 0.5 at every size", f"lowest {ratios[worst]:.2f} (at {worst:,})",
            ratios[worst] >= 0.5)
    big = [n for n in sizes if n >= 10_000]
    for ops, factor in ((NAIVE_10X, 10), (NAIVE_2X, 2)):
        for op in ops:
            if not big:
                continue
            ratios = {n: med[(n, op, "naive")] / med[(n, op, "memkit")] for n in big}
            worst = min(ratios, key=ratios.get)
            add(f"{op}: ≥ {factor}x faster than naive at 10k and above",
                f"lowest {ratios[worst]:.1f}x (at {worst:,})", ratios[worst] >= factor)
    if 100_000 in sizes:
        for op in ("search (hit)", "search (miss)"):
            t = med[(100_000, op, "memkit")]
            add(f"{op} at 100k: median < 2 ms", _fmt_time(t), t < 2e-3)
        t = med[(100_000, "retrieval context", "memkit")]
        add("retrieval context at 100k: median < 5 ms", _fmt_time(t), t < 5e-3)
    budget = {(r["case"], r["contender"]): r["median_s"] for r in results["budget"]["rows"]}
    enc, wrapped = budget[("agent turn, fits", ENCODE)], budget[("agent turn, fits", WRAPPED)]
    share = (wrapped - enc) / enc
    add("budget wrapper overhead < 10% of the request's JSON encoding (agent turn)", f"{share:+.1%}", share < 0.10)
    return out + report_peers.targets(results)


def store_table(results: dict[str, Any], size: int) -> str:
    med = _medians(results["store"]["rows"])
    lines = ["| operation | raw sqlite3 (limit) | naive | memkit | memkit/limit | memkit vs naive |",
             "|---|---:|---:|---:|---:|---:|"]
    for op in OPERATIONS:
        raw, naive, kit = (med.get((size, op, c)) for c in CONTENDERS)
        if kit is None:
            continue
        lines.append(f"| {op} | {_fmt_time(raw)} | {_fmt_time(naive)} | {_fmt_time(kit)} "
                     f"| {raw / kit:.2f} | {naive / kit:.1f}x |")
    return "\n".join(lines)


def plot(results: dict[str, Any], path: Path) -> None:
    """One panel per operation: median time per call against size, log-log, one line per contender."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    med = _medians(results["store"]["rows"])
    sizes = sorted({r["size"] for r in results["store"]["rows"]})
    styles = {"raw sqlite3": ("tab:gray", "--", "s"), "naive": ("tab:red", ":", "v"), "memkit": ("tab:blue", "-", "o")}
    with_peers = bool(results.get("peers") or results.get("window_peers"))
    fig = plt.figure(figsize=(15, 10.5 if with_peers else 7))
    grid = fig.add_gridspec(3 if with_peers else 2, 4)
    axes = np.array([[fig.add_subplot(grid[r, c]) for c in range(4)] for r in range(2)])
    for ax in axes.flat[1:]:
        ax.sharex(axes.flat[0])
    for ax, op in zip(axes.flat, OPERATIONS):
        for contender in CONTENDERS:
            color, line, marker = styles[contender]
            ys = [med[(n, op, contender)] * 1e3 for n in sizes]
            ax.plot(sizes, ys, color=color, linestyle=line, marker=marker, label=contender)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_xticks(sizes, [f"{n // 1000}k" if n >= 1000 else str(n) for n in sizes])
        ax.minorticks_off()
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes[:, 0]:
        ax.set_ylabel("median ms per call (log)")
    for ax in axes[1]:
        ax.set_xlabel("records in the store (log)")
    last = axes.flat[len(OPERATIONS)]
    last.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    last.legend(handles, labels, loc="center", title="contender", frameon=False)
    if with_peers:
        report_peers.plot([fig.add_subplot(grid[2, c]) for c in range(4)], results)
    fig.suptitle(f"memkit store operations against the raw SQLite limit and the naive way "
                 f"(synchronous={results['meta']['synchronous']}, medians of {results['meta']['rounds']} rounds)"
                 + ("; bottom row: against its peers" if with_peers else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(results: dict[str, Any], notes: str) -> str:
    meta = results["meta"]
    out = [
        "# memkit benchmarks",
        "",
        f"Written by `{meta['command']}` on {meta['date']}. Machine: {meta['cores']} cores, {meta['platform']}, "
        f"Python {meta['python']}, SQLite {meta['sqlite']}. Every contender ran in the same process, "
        f"alternating in rotating order, {meta['rounds']} rounds; times are medians over rounds of the mean "
        f"time per call. Durability for every contender: WAL, `synchronous={meta['synchronous']}`.",
        "",
        "Ratios are speeds (bigger is better for memkit): **memkit/limit** = raw time / memkit time "
        "(1.00 = as fast as bare SQL; the target is ≥ 0.5), **memkit vs naive** = naive time / memkit time.",
        "",
        "![store operations by size](results.png)",
        "",
        "## Targets",
        "",
        "| target | measured | holds |",
        "|---|---|---|",
    ]
    for t in targets(results):
        out.append(f"| {t['target']} | {t['measured']} | {'yes' if t['holds'] else '**no**'} |")
    out += [""] + report_peers.markdown(results)
    store = results["store"]
    sizes = sorted({r["size"] for r in store["rows"]})
    out += ["## Store: median time per call", ""]
    for size in sizes:
        load = next((l for l in store["loads"] if l["size"] == size), {})
        users = load.get("users", "?")
        out += [f"### {size:,} records ({users} users)", "", store_table(results, size), ""]
    out += ["Loading (not timed against anything; how long the setup took):", "",
            "| records | " + " | ".join(k for k in store["loads"][0] if k not in ("size", "users")) + " |",
            "|---:|" + "---:|" * (len(store["loads"][0]) - 2)]
    for load in store["loads"]:
        out.append(f"| {load['size']:,} | " + " | ".join(f"{v} s" for k, v in load.items()
                                                        if k not in ("size", "users")) + " |")
    out += ["", "Agreement (the same questions to every contender after timing; answers must be identical):", "",
            "| records | operation | questions | non-empty answers | disagreements |", "|---:|---|---:|---:|---:|"]
    for c in store["checks"]:
        out.append(f"| {c['size']:,} | {c['operation']} | {c['questions']} | {c['non_empty']} | {c['disagreements']} |")
    budget = results["budget"]
    out += ["", "## Budget wrapper", "",
            f"A typical agent turn: {budget['request_chars']:,} characters of canonical JSON (system prompt, "
            "4 tool schemas, 8 retrieved records, 8 history exchanges, 2 tool round trips; the retrieval report "
            "on 12 candidates rides along for the packing report). The wrapper "
            "encodes the request once and that text is what a wire model sends, so its overhead is what "
            "measuring and trimming add to the encoding sending needs anyway. The contenders run "
            "interleaved call by call; the overhead is the difference of their medians. The last column is "
            "what reading the breakdown by part (`Measurement.parts`, counted on first read) adds.", "",
            f"| case | {ENCODE} | {WRAPPED} | overhead | overhead / encoding | parts read |",
            "|---|---:|---:|---:|---:|---:|"]
    bmed = {(r["case"], r["contender"]): r["median_s"] for r in budget["rows"]}
    for case in dict.fromkeys(r["case"] for r in budget["rows"]):
        enc, wrapped, parts = bmed[(case, ENCODE)], bmed[(case, WRAPPED)], bmed[(case, WITH_PARTS)]
        out.append(f"| {case} | {_fmt_time(enc)} | {_fmt_time(wrapped)} | {_fmt_time(wrapped - enc)} "
                   f"| {(wrapped - enc) / enc:+.1%} | {_fmt_time(parts - wrapped)} |")
    out += ["", "Checks: " + "; ".join(
        f"{c['case']}: the measured size {'is' if c['measured_equals_encoded'] else '**is not**'} that of the "
        f"messages handed over, the text sent {'equals' if c['sent_equals_unmeasured'] else '**differs from**'} "
        f"the unmeasured encoding, parts {'add up' if c['parts_add_up'] else '**do not add up**'}, sent={c['sent']}, "
        f"trimmed {c['trimmed']}" for c in budget["checks"])]
    window = results.get("window")
    out += ["", "## Short-term window", ""]
    if window and window.get("table"):
        out += ["From `bench/bench_window.py`, run by this suite (the script's own runs write "
                "`bench/results_window.md`):", "",
                window["table"].strip()]
    else:
        out.append(f"Not measured in this run: {window['status'] if window else 'skipped (--no-window)'}.")
    nb = results.get("notebooks")
    out += ["", "## Notebook suite", ""]
    if nb and nb.get("wall_s") is not None:
        out.append(f"`pytest notebooks --nbval` over {nb['notebooks']} notebooks: **{nb['wall_s']} s** wall "
                   f"(exit code {nb['exit_code']}; {nb['summary']}).")
    else:
        out.append(f"Not measured in this run: {nb['status'] if nb else 'skipped (--no-notebooks)'}.")
    out += ["", notes.strip(), ""]
    return "\n".join(out)
