"""The one place memkit reads the time, so tests and notebooks can replace it.

Timestamps are ISO 8601 UTC strings with microseconds: they sort as text and read well in tables.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

Clock = Callable[[], _dt.datetime]


def utc_now() -> _dt.datetime:
    """The current time, timezone-aware UTC."""
    return _dt.datetime.now(_dt.UTC)


def iso(moment: _dt.datetime) -> str:
    """Format an aware datetime as `2026-11-30T03:42:15.123456Z`."""
    return moment.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class FakeClock:
    """A clock that moves only when told to: for tests, TTL demos and deterministic notebooks.

    Example:
        >>> clock = FakeClock()
        >>> first = clock(); clock.advance(seconds=5)
        >>> (clock() - first).total_seconds()
        5.0
    """

    def __init__(self, start: _dt.datetime | None = None, step_seconds: float = 0.0) -> None:
        self.now = start or _dt.datetime(2026, 1, 1, 9, 0, tzinfo=_dt.UTC)
        self.step = _dt.timedelta(seconds=step_seconds)

    def __call__(self) -> _dt.datetime:
        current = self.now
        self.now = self.now + self.step
        return current

    def advance(self, seconds: float) -> None:
        """Move the clock forward."""
        self.now = self.now + _dt.timedelta(seconds=seconds)
