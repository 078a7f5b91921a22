"""The one report: every suite's figures into bench/RESULTS.md (and results.png, pg_writers.png).

RESULTS.md is a list of blocks, each starting at a `# ` or `## ` heading. A suite's run replaces the
blocks it writes and keeps every other block where it is: the store suites' block (title, targets,
peers, window, store, budget, notebook suite and NOTES.md) goes at the top, any other suite's section
in the place of its older self (at the end the first time).

Every section is a template of sections.md (its prose, with `{slots}`) filled by a few lines over
one vocabulary: `table` (a markdown table from a heading and rows), `target` (what is wanted, what
was measured, held or not), `lowest` (a ratio target judged on its worst case) and `fill`. Ratios
are speeds, so bigger is better for memkit: `memkit/limit` = raw time / memkit time, `memkit vs
naive` = naive time / memkit time, and against the peers **peer ÷ memkit** of times (for writers,
memkit's writes/s ÷ the peer's).
"""

from __future__ import annotations

import datetime as dt
import math
import platform
import re
import statistics
import string
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .budget_bench import ENCODE, WITH_PARTS, WRAPPED
from .peer_bench import FSYNC, MEMKIT, MEMKIT_INDEXED, PEER_OPERATIONS, PEERS, WAL_PEER, WRITE_OPERATIONS, \
    own_pages_probe
from .store_bench import CONTENDERS, OPERATIONS, SMALL_OPERATIONS, SMALL_TARGET
from .window_bench import APPEND, PAIRS, READ, ROUND_TRIP
from .window_bench import CONTENDERS as WINDOW_CONTENDERS

NORMAL_RATIO, OWN_SYNC_BUDGET, WRITERS_RATIO, WINDOW_RATIO, READ_RATIO = 0.8, 1.5, 0.75, 1.0, 1.5
"""Issue 26 at NORMAL (each write at least 0.8 of SqliteStore (WAL)'s speed: retired by issue 36, still
shown) and issue 36 at FULL (each write within 1.5 times the sync of its own page count, `PagesProbe`);
issue 15's writers (issue 36: 0.75), window and reads."""
WRITERS_FAIR = 0.25
"""Issue 36: in every round of the writers suite, memkit's slowest process makes at least this share of the mean."""
PAGES_AT_MOST = {"put (new key)": 5.0, "put (update)": 4.5, "delete": 5.5}
"""Issue 36: memkit's WAL pages per write at the bench's sizes (7.32 / 5.23 / 8.38 at schema 14)."""
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
    """One suite's section (its first line its `## ` heading) in the place of its older self in `path`,
    or at the end the first time; every other block is kept as it is, where it is.

    In place, so that a run of one suite (`python -m bench notebooks --names 09`) changes only its
    figures in RESULTS.md's diff, instead of moving its section below the others.
    """
    new = _blocks(section)
    headings = {b.splitlines()[0] for b in new}
    old = _blocks(path.read_text(encoding="utf-8") if path.exists() else "")
    # Where the first older block of these headings was (the blocks before it are all kept).
    at = next((i for i, b in enumerate(old) if b.splitlines()[0] in headings), len(old))
    kept = [b for b in old if b.splitlines()[0] not in headings]
    path.write_text("\n\n".join(kept[:at] + new + kept[at:]) + "\n", encoding="utf-8")


def fmt_time(seconds: float | None, us_digits: int = 1) -> str:
    """A time in ms (from 1 ms) or µs, or an en dash where there is none."""
    if seconds is None or seconds != seconds:
        return DASH
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.{us_digits}f} µs"


def ratio(a: float | None, b: float | None) -> str:
    """`a / b` to two places, or an en dash where either is missing."""
    return f"{a / b:.2f}" if a and b else DASH


def table(head: list[str], rows: Iterable[Iterable[Any]], align: str = "") -> str:
    """A markdown table: its heading cells, its rows' cells; `align` one letter a column (l left,
    r right), by default the first column left and the others right."""
    align = align or "l" + "r" * (len(head) - 1)
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "".join("---:|" if a == "r" else "---|" for a in align),
                      *("| " + " | ".join(map(str, row)) + " |" for row in rows)])


TEMPLATES = dict(re.findall(r"(?ms)^<!-- (\S+) -->\n(.*?)(?=^<!-- |\Z)",
                            (Path(__file__).with_name("sections.md")).read_text(encoding="utf-8")))
"""Each section's text, its figures and tables as `{slots}` (sections.md)."""


