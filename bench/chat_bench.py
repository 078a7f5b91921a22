"""How long a person waits for one `memkit chat --message` (issue 26, target 1).

Each round makes a fresh workspace and times, in fresh processes: `python -c pass`, three chats with
the fixture model and the store's own window (no server is started), and with `--baseline` another
memkit package's chat (an older checkout: the kept redis-server of issue 26, say). The sources are
byte-compiled first, as an install does. memkit's share is a chat's time minus `python -c pass`;
no time is asserted anywhere.
"""

from __future__ import annotations

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
                                       "chat, later messages": []}
    if baseline is not None:
        samples[f"chat, {label}"] = []
    for _ in range(rounds):
        folder = Path(tempfile.mkdtemp(prefix="memkit-chat-bench-"))
        try:
            samples["python -c pass"].append(_timed([sys.executable, "-c", "pass"], base, folder))
            three = [_timed(_chat(n), base, folder) for n in range(3)]
            samples["chat, first (cold)"].append(three[0])
            samples["chat, later messages"] += three[1:]
            samples["chat, median of three"].append(statistics.median(three))
            if baseline is not None:
                other = {**base, "PYTHONPATH": str(baseline.resolve())}
                samples[f"chat, {label}"] += [_timed(_chat(n, "baseline-ws"), other, folder)
                                              for n in range(3, 6)]
        finally:
            shutil.rmtree(folder, ignore_errors=True)  # (an older baseline's kept server stops with its folder)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    return {"rounds": rounds, "samples": samples, "medians": medians, "cpus": os.cpu_count(),
            "load": os.getloadavg()[0]}
