"""What long-term memory is offered to the model for one task, and why: bounded, whole records only.

A few preferences (those the task mentions first, then the most recent) and episodes matched by a
bounded number of terms from the task, deduplicated and packed greedily into a character budget.
Every candidate gets a row in the packing report: included, or skipped and why.

With an embedding model (a store opened with `embedder=`, the `semantic` extra), records whose
meaning is close to the task join the literal hits: ranked after them, by similarity, above a
threshold, in the same per-kind counts and the same budget; the report says "similarity 0.71".
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .errors import ValidationError
from .jsonutil import json_chars
from .limits import DEFAULT_LIMITS, KINDS, Limits
from .semantic import DEFAULT_MIN_SIMILARITY
from .store import Record, Store

STOPWORDS = frozenset([
    "about", "after", "again", "also", "and", "any", "are", "because", "been", "before", "but", "can", "could",
    "did", "does", "doing", "for", "from", "had", "has", "have", "her", "here", "him", "his", "how", "into", "its",
    "just", "like", "more", "most", "not", "now", "off", "once", "only", "other", "our", "out", "over", "own",
    "same", "she", "should", "some", "such", "than", "that", "the", "their", "them", "then", "there", "these",
    "they", "this", "those", "through", "too", "under", "until", "very", "was", "were", "what", "when", "where",
    "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "please", "tell",
    "know", "remember"
])
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A word is a run of CJK characters or a run of other word characters: "kyoto京都trip" is three.
_WORD_RE = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_CJK_RE = re.compile(rf"[{_CJK}]")


def task_terms(task: str, max_terms: int = DEFAULT_LIMITS.retrieval_max_terms,
               max_chars: int = DEFAULT_LIMITS.max_query_chars) -> list[str]:
    """The search terms of a task: words of 3+ letters that are not stopwords, in order, deduplicated.

    Runs of CJK characters have no spaces between words, so they are split into overlapping
    pairs of characters ("我喜欢咖啡" gives "我喜", "喜欢", "欢咖", "咖啡"); other letters next to
    them form words of their own ("kyoto京都" gives "kyoto", "京都"). At most `max_terms`
    terms, each cut to `max_chars` (a search query's limit; a shorter term matches a superset).

    Example:
        >>> task_terms("What drink do I like in the morning?")
        ['drink', 'morning']
    """
    terms: list[str] = []
    for word in _WORD_RE.findall(task.casefold()):
        if _CJK_RE.search(word):
            pieces = [word] if len(word) <= 2 else [word[i:i + 2] for i in range(len(word) - 1)]
        elif len(word) >= 3 and word not in STOPWORDS and not word.isdigit():
            pieces = [word]
        else:
            pieces = []
        for piece in pieces:
            piece = piece[:max_chars]
            if piece not in terms:
                terms.append(piece)
            if len(terms) == max_terms:
                return terms
    return terms


@dataclasses.dataclass
class RetrievedContext:
    """The memory packed for one task, and the packing report of every candidate.

    Attributes:
        memory: the records to send, as `{"kind", "key", "value"}`, highest ranked first.
        packing: one row per candidate: kind, key, matched_by, chars, status (included/skipped), reason.
            `matched_by` says why it was chosen: "terms: drink, morning" (a literal hit, and its
            terms), "similarity 0.71" (by meaning), both, or "recent preference".
        terms, chars, budget_chars: the task terms searched, the canonical JSON size of `memory` and
            the budget it was packed into.
        by_meaning: whether records were also searched by meaning.
    """

    memory: list[dict[str, Any]]
    packing: list[dict[str, Any]]
    terms: list[str]
    chars: int
    budget_chars: int
    by_meaning: bool = False


def retrieve(store: Store, user: str, task: str, limits: Limits | None = None, *,
             by_meaning: bool | None = None,
             min_similarity: float = DEFAULT_MIN_SIMILARITY) -> RetrievedContext:
    """Choose the memories of `user` to offer the model for `task`.

    Every search is bound to `user`; the task's terms pick the episodes. `limits` are the store's
    by default. `by_meaning` also searches by meaning (None: when the store has an embedder), for
    hits at least `min_similarity` similar to the task.

    Returns:
        The packed memory and a packing report saying what was offered, included or skipped and why.

    Raises:
        ValidationError: `by_meaning=True` on a store without an embedder, or a bad `min_similarity`.
    """
    limits = limits or store.limits
    if by_meaning is None:
        by_meaning = getattr(store, "embedder", None) is not None
    if not isinstance(by_meaning, bool):
        raise ValidationError(f"by_meaning is {by_meaning!r}; use True, False or None")
    terms = task_terms(task, limits.retrieval_max_terms, limits.max_query_chars)
    found = _found_by_terms(store, user, terms, limits)
    similar = _found_by_meaning(store, user, task, limits, min_similarity) if by_meaning else {}

    preferences = _ranked("preference", found, similar)[: limits.retrieval_max_preferences]
    room = limits.retrieval_max_preferences - len(preferences)
    if room > 0:  # the most recent preferences fill the places the task's terms left
        chosen = {rec["key"] for rec, _ in preferences}
        recent = store.search(user, "", limit=min(limits.retrieval_max_preferences, limits.max_search_limit),
                              kind="preference")
        preferences += [(rec, "recent preference") for rec in recent if rec["key"] not in chosen][:room]
    episodes = _ranked("episode", found, similar)[: limits.retrieval_max_episodes]
    memory, packing, size = _pack(preferences + episodes, limits.retrieval_budget_chars)
    return RetrievedContext(memory, packing, terms, size, limits.retrieval_budget_chars, by_meaning)


Found = dict[tuple[str, str], tuple[Record, list[str]]]
"""Records by (kind, key), with the task terms that found each."""
Similar = dict[tuple[str, str], tuple[Record, float]]
"""Records by (kind, key), with their similarity to the task."""


def _found_by_terms(store: Store, user: str, terms: list[str], limits: Limits) -> Found:
    """The user's records that hold a task term, and which terms (a record found by more ranks higher):
    one `search_many` gives what a search per term and kind would, reading the user's rows once."""
    per_term = min(limits.retrieval_max_episodes, limits.max_search_limit)
    hits = store.search_many(user, terms, limit=per_term, kinds=KINDS)
    found: Found = {}
    for term in terms:
        for kind in KINDS:
            for record in hits[(term, kind)]:
                found.setdefault((record["kind"], record["key"]), (record, []))[1].append(term)
    return found


def _found_by_meaning(store: Store, user: str, task: str, limits: Limits, min_similarity: float) -> Similar:
    """The user's records close in meaning to the whole task, at most as many as the counts could take."""
    # A task is the person's text, not a checked query: NULs and lone surrogates (which the
    # literal terms skip) must not make the search by meaning refuse it.
    query = task.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8").strip()[: limits.max_query_chars]
    if not query:
        return {}
    wanted = min(limits.retrieval_max_preferences + limits.retrieval_max_episodes, limits.max_search_limit)
    return {(record["kind"], record["key"]): (record, record["similarity"])
            for record in store.search_by_meaning(user, query, limit=wanted, min_similarity=min_similarity)}


def _ranked(kind: str, found: Found, similar: Similar) -> list[tuple[Record, str]]:
    """The candidates of one kind, best first, each with why it was chosen (`matched_by`).

    Literal hits first (the task names them): most terms matched, then newest. Then records found
    by meaning alone, most similar first.
    """
    hits = [(rec, terms) for (k, _), (rec, terms) in found.items() if k == kind]
    hits.sort(key=lambda hit: (len(hit[1]), hit[0]["updated_at"]), reverse=True)
    literal = []
    for rec, terms in hits:
        why = "terms: " + ", ".join(terms)
        if (kind, rec["key"]) in similar:
            why += f"; similarity {similar[(kind, rec['key'])][1]:.2f}"
        literal.append((rec, why))
    meaning = [(rec, f"similarity {sim:.2f}") for (k, key), (rec, sim) in similar.items()
               if k == kind and (k, key) not in found]
    return literal + meaning


def _pack(candidates: list[tuple[Record, str]], budget_chars: int,
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
    """Whole records in rank order while they fit the budget: the memory, the report and its size."""
    memory: list[dict[str, Any]] = []
    packing: list[dict[str, Any]] = []
    size = 2  # "[]"
    for record, matched_by in candidates:
        item = {"kind": record["kind"], "key": record["key"], "value": record["value"]}
        chars = json_chars(item)
        cost = chars + (1 if memory else 0)  # and the comma that joins it to the previous record
        row = {"kind": item["kind"], "key": item["key"], "matched_by": matched_by, "chars": chars}
        if size + cost <= budget_chars:
            memory.append(item)
            size += cost
            packing.append({**row, "status": "included", "reason": ""})
        else:
            packing.append({**row, "status": "skipped",
                            "reason": f"would make memory {size + cost} chars; budget {budget_chars}"})
    return memory, packing, size