def fill(name: str, **slots: Any) -> str:
    """The template `name` with its slots filled; a paragraph with a slot given as None is left out."""
    kept = [p for p in TEMPLATES[name].strip().split("\n\n")
            if all(slots.get(f) is not None for _, f, _, _ in string.Formatter().parse(p) if f)]
    return re.sub(r"\n{3,}", "\n\n", "\n\n".join(kept).format(**slots)).strip() + "\n"


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


def _small_ratios(small: dict[str, Any]) -> dict[str, float]:
    """memkit/limit of each operation of the small store's search: the bare median over memkit's."""
    bare, kit = small["contenders"]
    med = _medians(small["rows"], "operation")
    return {op: med[(op, bare)] / med[(op, kit)] for op in SMALL_OPERATIONS}


def _small_targets(small: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 36 item 5, each operation: memkit/limit at least `SMALL_TARGET`, and the same answers by
    the same statement as the bare one (a ratio against another query would mean nothing)."""
    checks = {c["operation"]: c for c in small["checks"]}
    out = []
    for op, value in _small_ratios(small).items():
        c = checks[op]
        wrong = c["disagreements"] or c["same_statement"] != c["questions"]
        spread = min(small["round_ratios"][op]), max(small["round_ratios"][op])
        measured = f"{value:.2f} (rounds {spread[0]:.2f}-{spread[1]:.2f})" + (
            f"; answers differ on {c['disagreements']}, memkit ran other SQL on "
            f"{c['questions'] - c['same_statement']} of {c['questions']} questions" if wrong else "")
        out.append(target(f"{op} on {small['users']} users x {small['records_per_user']} records, limit "
                          f"{small['limit']}: memkit/limit ≥ {SMALL_TARGET}", measured,
                          value >= SMALL_TARGET and not wrong))
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
        out.append(target(f"{op} at NORMAL: {WAL_PEER} ÷ memkit ≥ {NORMAL_RATIO} (retired, shown)",
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
        after, most = pages[MEMKIT][op]["total"], PAGES_AT_MOST[op]
        out.append(target(f"{op}: at most {most} WAL pages",
                          f"{after:.2f} pages against {pages[WAL_PEER][op]['total']:.2f} for {WAL_PEER}",
                          after <= most))
    return out + [lowest(f"{op}: every peer ÷ memkit ≥ {READ_RATIO}",
                         {(s, p): med[(s, op, p)] / med[(s, op, MEMKIT)] for s in runs for p in PEERS}, READ_RATIO,
                         lambda k: f"{k[1]}, {k[0]}") for op in ("get", "search (hit)", "search (miss)")]


def _writers_target(writers: dict[str, Any]) -> list[dict[str, Any]]:
    wps = writers["median_writes_per_s"]
    ratio_ = wps["memkit"] / wps[WAL_PEER]
    mine = [r for r in writers["rounds"] if r["contender"] == "memkit"]
    out = [target(f"{writers['processes']} writer processes: memkit ÷ {WAL_PEER} writes/s ≥ {WRITERS_RATIO}",
                  f"{ratio_:.2f} ({wps['memkit']:.0f} against {wps[WAL_PEER]:.0f} writes/s)",
                  ratio_ >= WRITERS_RATIO and writers["all_found"])]
    if mine and "slowest_share" in mine[0]:
        out += [lowest(f"{writers['processes']} writer processes: memkit's slowest ÷ mean ≥ {WRITERS_FAIR} each round",
                       {r["round"]: r["slowest_share"] for r in mine}, WRITERS_FAIR, lambda k: f"round {k + 1}"),
                target(f"{writers['processes']} writer processes: memkit writes refused for a lock wait = 0",
                       str(sum(r["refused"] for r in mine)), sum(r["refused"] for r in mine) == 0)]
    return out


def _window_targets(window: dict[str, Any]) -> list[dict[str, Any]]:
    med = _medians(window["rows"], "synchronous", "history", "operation")
    cases = sorted({(r["synchronous"], r["history"]) for r in window["rows"]})
    pairs = [(kit, peer) for kit, peer in PAIRS if any(r["contender"] == kit for r in window["rows"])]
    return [lowest(f"window {op}: {peer} ÷ {kit} ≥ {WINDOW_RATIO} at every history",
                   {c: med[(*c, op, peer)] / med[(*c, op, kit)] for c in cases}, WINDOW_RATIO,
                   lambda c: f"at {c[1]} turns, {c[0]}") for kit, peer in pairs for op in (READ, APPEND)]


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target of the store suites that this run measured, with the measured value and hold/miss."""
    out = _store_targets(results["store"]) if results.get("store") else []
    out += _small_targets(results["search_small"]) if results.get("search_small") else []
    out += [_budget_target(results["budget"])] if results.get("budget") else []
    out += _peer_targets(results["peers"], results.get("write_profile")) if results.get("peers") else []
    out += _writers_target(results["writers"]) if results.get("writers") else []
    return out + (_window_targets(results["window_peers"]) if results.get("window_peers") else [])


def _targets_table(found: list[dict[str, Any]]) -> str:
    return table(["target", "measured", "holds"], ([t["target"], t["measured"], "yes" if t["holds"] else "**no**"]
                                                   for t in found), "lll")


# -- the store suites: sections -------------------------------------------------------------------

def _small_section(small: dict[str, Any]) -> str:
    """The small store's search: memkit against the statement it runs, each round's ratio, agreement."""
    bare, kit = small["contenders"]
    med, ratios = _medians(small["rows"], "operation"), _small_ratios(small)
    cpu = {(r["operation"], r["contender"]): r["cpu_median_s"] for r in small["rows"]}
    rows = []
    for op in SMALL_OPERATIONS:
        each, cpu_bare, cpu_kit = small["round_ratios"][op], cpu[(op, bare)], cpu[(op, kit)]
        rows.append([op, fmt_time(med[(op, bare)]), fmt_time(med[(op, kit)]), f"{ratios[op]:.2f}",
                     f"≥ {SMALL_TARGET}, {'held' if ratios[op] >= SMALL_TARGET else '**missed**'}",
                     ", ".join(f"{x:.2f}" for x in (min(each), statistics.median(each), max(each))),
                     f"{fmt_time(cpu_bare)}, {fmt_time(cpu_kit)}", ratio(cpu_bare, cpu_kit)])
    return fill("search-small", records=f"{small['users'] * small['records_per_user']:,}", users=small["users"],
                per_user=small["records_per_user"], limit=small["limit"], date=small["date"],
                load=" / ".join(f"{x:.2f}" for x in small["load"]), rounds=small["rounds"],
                calls=small["calls_per_round"], synchronous=small["synchronous"], table=table(
                    ["operation", bare, kit, "memkit/limit", "target", "rounds' memkit/limit: lowest, median, highest",
                     f"CPU per call: {bare}, {kit}", "memkit/limit in CPU time"], rows, "lrrrllrr"),
                checks=table(["operation", "distinct questions", "non-empty answers", "disagreements",
                              "memkit ran the bare statement alone"],
                             ([c["operation"], c["questions"], c["non_empty"], c["disagreements"],
                               c["same_statement"]] for c in small["checks"])))


def _store_section(store: dict[str, Any], small: dict[str, Any] | None = None) -> str:
    med = _medians(store["rows"], "size", "operation")
    sizes = [f"### {x['size']:,} records ({x['users']} users)\n\n" + table(
        ["operation", "raw sqlite3 (limit)", "naive", "memkit", "memkit/limit", "memkit vs naive"],
        ([op, *(fmt_time(med[(n, op, c)]) for c in CONTENDERS), ratio(med[(n, op, "raw sqlite3")],
          med[(n, op, "memkit")]), f"{med[(n, op, 'naive')] / med[(n, op, 'memkit')]:.1f}x"]
         for n in [x["size"]] for op in OPERATIONS if (n, op, "memkit") in med)) for x in store["loads"]]
    columns = [k for k in store["loads"][0] if k not in ("size", "users")]
    return fill("store", sizes="\n\n".join(sizes), loads=table(
        ["records", *columns], ([f"{x['size']:,}", *(f"{x[k]} s" for k in columns)] for x in store["loads"]),
        "r" * (len(columns) + 1)), checks=table(
        ["records", "operation", "questions", "non-empty answers", "disagreements"],
        ([f"{c['size']:,}", c["operation"], c["questions"], c["non_empty"], c["disagreements"]]
         for c in store["checks"]), "rlrrr"), search_small=_small_section(small) if small else None)


def _budget_section(budget: dict[str, Any]) -> str:
    med = _medians(budget["rows"], "case")
    rows = [[case, fmt_time(enc), fmt_time(wrapped), fmt_time(wrapped - enc), f"{(wrapped - enc) / enc:+.1%}",
             fmt_time(parts - wrapped)] for case in dict.fromkeys(r["case"] for r in budget["rows"])
            for enc, wrapped, parts in [(med[(case, ENCODE)], med[(case, WRAPPED)], med[(case, WITH_PARTS)])]]
    checks = "; ".join(
        f"{c['case']}: the measured size {'is' if c['measured_equals_encoded'] else '**is not**'} that of the messages "
        f"handed over, the text sent {'equals' if c['sent_equals_unmeasured'] else '**differs from**'} the unmeasured "
        f"encoding, parts {'add up' if c['parts_add_up'] else '**do not add up**'}, sent={c['sent']}, trimmed "
        f"{c['trimmed']}" for c in budget["checks"])
    return fill("budget", chars=f"{budget['request_chars']:,}", checks=checks, table=table(
        ["case", ENCODE, WRAPPED, "overhead", "overhead / encoding", "parts read"], rows))


def _peer_store_section(peers: dict[str, Any]) -> str:
    med = _medians(peers["rows"], "synchronous", "operation")
    names = {r["contender"] for r in peers["rows"]}
    extra = [MEMKIT_INDEXED] if MEMKIT_INDEXED in names else []
    probes = [p for p in (own_pages_probe(MEMKIT), own_pages_probe(WAL_PEER)) if p in names]
    head = ["operation", MEMKIT, *extra, *PEERS, *(f"{p} ÷ memkit" for p in PEERS), "fsync", "memkit in fsyncs",
            f"{WAL_PEER} in fsyncs", *probes, *(["memkit ÷ own-page sync"] if probes else []),
            *([f"{WAL_PEER} ÷ own-page sync"] if len(probes) == 2 else [])]
    tables = []
    for sync in [s for s in ("FULL", "NORMAL") if any(r["synchronous"] == s for r in peers["rows"])]:
        rows = []
        for op in PEER_OPERATIONS:
            kit, times, fsync = med[(sync, op, MEMKIT)], [med[(sync, op, p)] for p in PEERS], med.get((sync, op, FSYNC))
            rows.append([op, fmt_time(kit), *(fmt_time(med.get((sync, op, e))) for e in extra),
                         *map(fmt_time, times), *(f"{t / kit:.2f}" for t in times), fmt_time(fsync), ratio(kit, fsync),
                         ratio(med[(sync, op, WAL_PEER)], fsync), *(fmt_time(med.get((sync, op, p))) for p in probes),
                         *([ratio(kit, med.get((sync, op, probes[0])))] if probes else []),
                         *([ratio(med[(sync, op, WAL_PEER)], med.get((sync, op, probes[1])))]
                           if len(probes) == 2 else [])])
        tables.append(f"**synchronous={sync}**\n\n" + table(head, rows))
    return fill("peer-store", size=f"{peers['rows'][0]['size']:,}", users=peers["loads"][0]["users"],
                wal_peer=WAL_PEER, fsync_call=peers.get("fsync_call") or "fsync", tables="\n\n".join(tables),
                own_sync_budget=OWN_SYNC_BUDGET if probes else None, indexed=extra[0] if extra else None,
                settings=table(["run", "contender", "journal_mode", "synchronous", "trigram index"],
                               ([s["synchronous_run"], s["contender"], s["journal_mode"], s["synchronous"],
                                 s.get("trigram_index", DASH)] for s in peers["settings"]), "lllll"),
                checks=table(["run", "check", "questions", "non-empty", "disagreements"],
                             ([c["synchronous"], c["operation"], c["questions"], c["non_empty"], c["disagreements"]]
                              for c in peers["checks"]), "llrrr"))


def _profile_section(profile: dict[str, Any]) -> str:
    """WAL pages per write, and a new key's pages by B-tree."""
    pages = profile["pages"]
    names, ops = list(pages), list(WRITE_OPERATIONS)
    trees = sorted({t for name in names for t in pages[name][ops[0]] if t != "total"},
                   key=lambda t: (-max(pages[n][ops[0]].get(t, 0) for n in names), t))
    return fill("profile", profile_size=f"{profile['size']:,}", writes=profile["writes"],
                pages=table(["contender", *ops], ([n, *(f"{pages[n][op]['total']:.1f}" for op in ops)] for n in names)),
                trees=table(["B-tree", *names], ([t, *(f"{pages[n][ops[0]].get(t, 0):.2f}" for n in names)]
                                                 for t in trees)))


def _writers_section(writers: dict[str, Any]) -> str:
    fair = "slowest_share" in writers["rounds"][0]

    def row(name: str, median: float) -> list[str]:
        mine = [r for r in writers["rounds"] if r["contender"] == name]
        return [name, f"{median:.0f}", ", ".join(f"{r['writes_per_s']:.0f}" for r in mine),
                *([", ".join(f"{r['slowest_share']:.2f}" for r in mine),
                   "; ".join(" ".join(f"{n:,}" for n in r["per_worker"]) for r in mine),
                   str(sum(r["refused"] for r in mine))] if fair else []),
                f"{'yes' if sum(writers['found'][name].values()) == writers['written'][name] else '**no**'} "
                f"({writers['written'][name]:,})"]

    solo = writers.get("solo_writes_per_s")
    alone = table(["contender", "one writer: median writes/s", f"{writers['processes']} writers ÷ one writer"],
                  ([name, f"{solo[name]:.0f}", f"{writers['median_writes_per_s'][name] / solo[name]:.2f}"]
                   for name in solo)) if solo else None
    return fill("writers", processes=writers["processes"], seconds=f"{writers['seconds']:g}", alone=alone,
                solo_rounds=len(writers.get("solo_rounds", [])) // 2,
                writer_rounds=len(writers["rounds"]) // 2, writer_sync=writers["synchronous"], writers=table(
                    ["contender", "median writes/s", "rounds (writes/s)",
                     *(["slowest ÷ mean, each round", "writes per process, each round", "refused"] if fair else []),
                     "keys written = keys found"],
                    (row(name, median) for name, median in writers["median_writes_per_s"].items()),
                    "lrl" + ("lllr" if fair else "l")))


