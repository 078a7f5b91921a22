"""What the workspace window's `appendfsync always` (the default) costs against `everysec`, for the window's append.

The workspace's embedded redis-server (the `memkit chat` default) fsyncs every write to its AOF
before it replies, so no acknowledged turn is lost to a crash or a power cut. `everysec` fsyncs
once a second, and while that fsync is slow Redis holds writes back for up to two seconds and
still replies: a killed redis-server or a power cut may lose acknowledged turns. This measures
one exchange appended (two turns, one transaction) on each, alternating rounds in one process,
beside the disk's own fsync latency.

    python -m bench.aof_bench [--rounds 5] [--appends 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from memkit.store import MemoryStore
from memkit.window import RedisWindow
from memkit.servers.workspace import WorkspaceRedis


def fsync_latency(folder: Path, n: int = 200) -> float:
    """Median seconds of one small write + fsync on the disk that holds `folder`."""
    samples = []
    with open(folder / "fsync-probe", "wb") as file:
        for _ in range(n):
            start = time.perf_counter()
            file.write(b"x" * 64)
            file.flush()
            os.fsync(file.fileno())
            samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def exchange_latency(folder: Path, appendfsync: str, appends: int) -> float:
    """Median seconds of one `append_exchange` on a workspace server with this fsync policy."""
    with MemoryStore(folder / "memory.sqlite3") as store, WorkspaceRedis(folder / "window", appendfsync=appendfsync) as redis:
        with RedisWindow(store, redis.client, size=16, background=False) as window:
            samples = []
            for n in range(appends):
                start = time.perf_counter()
                window.append_exchange("alice", "s1", f"question {n}", f"answer {n}")
                samples.append(time.perf_counter() - start)
                if n % 8 == 7:
                    window.flush()  # keep the archive out of the timed appends
            return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--appends", type=int, default=200)
    opts = parser.parse_args()
    medians: dict[str, list[float]] = {"everysec": [], "always": []}
    with tempfile.TemporaryDirectory(prefix="memkit-aof-") as scratch:
        root = Path(scratch)
        disk = fsync_latency(root)
        for r in range(opts.rounds):
            for policy in ("everysec", "always") if r % 2 == 0 else ("always", "everysec"):
                folder = root / f"{policy}-{r}"
                folder.mkdir()
                medians[policy].append(exchange_latency(folder, policy, opts.appends))
    every, always = statistics.median(medians["everysec"]), statistics.median(medians["always"])
    print(f"disk fsync (64 bytes): {disk * 1e6:.0f} µs")
    print(f"append_exchange, appendfsync everysec: {every * 1e6:.0f} µs")
    print(f"append_exchange, appendfsync always:   {always * 1e6:.0f} µs  ({always / every:.1f}x)")


if __name__ == "__main__":
    main()
