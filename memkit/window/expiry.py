"""The sliding expiry both lasting windows take (`StoreWindow`, `RedisWindow`), checked in one place."""

from __future__ import annotations

import datetime as _dt

from ..clock import iso
from ..errors import ValidationError

DEFAULT_TTL_SECONDS = 30 * 60.0
MAX_TTL_SECONDS = 10 * 365 * 24 * 3600.0  # finite, and far inside the milliseconds Redis takes for an expiry


def check_ttl(seconds: object) -> float:
    """`seconds` as a window's ttl, or a ValidationError naming the value and the range."""
    if (isinstance(seconds, bool) or not isinstance(seconds, int | float)
            or not 0.01 < seconds <= MAX_TTL_SECONDS):  # NaN and infinity fail here too
        raise ValidationError(f"ttl is {seconds!r} seconds; it must be a number more than 0.01 and at most "
                              f"{MAX_TTL_SECONDS:g} (ten years)")
    return float(seconds)


def expiry_at(now: _dt.datetime, ttl: float) -> str:
    """When a session of `StoreWindow` used at `now` expires: `ttl` seconds later, rounded up to the
    whole second. Every use within one second gives the same expiry, so a read that finds it stored
    already need not write it again (a session may outlive its ttl by under a second, never less)."""
    moment = now + _dt.timedelta(seconds=ttl)
    if moment.microsecond:
        moment = moment.replace(microsecond=0) + _dt.timedelta(seconds=1)
    return iso(moment)