def _window_section(window: dict[str, Any]) -> str:
    med = _medians(window["rows"], "synchronous", "history", "operation")
    cases = sorted({(r["synchronous"], r["history"]) for r in window["rows"]}, key=lambda c: (c[0] != "FULL", c[1]))
    names = [c for c in WINDOW_CONTENDERS if any(r["contender"] == c for r in window["rows"])]
    pairs = [(kit, peer) for kit, peer in PAIRS if kit in names]
    redis_kit = pairs[-1][0]  # the window on a server, beside the floor of a call to it
    rows = [[sync, f"{history:,}", op, *(fmt_time(med[(sync, history, op, c)]) for c in names),
             *(f"{med[(sync, history, op, peer)] / med[(sync, history, op, kit)]:.2f}" for kit, peer in pairs),
             fmt_time(ping), ratio(med[(sync, history, op, redis_kit)], ping)]
            for sync, history in cases for op in (READ, APPEND)
            for ping in [med.get((sync, history, op, ROUND_TRIP))]]
    return fill("window", redis=window["redis"], rounds=window["rounds"], reads=window["reads"],
                appends=window["appends"], round_trip=ROUND_TRIP, redis_kit=redis_kit,
                table=table(["run", "history", "operation", *names, *(f"{peer} ÷ {kit}" for kit, peer in pairs),
                             ROUND_TRIP, f"{redis_kit} in round trips"], rows, "lrl" + "r" * (len(rows[0]) - 3)),
                settings=table(["run", "contender", "journal_mode", "synchronous"],
                               ([s["synchronous_run"], s["contender"], s["journal_mode"], s["synchronous"]]
                                for s in window["settings"]), "llll"),
                checks=table(["run", "history", "check", "sessions", "disagreements"],
                             ([c["synchronous"], f"{c['history']:,}", c["check"], c["sessions"], c["disagreements"]]
                              for c in window["checks"]), "lrlrr"))


