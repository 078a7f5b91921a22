"""Notebook 10's exercise (b): a question that retrieval by meaning answers and literal retrieval misses.

The question is asked both ways on the user's records (`ask_both`); the check judges the idea, not
the wording: literal retrieval must not find the record, and among all of the user's records the
one most similar in meaning must be it. No similarity threshold is applied, since honest
paraphrases ("Can I have a steak?") share the meaning and little else.
"""

from __future__ import annotations

import dataclasses

from memkit import MemoryStore, retrieve
from memkit.semantic import DEFAULT_MIN_SIMILARITY

from . import exercises


@dataclasses.dataclass(frozen=True)
class Asked:
    """One question asked both ways.

    Attributes:
        literal: key -> the terms that found it, for each record literal retrieval found.
        ranked: (key, similarity) of every record of the user, most similar in meaning first.
    """

    literal: dict[str, str]
    ranked: list[tuple[str, float]]


def ask_both(store: MemoryStore, user: str, question: str) -> Asked:
    """Ask `question` literally (`retrieve` without meaning) and by meaning (every record ranked)."""
    context = retrieve(store, user, question, by_meaning=False)
    literal = {row["key"]: row["matched_by"] for row in context.packing
               if row["matched_by"].startswith("terms")}
    hits = store.search_by_meaning(user, question, limit=50, min_similarity=-1.0)
    return Asked(literal, [(hit["key"], hit["similarity"]) for hit in hits])


def check_meaning_question(asked: Asked, key: str = "diet") -> exercises.Verdict:
    """Right when literal retrieval misses `key` and retrieval by meaning ranks it first."""
    if key in asked.literal:
        return exercises.wrong(f"literal retrieval already finds the {key} record ({asked.literal[key]})",
                               "ask without the record's words: what does being vegetarian mean for a meal?")
    keys = [found for found, _ in asked.ranked]
    similarity = dict(asked.ranked).get(key, 0.0)
    if not keys or keys[0] != key:
        place = keys.index(key) + 1 if key in keys else len(keys) + 1
        return exercises.wrong(
            f"by meaning, the closest of Alice's records are {keys[:3]}; the {key} record scored "
            f"{similarity:.2f} and came #{place}",
            "ask about what the record means, in a few words about food")
    weak = (f" (under retrieve's threshold of {DEFAULT_MIN_SIMILARITY}: a weak match, kept out of a request)"
            if similarity < DEFAULT_MIN_SIMILARITY else "")
    return exercises.right(f"literal retrieval missed the {key} record and retrieval by meaning ranked it first "
                           f"of Alice's records (similarity {similarity:.2f}){weak}: the question shares its "
                           "meaning, not its words")
