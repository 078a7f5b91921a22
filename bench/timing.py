"""How every suite times things on a noisy machine: same process, alternating contenders, medians.

Each round runs every contender once on the same items, in an order that rotates from round to
round (so none always runs first, after the cache was warmed by another, or last, when the
machine is busier). A contender's time for a round is the mean over its batch; its result is the
median over rounds. The garbage collector is paused inside a batch, as `timeit` does.
"""

from __future__ import annotations

import contextlib
import gc
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The garbage collector off inside the block (as `timeit` does), back as it was after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_batch(method: Callable[..., Any], items: Sequence[tuple[Any, ...]], cap_s: float | None = None,
              min_items: int = 3) -> tuple[float, int]:
    """Call `method(*item)` for the items; stop early after `cap_s` seconds (at least `min_items`).

    The cap is only for read-only operations, where a prefix of the batch is as good as all of it:
    the naive way can take a hundred times longer per call and would otherwise dominate the run.

    Returns:
        (seconds per call, calls made).
    """
    clock = time.perf_counter
    deadline = None if cap_s is None else clock() + cap_s
    done = 0
    with paused_gc():
        started = clock()
        for item in items:
            method(*item)
            done += 1
            if deadline is not None and done >= min_items and clock() > deadline:
                break
        elapsed = clock() - started
    return elapsed / max(done, 1), done


def per_call(call: Callable[[int], Any], n: int) -> float:
    """Seconds per call of `call(i)` for i in range(n), the garbage collector paused."""
    return run_batch(call, [(i,) for i in range(n)])[0]


def median_time(call: Callable[[], Any], repeat: int, warm: bool = True) -> float:
    """Median seconds of `repeat` calls of `call` (after one untimed call when `warm`)."""
    if warm:
        call()
    return statistics.median(run_batch(call, [()])[0] for _ in range(repeat))


def rotated(names: Sequence[Any], round_no: int) -> list[Any]:
    """`names` rotated by the round number: each contender takes every position in turn."""
    k = round_no % len(names)
    return list(names[k:]) + list(names[:k])


def alternate(rounds: int, contenders: Sequence[Any], measure: Callable[[Any, int], float],
              samples: dict[Any, list[float]] | None = None, offset: int = 0,
              key: Callable[[Any], Any] = lambda c: getattr(c, "name", c)) -> dict[Any, list[float]]:
    """`measure(contender, round)` for every contender in every round, in rotating order; the
    samples by `key(contender)` (added to `samples` when given)."""
    samples = {} if samples is None else samples
    for r in range(rounds):
        for contender in rotated(contenders, r + offset):
            samples.setdefault(key(contender), []).append(measure(contender, r))
    return samples


def summarize(samples: list[float]) -> dict[str, float]:
    """Median and spread of per-call times (seconds)."""
    return {"median_s": statistics.median(samples), "min_s": min(samples), "max_s": max(samples)}