def markdown(results: dict[str, Any], notes: str) -> str:
    """The store suites' block of RESULTS.md: title, targets, peers, window, store, budget, notebooks, notes."""
    parts = [section(results[key]) for key, section in (("peers", _peer_store_section), ("write_profile",
             _profile_section), ("writers", _writers_section)) if results.get(key)]
    window, nb = results.get("window_peers"), results.get("notebooks")
    return fill("store-suites", **{k: v for k, v in results["meta"].items() if k != "wall_s"},
                targets=_targets_table(targets(results)),
                peers="\n".join(parts) or f"Not measured in this run: {results.get('peers_status', 'skipped')}.",
                window=_window_section(window) if window else
                f"Not measured in this run: {results.get('window_status', 'skipped (--no-window)')}.",
                store=_store_section(results["store"], results.get("search_small")) if results.get("store") else
                _small_section(results["search_small"]) if results.get("search_small") else "",
                budget=_budget_section(results["budget"]) if results.get("budget") else "",
                notebook_suite=f"`pytest notebooks --nbval` over {nb['notebooks']} notebooks: **{nb['wall_s']} s** "
                f"wall (exit code {nb['exit_code']}; {nb['summary']})." if nb and nb.get("wall_s") is not None else
                f"Not measured in this run: {nb['status'] if nb else 'skipped (--no-notebooks)'}.", notes=notes.strip())


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
        histories = sorted({r["history"] for r in window["rows"] if r["synchronous"] == sync})
        keys = [(op, h) for op in (READ, APPEND) for h in histories]
        if keys:
            pairs = [(k, p) for k, p in PAIRS if (sync, histories[0], READ, k) in wm]
            panels.append((f"window vs sessions, {sync}", [f"{op.split()[0]} @{h}" for op, h in keys],
                           {f"{p} ÷ {k}": [wm[(sync, h, op, p)] / wm[(sync, h, op, k)] for op, h in keys]
                            for k, p in pairs}, None))
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
    return fill("postgres", **meta, target=PG_TARGET, plot=PG_PLOT, notes=(results.get("notes") or "").strip(),
                store=table(["records", "operation", "search index", "memkit µs", "raw psycopg µs", "memkit/limit",
                             "target"], ([f"{r['size']:,}", r["operation"], r["search"], f"{r['memkit_us']:.1f}",
                                          f"{r['raw_us']:.1f}", f"{r['ratio']:.2f}",
                                          "held" if r["ratio"] >= PG_TARGET else "MISSED"] for r in store["rows"]),
                            "rllrrrl"),
                checks="; ".join(f"{c['size']:,} records: {c['questions']} questions, {c['disagreements']} answers "
                                 "differed" for c in store["checks"]),
                most=max(p["processes"] for p in curve["points"]), seconds=curve["seconds"],
                curve_rounds=curve["rounds"], lost=curve["lost_writes"], refused=curve["refused_writes"],
                curve=table(["writer processes", "SQLite (WAL) writes/s", "PostgreSQL writes/s"],
                            ([n, *(f"{by[(b, n)]['writes_per_s']:.0f} ({by[(b, n)]['min']:.0f}-{by[(b, n)]['max']:.0f})"
                                   for b in ("SQLite (WAL)", "PostgreSQL"))]
                             for n in sorted({p["processes"] for p in curve["points"]})), "rrr"))


