"""The reliability lab: one user cannot starve the others by growing their history.

Every update of a key adds an event to its history. Unbounded, one user updating one key (11,905
updates in 67 s at the default 16 MiB) filled the store's size cap, and then another user's first
memory was refused. `Limits.max_events_per_user` bounds each user's history: a write past it removes
that user's oldest events in its own transaction (never the newest event of a key they hold). See
`tests/_reliability.py` for the sizes and conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import os

from _reliability import FULL, scale
from memkit.errors import QuotaError
from memkit.limits import Limits
from memkit.store import MemoryStore


def test_one_user_updating_a_key_forever_never_starves_another_user(tmp_path, figures):
    # The default cap at full size; a smaller one in the everyday run, reached as surely. 2 MiB holds
    # one user's bounded history of these events (1.5 KB each, an overflow page apiece from schema
    # step 15: about 1.3 MB), as 16 MiB does at full size.
    limits = Limits() if FULL else Limits(max_db_bytes=2 << 20)
    updates = scale(2500, 15_000)
    path = tmp_path / "memory.sqlite3"
    refused_hog = refused_others = 0
    largest = 0
    with MemoryStore(path, limits=limits, synchronous="NORMAL") as store:
        store.put("other", "s1", "preference", "drink", "tea")
        for n in range(updates):
            try:
                store.put("hog", "s1", "episode", "diary", f"{n:06d} " + "x" * 500, confirmation="c" * 500)
            except QuotaError:
                refused_hog += 1
            if n % 250 == 0:
                # Another user's new memory, while the hog goes on.
                try:
                    store.put(f"user{n}", "s1", "episode", "trip", "a long story " + "y" * 490, confirmation="c" * 500)
                except QuotaError:
                    refused_others += 1
                largest = max(largest, os.path.getsize(path))
        history = store.history("hog", "episode", "diary")
        other = store.history("other", "preference", "drink")
        try:
            store.put("latecomer", "s1", "episode", "trip", "a long story " + "z" * 490, confirmation="c" * 500)
            late_refused = 0
        except QuotaError:
            late_refused = 1
    revisions = [event["revision"] for event in history]
    figures("One user's history and the size cap",
            **{"updates of one key": updates, "cap (bytes)": limits.max_db_bytes,
               "largest file (share of the cap)": round(largest / limits.max_db_bytes, 2),
               "hog's updates refused": refused_hog, "other users' new memories refused": refused_others + late_refused,
               "events the hog keeps": len(history), "newest revision": revisions[-1],
               "another user's history kept": len(other)})
    assert refused_hog == refused_others == late_refused == 0
    assert len(history) == limits.max_events_per_user
    assert revisions == list(range(updates - limits.max_events_per_user + 1, updates + 1))  # the newest, in order
    assert len(other) == 1 and largest <= limits.max_db_bytes
