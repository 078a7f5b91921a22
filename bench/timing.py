"""How the suite times things on a noisy machine: same process, alternating contenders, medians.

Each round runs every contender once on the same items, in an order that rotates from round to
round (so none always runs first, after the cache was warmed by another, or last, when the
machine is busier). A contender's time for a round is the mean over its batch; its result is the
median over rounds. The garbage collector is paused inside a batch, as `timeit` does.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import Any
from collections.abc import Callable, Sequence

def run_batch(method: Callable[..., Any], items: Sequence[tuple[Any, ...]], cap_s: float | None,
              min_items: int = 3) -> tuple[float, int]:
    """Call `method(*item)` for the items; stop early after `cap_s` seconds (at least `min_items`).

    The cap is only for read-only operations, where a prefix of the batch is as good as all of it:
    the naive way can take a hundred times longer per call and would otherwise dominate the run.

    Returns:
        (seconds per call, calls made).
    """
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        clock = time.perf_counter
        started = clock()
        done = 0
        if cap_s is None:
            for item in items:
                method(*item)
            done = len(items)
        else:
            deadline = started + cap_s
            for item in items:
                method(*item)
                done += 1
                if done >= min_items and clock() > deadline:
                    break
        elapsed = clock() - started
    finally:
        if gc_was_enabled:
            gc.enable()
    return elapsed / max(done, 1), done


def rotated(names: Sequence[Any], round_no: int) -> list[Any]:
    """`names` rotated by the round number: each contender takes every position in turn."""
    k = round_no % len(names)
    return list(names[k:]) + list(names[:k])


def summarize(samples: list[float]) -> dict[str, float]:
    """Median and spread of per-call times (seconds)."""
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
    }