# -- the suites that run on their own -------------------------------------------------------------

CHAT_ROWS = ("python -c pass", "chat, first (cold)", "chat, median of three", "chat, later messages")


def chat_markdown(results: dict[str, Any]) -> str:
    """The chat section: medians, ratios to `python -c pass`, memkit's share, the targets."""
    medians = results["medians"]
    bare, three = medians["python -c pass"], medians["chat, median of three"]
    held = [("median of three consecutive chats", f"≤ {CHAT_TOTAL_S} s", f"{three:.3f} s", three <= CHAT_TOTAL_S),
            ("memkit's share of it", f"≤ {CHAT_SHARE_S} s", f"{three - bare:.3f} s", three - bare <= CHAT_SHARE_S)]
    return fill("chat", rounds=results["rounds"], cpus=results["cpus"], load=f"{results['load']:.1f}",
                baseline=next((f"{name.removeprefix('chat, ')}: {median:.3f} s against {three:.3f} s"
                               for name, median in medians.items() if name not in CHAT_ROWS), None),
                table=table(["invocation", "median", "\u00d7 `python -c pass`", "memkit's share", "samples"],
                            ([name, f"{median:.3f} s", f"{median / bare:.1f}", "" if name == "python -c pass" else
                              f"{median - bare:.3f} s", len(results["samples"][name])]
                             for name, median in medians.items()), "lllll"),
                targets=table(["target", "wanted", "measured", "held"],
                              ([what, wanted, got, "yes" if ok else "**no**"] for what, wanted, got, ok in held),
                              "llll"))


