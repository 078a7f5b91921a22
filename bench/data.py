"""The benchmark's data set: `size // 100` users of log-uniform sizes, ordinary sentences, and the
queries and tasks drawn from them, all from one seeded `random.Random` (a run is repeatable and every
contender sees the same records and operations). Operations pick a user in proportion to its size.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import random

from memkit.clock import iso

# A few hundred ordinary words, so the trigram statistics look like English text, not random letters.
_SUBJECTS = ("I", "my sister", "my partner", "our team", "the kids", "my manager", "my friend Sam",
             "grandma", "the neighbours", "my doctor")
_VERBS = ("prefer", "like", "avoid", "ordered", "booked", "enjoyed", "cancelled", "recommended",
          "bought", "planned", "remembered", "forgot", "asked for", "tried", "shared")
_THINGS = (
    "green tea", "black coffee", "oat milk", "sparkling water", "red wine", "jasmine rice", "sourdough bread",
    "vegetarian curry", "spicy ramen", "window seats", "aisle seats", "early flights", "night trains",
    "quiet hotels", "mountain cabins", "beach holidays", "museum tours", "jazz concerts", "board games",
    "mystery novels", "science podcasts", "yoga classes", "morning runs", "cycling routes", "hiking boots",
    "wool sweaters", "linen shirts", "paper notebooks", "fountain pens", "noise cancelling headphones",
    "standing desks", "ergonomic chairs", "dark mode", "large fonts", "email summaries", "weekly reports",
    "short meetings", "video calls", "phone reminders", "calendar invites", "birthday cakes", "fresh flowers",
    "italian restaurants", "thai food", "sushi bars", "farmers markets", "bakery pastries", "chocolate",
    "peanut allergy", "gluten free pasta", "lactose free yoghurt", "almond butter", "citrus fruit",
    "tomato soup", "garden salads", "barbecue ribs", "herbal remedies", "vitamin supplements",
)
_WHEN = ("in the morning", "on weekends", "after work", "every Friday", "during winter", "in summer",
         "before lunch", "late at night", "on business trips", "on holidays", "at the office", "at home")
_PLACES = ("in Lisbon", "in Kyoto", "in Berlin", "near the station", "downtown", "by the lake",
           "at the airport", "in the old town", "at the conference", "in the countryside")
_TOPICS = ("drink", "food", "seat", "travel", "music", "reading", "sport", "work", "style", "health",
           "schedule", "diet", "shopping", "hotel", "transport", "device", "language", "family")

MISS_QUERY_STEM = "qzxjvw"
"""No generated value or key contains this (no word above has a 'qz' or 'xj'), so it never matches."""


@dataclasses.dataclass(frozen=True)
class Memory:
    user: str
    kind: str
    key: str
    value: str
    at: str  # created_at == updated_at when loaded


@dataclasses.dataclass
class DataSet:
    """The records of one size, and the workload drawn from them."""

    size: int
    records: list[Memory]
    users: list[str]
    weights: list[int]
    rng: random.Random

    def by_user(self) -> dict[str, list[Memory]]:
        out: dict[str, list[Memory]] = {user: [] for user in self.users}
        for record in self.records:
            out[record.user].append(record)
        return out

    def pick_users(self, n: int) -> list[str]:
        """`n` users, each with probability proportional to its number of records."""
        return self.rng.choices(self.users, weights=self.weights, k=n)


def sentence(rng: random.Random) -> str:
    """One memory value: an ordinary sentence of 30-110 characters."""
    text = f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_THINGS)} {rng.choice(_WHEN)}"
    if rng.random() < 0.5:
        text += f" {rng.choice(_PLACES)}"
    return text


def make_dataset(size: int, seed: int = 1) -> DataSet:
    """`size` records for `size // 100` users (at least 5), deterministic for a given seed."""
    rng = random.Random(seed * 1_000_003 + size)
    n_users = max(5, size // 100)
    raw = [math.exp(rng.uniform(math.log(10), math.log(1000))) for _ in range(n_users)]
    scale = size / sum(raw)
    sizes = [max(1, int(r * scale)) for r in raw]
    for i in range(size - sum(sizes)):  # hand out the rounding remainder
        sizes[i % n_users] += 1
    return _records(size, [f"user{i:05d}" for i in range(n_users)], sizes, rng)


def even_dataset(users: int, per_user: int, seed: int = 1) -> DataSet:
    """`users` users of `per_user` records each, made as `make_dataset` makes its records (the same
    sentences, kinds and keys, the users' records interleaved in time), deterministic for a seed."""
    size = users * per_user
    rng = random.Random(seed * 1_000_003 + size)
    return _records(size, [f"user{i:05d}" for i in range(users)], [per_user] * users, rng)


def _records(size: int, users: list[str], sizes: list[int], rng: random.Random) -> DataSet:
    """The records of `users`, `sizes[i]` each, interleaved in time as records arrive."""
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    records: list[Memory] = []
    order = [user for user, n in zip(users, sizes, strict=False) for _ in range(n)]
    rng.shuffle(order)  # interleave users, as records arrive over time
    counters = {user: 0 for user in users}
    for i, user in enumerate(order):
        counters[user] += 1
        n = counters[user]
        if rng.random() < 0.4:
            kind, key = "preference", f"{rng.choice(_TOPICS)}.{n}"
        else:
            kind, key = "episode", f"ep.{n}"
        at = iso(start + dt.timedelta(seconds=i))
        records.append(Memory(user, kind, key, sentence(rng), at))
    return DataSet(size, records, users, sizes, rng)


def hit_query(rng: random.Random, records: list[Memory]) -> str:
    """A word taken from one of the user's own values: the search finds at least one record."""
    record = rng.choice(records)
    words = [w for w in record.value.lower().split() if len(w) >= 4]
    return rng.choice(words) if words else record.key


def task_text(rng: random.Random) -> str:
    """A task as a user would type it, with 5-8 searchable terms."""
    thing_a, thing_b = rng.sample(_THINGS, 2)
    return (f"Plan my {rng.choice(_TOPICS)} {rng.choice(_PLACES)}: remember I like {thing_a} "
            f"and maybe {thing_b} {rng.choice(_WHEN)}?")
