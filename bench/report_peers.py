"""The peers' part of RESULTS.md: issue 15's targets, the ratio tables and the settings checked.

Ratios are **peer ÷ memkit** of times (for the writers, memkit's writes/s ÷ the peer's), so above
1 means memkit is faster, as in the rest of the report.
"""

from __future__ import annotations

from typing import Any

from .peer_bench import FSYNC, MEMKIT, MEMKIT_INDEXED, PEER_OPERATIONS, PEERS, WAL_PEER
from .window_peers import CONTENDERS as WINDOW_CONTENDERS, MEMKIT as WINDOW_MEMKIT, ROUND_TRIP

WRITE_OPS = ("put (new key)", "put (update)", "delete")
READ_OPS = ("get", "search (hit)", "search (miss)")
FULL_RATIO, NORMAL_RATIO, FSYNC_BUDGET, WRITERS_RATIO, WINDOW_RATIO, READ_RATIO = 0.9, 0.5, 1.5, 0.9, 1.0, 1.5


def _fmt(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"


def _store_medians(peers: dict[str, Any]) -> dict[tuple[str, str, str], float]:
    return {(r["synchronous"], r["operation"], r["contender"]): r["median_s"] for r in peers["rows"]}


def _window_medians(window: dict[str, Any]) -> dict[tuple[str, Any, str, str], float]:
    return {(r["synchronous"], r["history"], r["operation"], r["contender"]): r["median_s"]
            for r in window["rows"]}


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 15's targets that this run measured, each with the measured value and hold/miss."""
    out: list[dict[str, Any]] = []

    def add(target: str, measured: str, holds: bool) -> None:
        out.append({"target": target, "measured": measured, "holds": holds})

    peers = results.get("peers")
    if peers:
        med = _store_medians(peers)
        runs = sorted({r["synchronous"] for r in peers["rows"]})
        for sync, floor in (("FULL", FULL_RATIO), ("NORMAL", NORMAL_RATIO)):
            if sync not in runs:
                continue
            for op in WRITE_OPS:
                ratio = med[(sync, op, WAL_PEER)] / med[(sync, op, MEMKIT)]
                add(f"{op} at {sync}: {WAL_PEER} ÷ memkit ≥ {floor}", f"{ratio:.2f}", ratio >= floor)
        if "FULL" in runs:
            for op in WRITE_OPS:
                fsyncs = med[("FULL", op, MEMKIT)] / med[("FULL", op, FSYNC)]
                add(f"{op} at FULL: memkit within {FSYNC_BUDGET} fsyncs (memkit ÷ fsync ≤ {FSYNC_BUDGET})",
                    f"{fsyncs:.2f} fsyncs ({_fmt(med[('FULL', op, MEMKIT)])} / {_fmt(med[('FULL', op, FSYNC)])})",
                    fsyncs <= FSYNC_BUDGET)
        for op in READ_OPS:
            ratios = {(s, p): med[(s, op, p)] / med[(s, op, MEMKIT)] for s in runs for p in PEERS}
            worst = min(ratios, key=ratios.get)
            add(f"{op}: every peer ÷ memkit ≥ {READ_RATIO}", f"lowest {ratios[worst]:.2f} ({worst[1]}, {worst[0]})",
                ratios[worst] >= READ_RATIO)
    writers = results.get("writers")
    if writers:
        wps = writers["median_writes_per_s"]
        ratio = wps["memkit"] / wps[WAL_PEER]
        add(f"{writers['processes']} writer processes: memkit ÷ {WAL_PEER} writes/s ≥ {WRITERS_RATIO}",
            f"{ratio:.2f} ({wps['memkit']:.0f} against {wps[WAL_PEER]:.0f} writes/s)",
            ratio >= WRITERS_RATIO and writers["all_found"])
    window = results.get("window_peers")
    if window:
        wmed = _window_medians(window)
        cases = sorted({(r["synchronous"], r["history"]) for r in window["rows"] if r["history"] is not None})
        for op in ("read last 10", "append"):
            for peer in WINDOW_CONTENDERS[1:]:
                ratios = {c: wmed[(*c, op, peer)] / wmed[(*c, op, WINDOW_MEMKIT)] for c in cases}
                worst = min(ratios, key=ratios.get)
                add(f"window {op}: {peer} ÷ memkit ≥ {WINDOW_RATIO} at every history",
                    f"lowest {ratios[worst]:.2f} (at {worst[1]} turns, {worst[0]})", ratios[worst] >= WINDOW_RATIO)
    return out


def store_section(peers: dict[str, Any]) -> list[str]:
    med = _store_medians(peers)
    runs = [s for s in ("FULL", "NORMAL") if any(r["synchronous"] == s for r in peers["rows"])]
    size = peers["rows"][0]["size"]
    users = peers["loads"][0]["users"] if peers.get("loads") else "?"
    out = [f"langgraph `SqliteStore` on the store benchmark's workload at {size:,} records ({users} users), "
           "memkit and both peer configurations (and the fsync probe, for writes) alternating in one process. "
           f"Last columns: memkit's and {WAL_PEER}'s times in fsyncs of this disk "
           f"({peers.get('fsync_call') or 'fsync'} after a 4 KiB write, timed in the same rounds).", ""]
    indexed = any(r["contender"] == MEMKIT_INDEXED for r in peers["rows"])
    frames = sorted({r["contender"] for r in peers["rows"] if r["contender"].endswith("WAL frames")},
                    key=lambda name: int(name.split()[2]))  # "sync of N WAL frames"; older runs have none
    for sync in runs:
        extra = f" | {MEMKIT_INDEXED}" if indexed else ""
        out += [f"**synchronous={sync}**", "",
                f"| operation | memkit{extra} | {' | '.join(PEERS)} | {' | '.join(p + ' ÷ memkit' for p in PEERS)} "
                f"| fsync | memkit in fsyncs | {WAL_PEER} in fsyncs |" + "".join(f" {f} |" for f in frames),
                "|---|---:|" + "---:|" * (2 * len(PEERS) + indexed) + "---:|---:|---:|" + "---:|" * len(frames)]
        for op in PEER_OPERATIONS:
            kit = med[(sync, op, MEMKIT)]
            times = [med[(sync, op, p)] for p in PEERS]
            fsync = med.get((sync, op, FSYNC))
            kept = f" | {_fmt(med.get((sync, op, MEMKIT_INDEXED)))}" if indexed else ""
            out.append(f"| {op} | {_fmt(kit)}{kept} | {' | '.join(_fmt(t) for t in times)} "
                       f"| {' | '.join(f'{t / kit:.2f}' for t in times)} | {_fmt(fsync)} "
                       f"| {f'{kit / fsync:.2f}' if fsync else '–'} "
                       f"| {f'{med[(sync, op, WAL_PEER)] / fsync:.2f}' if fsync else '–'} |"
                       + "".join(f" {_fmt(med.get((sync, op, f)))} |" for f in frames))
        out.append("")
    if indexed:
        out += [f"`{MEMKIT_INDEXED}`: the same store with a per-user quota above `fts_min_user_rows`, so it keeps "
                "the trigram index up to date on every write, as any store whose users can grow that large does. "
                "Its writes are what the index costs; `memkit` keeps none (its quota is below the threshold, as "
                "the teaching quota is).", ""]
    out += ["Durability, as PRAGMA reported it on each contender's own connection (before and after timing):", "",
            "| run | contender | journal_mode | synchronous | trigram index |", "|---|---|---|---|---|"]
    out += [f"| {s['synchronous_run']} | {s['contender']} | {s['journal_mode']} | {s['synchronous']} "
            f"| {s.get('trigram_index', '–')} |" for s in peers["settings"]]
    out += ["", "Agreement after timing (the same questions to both memkit stores and both peers; the records of every user "
            "the timed writes touched must be the same):", "",
            "| run | check | questions | non-empty | disagreements |", "|---|---|---:|---:|---:|"]
    out += [f"| {c['synchronous']} | {c['operation']} | {c['questions']} | {c['non_empty']} | {c['disagreements']} |"
            for c in peers["checks"]]
    return out


def writers_section(writers: dict[str, Any]) -> list[str]:
    wps = writers["median_writes_per_s"]
    rows = ["| contender | median writes/s | rounds (writes/s) | keys written = keys found |", "|---|---:|---|---|"]
    for name, median in wps.items():
        each = ", ".join(f"{r['writes_per_s']:.0f}" for r in writers["rounds"] if r["contender"] == name)
        ok = sum(writers["found"][name].values()) == writers["written"][name]
        rows.append(f"| {name} | {median:.0f} | {each} | {'yes' if ok else '**no**'} "
                    f"({writers['written'][name]:,}) |")
    return [f"{writers['processes']} processes put new keys into one file for {writers['seconds']:g} s per "
            f"round, {len(writers['rounds']) // 2} rounds per contender alternating; WAL, "
            f"`synchronous={writers['synchronous']}` in every process (PRAGMA-checked).", ""] + rows


def window_section(window: dict[str, Any]) -> list[str]:
    wmed = _window_medians(window)
    cases = sorted({(r["synchronous"], r["history"]) for r in window["rows"] if r["history"] is not None},
                   key=lambda c: (c[0] != "FULL", c[1]))
    peers = WINDOW_CONTENDERS[1:]
    floor = any(key[3] == ROUND_TRIP for key in wmed)  # runs before the probe have no such column
    extra = [ROUND_TRIP, "memkit in round trips"] if floor else []
    out = [f"{window['redis']}; {window['rounds']} rounds of {window['reads']} reads and {window['appends']} "
           "appends per contender; fresh sessions each round, filled with the history first."
           + (f" `{ROUND_TRIP}`: the window's own client sending PING to the same server in the same rounds, "
              "the floor of any call to a server; last column: memkit's time over it." if floor else ""), "",
           f"| run | history | operation | {' | '.join(WINDOW_CONTENDERS)} | {' | '.join(p + ' ÷ memkit' for p in peers)} |"
           + "".join(f" {e} |" for e in extra),
           "|---|---:|---|" + "---:|" * (len(WINDOW_CONTENDERS) + len(peers) + len(extra))]
    for sync, history in cases:
        for op in ("read last 10", "append"):
            times = [wmed[(sync, history, op, c)] for c in WINDOW_CONTENDERS]
            ping = f" {_fmt(wmed[(sync, history, op, ROUND_TRIP)])} | {times[0] / wmed[(sync, history, op, ROUND_TRIP)]:.2f} |" \
                if floor else ""
            out.append(f"| {sync} | {history:,} | {op} | {' | '.join(_fmt(t) for t in times)} "
                       f"| {' | '.join(f'{t / times[0]:.2f}' for t in times[1:])} |" + ping)
    server = window.get("server_us") or {}
    if server:
        out += ["", "What each call costs the Redis server itself (`INFO commandstats`, µs per call, the archiver's "
                "passes included for memkit's appends): " + "; ".join(
                    f"{name}: read {v['read last 10']:.1f}, append {v['append']:.1f}" for name, v in server.items()) + "."]
    flushes = [r for r in window["rows"] if r["history"] is None and r["median_s"] is not None]
    if flushes:
        out += ["", "memkit's archiving, not in the append column (the background worker's flush after each batch, "
                "per turn archived): " + ", ".join(f"{_fmt(r['median_s'])} at {r['synchronous']}" for r in flushes)
                + "."]
    out += ["", "| run | contender | journal_mode | synchronous |", "|---|---|---|---|"]
    out += [f"| {s['synchronous_run']} | {s['contender']} | {s['journal_mode']} | {s['synchronous']} |"
            for s in window["settings"]]
    out += ["", "| run | history | check | sessions | disagreements |", "|---|---:|---|---:|---:|"]
    out += [f"| {c['synchronous']} | {c['history']:,} | {c['check']} | {c['sessions']} | {c['disagreements']} |"
            for c in window["checks"]]
    return out


def plot(axes: list[Any], results: dict[str, Any]) -> None:
    """The peers' row of results.png: peer ÷ memkit per operation (bars), 1.0 and the targets as lines."""
    peers, window = results.get("peers"), results.get("window_peers")
    panels: list[tuple[str, list[str], dict[str, list[float]], float | None]] = []
    for sync in ("FULL", "NORMAL"):
        if peers and any(r["synchronous"] == sync for r in peers["rows"]):
            med = _store_medians(peers)
            panels.append((f"store vs SqliteStore, {sync}", list(PEER_OPERATIONS),
                           {p: [med[(sync, op, p)] / med[(sync, op, MEMKIT)] for op in PEER_OPERATIONS] for p in PEERS},
                           FULL_RATIO if sync == "FULL" else NORMAL_RATIO))
    for sync in ("FULL", "NORMAL"):
        if window and any(r["synchronous"] == sync for r in window["rows"]):
            wmed = _window_medians(window)
            cases = sorted({r["history"] for r in window["rows"] if r["history"] is not None and r["synchronous"] == sync})
            labels = [f"{op.split()[0]} @{h}" for op in ("read last 10", "append") for h in cases]
            panels.append((f"window vs sessions, {sync}", labels,
                           {p: [wmed[(sync, h, op, p)] / wmed[(sync, h, op, WINDOW_MEMKIT)]
                                for op in ("read last 10", "append") for h in cases] for p in WINDOW_CONTENDERS[1:]},
                           WINDOW_RATIO))
    for ax, (title, labels, series, target) in zip(axes, panels):
        width = 0.8 / len(series)
        for n, (name, ratios) in enumerate(series.items()):
            ax.bar([i + n * width for i in range(len(labels))], ratios, width, label=name)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if target is not None and target != 1.0:
            ax.axhline(target, color="tab:red", linestyle=":", linewidth=1, label=f"write target {target}")
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.set_ylabel("peer ÷ memkit (>1: memkit faster)", fontsize=7)
        ax.legend(fontsize=6)
    for ax in axes[len(panels):]:
        ax.axis("off")


def profile_section(profile: dict[str, Any]) -> list[str]:
    """WAL pages per write (by B-tree for a new key) and memkit's put by part."""
    pages = profile["pages"]
    names = list(pages)
    ops = list(next(iter(pages.values())))
    out = [f"WAL pages a write adds, measured at {profile['size']:,} records ({profile['writes']} writes of each kind, "
           "the automatic checkpoint off; each page is 4 KiB written at commit and copied again by the next "
           "checkpoint):", "",
           f"| contender | {' | '.join(ops)} |", "|---|" + "---:|" * len(ops)]
    for name in names:
        totals = [pages[name][op]["total"] for op in ops]
        out.append(f"| {name} | {' | '.join(f'{t:.1f}' for t in totals)} |")
    trees = sorted({t for name in names for t in pages[name][ops[0]] if t != "total"},
                   key=lambda t: -max(pages[n][ops[0]].get(t, 0) for n in names))
    out += ["", "A new key's pages by B-tree ('new page': one the file did not have, where a table grows):", "",
            f"| B-tree | {' | '.join(names)} |", "|---|" + "---:|" * len(names)]
    out += [f"| {t} | {' | '.join(f'{pages[n][ops[0]].get(t, 0):.2f}' for n in names)} |" for t in trees]
    parts = profile["parts_s"]
    out += ["", f"memkit's `put` of a new key at NORMAL, by part (median of {profile['puts']} puts, checkpoint off; "
            "each part runs from its statement's start to the next one's, Python between included):", "",
            "| part | µs |", "|---|---:|"]
    out += [f"| {name} | {seconds * 1e6:.1f} |" for name, seconds in parts.items()]
    return out


def markdown(results: dict[str, Any]) -> list[str]:
    """The '## Peers' section, or a line saying why it was not measured."""
    out = ["## Peers: langgraph and openai-agents", ""]
    status = results.get("peers_status")
    if status:
        return out + [f"Not measured in this run: {status}.", ""]
    if results.get("peers"):
        out += ["### Long-term store", ""] + store_section(results["peers"]) + [""]
    if results.get("write_profile"):
        out += ["### Where a write's cost goes", ""] + profile_section(results["write_profile"]) + [""]
    if results.get("writers"):
        out += ["### Four writer processes on one file", ""] + writers_section(results["writers"]) + [""]
    if results.get("window_peers"):
        out += ["### Short-term window", ""] + window_section(results["window_peers"]) + [""]
    return out