def inspector_markdown(rows: list[tuple[str, float, float | None]], records: int, users: int, rounds: int) -> str:
    """The inspector section: each click's plain method and with the widget displayed (ms)."""
    return fill("inspector", records=f"{records:,}", users=users, rounds=rounds, python=platform.python_version(),
                table=table(["click", "plain method (ms)", "with the widget (ms)", "widget / plain",
                             "of the 500 ms feedback line"],
                            ([name, f"{ms:.2f}", "" if widget is None else f"{widget:.2f}",
                              f"{widget / ms:.1f}" if widget is not None and ms > 0 else "",
                              f"{(widget if widget is not None else ms) / 500:.0%}"] for name, ms, widget in rows)))


def notebooks_markdown(results: dict[str, Any]) -> str:
    """The Run All section: per notebook its time, runs, kernel start, CPU, slowest cells, target."""
    def held(row: dict[str, Any]) -> str:
        wanted = NOTEBOOK_TARGET_S.get(row["notebook"][:2])
        return "" if wanted is None else f"≤ {wanted:.0f} s: " + ("held" if row["median_s"] <= wanted else "**missed**")
    rows = ([f"`{r['notebook']}`", f"{r['median_s']:.1f} s", " / ".join(f"{s:.1f}" for s in r["runs_s"]),
             f"{r['kernel_start_s']:.1f} s", DASH if r.get("cpu_s") is None else f"{r['cpu_s']:.1f} s",
             r["code_cells"], ", ".join(f"[{c['cell']}] {c['s']:.1f} s" for c in r["slowest"]),
             f"{r['stated_minutes']} min" if r["stated_minutes"] else DASH, held(r)] for r in results["notebooks"])
    meta = {"load_before": "?", "load_after": "?", **results["meta"]}
    total = sum(r["median_s"] for r in results["notebooks"] if "(" not in r["notebook"])
    return fill("notebooks", **{**meta, "note": f"{meta['note']} " if meta.get("note") else ""}, total=f"{total:.0f}",
                table=table(["notebook", "Run All", "runs", "kernel start", "CPU", "code cells", "slowest cells",
                             "class time", "target"], rows, "lrlrrrlrl"))


TRACKS: dict[str, dict[str, Any]] = {
    "A 90-minute taster": {
        "limit": 90, "notebooks": ["00", "03", "05"],
        "extra": {"closing: the cheat sheet, questions": 10}},
    # Six notebooks at their stated minutes made 181 of 180 with 07: 07 opens the second session.
    "A three-hour class": {
        "limit": 180, "notebooks": ["00", "01", "03", "04", "05", "06"],
        "extra": {"a break": 10, "closing: the cheat sheet, questions": 5}},
    # Room left for 10, the notebook most likely to grow; 12 needs 00 to 07, so it comes last.
    "A second three-hour session": {
        "limit": 180, "notebooks": ["02", "07", "10", "12"],
        "extra": {"a break": 10, "closing: questions": 5}},
    # With 11 at 25 minutes and 12 at 35 (their first cells), two breaks of 15 minutes made 483 of 480.
    "A full day": {
        "limit": 480, "notebooks": ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12"],
        "extra": {"two breaks of 10 minutes": 20, "lunch": 60}},
}
"""The teacher's guide's tracks: notebooks in order, the minutes of the class that are not a notebook,
and the minutes the track has (a full day: 9:00 to 17:00)."""

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "TEACHER_GUIDE.md"
TRACKS_START = "<!-- tracks: python -m bench --tracks --guide -->"
TRACKS_END = "<!-- /tracks -->"


def stated(notebooks: Path | None = None) -> dict[str, int | None]:
    """Each notebook's class minutes as its first cell states them now, by number ("00": 20).

    The tracks read the notebooks themselves, not the minutes notebook_times.json recorded when
    they were timed: a notebook whose first cell changes changes the guide's tables.
    """
    from .notebook_bench import NOTEBOOKS, stated_minutes
    folder = notebooks or NOTEBOOKS
    return {path.name[:2]: stated_minutes(path) for path in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}


def _track(title: str, track: dict[str, Any], rows: dict[str, dict[str, Any]],
           minutes: dict[str, int | None]) -> tuple[str, bool]:
    lines: list[list[Any]] = []
    total, missing = 0, []
    for number in track["notebooks"]:
        row, class_minutes = rows.get(number), minutes.get(number)
        if row is None or class_minutes is None:
            missing.append(number)
            lines.append([f"`{number}`", "not measured yet" if row is None else "no time stated", DASH, DASH])
            continue
        run_all = math.ceil(row["median_s"] / 60)
        total += class_minutes + run_all
        lines.append([f"`{row['notebook']}`", class_minutes, f"{row['median_s']:.0f} s (≤ {run_all} min)",
                      class_minutes + run_all])
    for what, extra in track["extra"].items():
        total += extra
        lines.append([what, extra, DASH, extra])
    limit = track["limit"]
    fits = limit is None or (total <= limit and not missing)
    verdict = "" if limit is None else f" of {limit}: " + ("fits" if fits else "**does not fit**")
    note = f" (without {', '.join(missing)}: not measured, or no time stated)" if missing else ""
    return (f"**{title}**\n\n" + table(["notebook", "class (stated)", "Run All (measured)", "minutes"], lines)
            + f"\n| **total** | | | **{total}**{verdict}{note} |"), fits


def tracks(results: dict[str, Any], minutes: dict[str, int | None] | None = None) -> str:
    """The guide's track tables: per notebook the class minutes its first cell states (`minutes`, by
    default read from the notebooks now) and its measured Run All (notebook_times.json)."""
    return "\n\n".join(text for text, _ in _tracks(results, minutes)) + "\n"


def tracks_that_do_not_fit(results: dict[str, Any], minutes: dict[str, int | None] | None = None) -> list[str]:
    """The titles of the tracks over their limit (or missing a notebook's minutes)."""
    return [title for title, (_, fits) in zip(TRACKS, _tracks(results, minutes), strict=True) if not fits]


def _tracks(results: dict[str, Any], minutes: dict[str, int | None] | None) -> list[tuple[str, bool]]:
    rows = {row["notebook"][:2]: row for row in results["notebooks"] if "(" not in row["notebook"]}
    minutes = stated() if minutes is None else minutes
    return [_track(title, track, rows, minutes) for title, track in TRACKS.items()]


def guide_tracks(guide: str) -> str:
    """The track tables as the guide holds them (between its tracks markers)."""
    if TRACKS_START not in guide or TRACKS_END not in guide:
        raise ValueError(f"the guide has no {TRACKS_START} ... {TRACKS_END} block for the track tables")
    return guide.split(TRACKS_START, 1)[1].split(TRACKS_END, 1)[0].strip("\n") + "\n"


def write_guide_tracks(path: Path, text: str) -> bool:
    """Put the track tables `text` between the guide's markers; True if the guide changed."""
    guide = path.read_text(encoding="utf-8")
    guide_tracks(guide)  # the markers are there, or a clear error
    before, rest = guide.split(TRACKS_START, 1)
    updated = f"{before}{TRACKS_START}\n{text.strip(chr(10))}\n{TRACKS_END}{rest.split(TRACKS_END, 1)[1]}"
    if updated != guide:
        path.write_text(updated, encoding="utf-8")
    return updated != guide


def semantic_markdown(results: dict[str, Any], threshold: float | None = None) -> str:
    """The section of retrieval by meaning: recall at 3, the threshold sweep, leaks, time at the quota
    (the tables at `threshold`, by default memkit's)."""
    if threshold is None:
        from memkit.semantic import DEFAULT_MIN_SIMILARITY as threshold
    chosen = next(s for s in results["sweep"] if s["threshold"] == threshold)
    glob, n = results["global"], chosen["questions"]

    def cell(keys: list[str], answer: str | None) -> str:
        return ", ".join(f"**{k}**" if k == answer else k for k in keys) or DASH
    return fill(
        "semantic", date=dt.date.today().isoformat(), machine=f"{platform.system()} {platform.machine()}",
        python=platform.python_version(), model=results["model"], load_s=f"{results['load_s']:.2f}",
        records=results["records"], n=n, threshold=threshold, leaked=sum(s["leaked"] for s in results["sweep"]),
        questions=results["questions"], thresholds=len(results["sweep"]), foreign=glob["with_foreign_records"],
        global_questions=glob["questions"], short=glob["fewer_than_3_own_after_filter"],
        recall=table(["ranking", "found", "recall at 3"],
                     ([label, f"{chosen['hits'][k]} of {n}", f"{chosen['recall'][k]:.2f}"]
                      for k, label in (("literal", "literal"), ("meaning", "by meaning"), ("combined", "combined")))),
        sweep=table(["threshold", "by meaning", "combined",
                     "records returned for the 3 no-answer questions (by meaning)"],
                    ([s["threshold"], f"{s['recall']['meaning']:.2f}", f"{s['recall']['combined']:.2f}",
                      s["no_answer_hits"]["meaning"]] for s in results["sweep"]), "rrrr"),
        rows=table(["user", "question", "answer", "similarity", "literal", "by meaning", "combined"],
                   ([r["user"], r["question"], r["answer"] or "(none)",
                     DASH if r["similarity"] is None else f"{r['similarity']:.2f}",
                     *(cell(r[k], r["answer"]) for k in ("literal", "meaning", "combined"))] for r in chosen["rows"]),
                   "lllrlll"),
        timing=table(["store", "records of the user", "users", "embed the question", "search by meaning",
                      "literal search", "retrieve (literal)", "retrieve (combined)"],
                     ([name, t["records_per_user"], t["users"], *(fmt_time(t[k], 0) for k in (
                         "embed_question", "search_by_meaning", "literal_search_many", "retrieve_literal",
                         "retrieve_combined"))] for name, t in results["timing"].items())))
