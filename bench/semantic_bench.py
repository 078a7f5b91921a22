"""Retrieval by meaning, measured: recall at 3 on a labelled set made here, and the time at the quota.

The labelled set (`semantic_set.json`): 40 records of four users, 34 questions each with the record
that answers it, and 3 questions of a user who holds no answer. Three rankings of one user's records:
literal (the retrieval's rule, most terms first, then newest), by meaning (`search_by_meaning`) and
combined (literal hits, then by meaning: what `retrieve` does). Also how many records of other users
a search returns (none; a global search filtered afterwards beside it), and the time of a search by
meaning and of `retrieve` for a user at the quota, on SQLite and PostgreSQL (pgvector and Python).
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .timing import median_time

_SET = json.loads((Path(__file__).resolve().parent / "semantic_set.json").read_text(encoding="utf-8"))
RECORDS: list[tuple[str, str, str, str]] = [tuple(r) for r in _SET["records"]]
"""(user, kind, key, value): ten records of each of four users."""
QUESTIONS: list[tuple[str, str, str | None]] = [tuple(q) for q in _SET["questions"]]
"""(user, question, the key of the record that answers it, or None where the user holds none)."""

THRESHOLDS = (0.2, 0.25, 0.3, 0.35, 0.4)


def fill(store: Any) -> None:
    """The labelled records, in order (so "newest first" is the same in every run)."""
    for user, kind, key, value in RECORDS:
        store.put(user, "bench", kind, key, value)


def literal_ranking(store: Any, user: str, question: str) -> list[dict[str, Any]]:
    """The retrieval's literal rule, across both kinds: most terms matched first, then newest."""
    from memkit.retrieval import task_terms

    terms = task_terms(question)
    hits = store.search_many(user, terms, limit=store.limits.max_search_limit) if terms else {}
    found: dict[tuple[str, str], tuple[dict[str, Any], int]] = {}
    for (_, kind), records in hits.items():
        for record in records:
            rec, count = found.get((kind, record["key"]), (record, 0))
            found[(kind, record["key"])] = (rec, count + 1)
    ranked = sorted(found.values(), key=lambda hit: hit[0]["updated_at"], reverse=True)  # newest first
    ranked.sort(key=lambda hit: hit[1], reverse=True)  # then most terms matched (a stable sort)
    return [rec for rec, _ in ranked]


def meaning_ranking(store: Any, user: str, question: str, threshold: float) -> list[dict[str, Any]]:
    return store.search_by_meaning(user, question, limit=10, min_similarity=threshold)


def combined_ranking(literal: list[dict[str, Any]], meaning: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Literal hits first, then records found by meaning alone, most similar first (`retrieve`'s rule)."""
    seen = {(r["kind"], r["key"]) for r in literal}
    return literal + [r for r in meaning if (r["kind"], r["key"]) not in seen]


def recall_at_3(store: Any, threshold: float) -> dict[str, Any]:
    """Recall at 3 of the three rankings, per question and in all; and what the no-answer questions got."""
    rows = []
    for user, question, answer in QUESTIONS:
        literal = literal_ranking(store, user, question)
        meaning = meaning_ranking(store, user, question, threshold)
        combined = combined_ranking(literal, meaning)
        own = {r["key"] for r in store.records(user)}
        leaked = sum(1 for r in meaning if r["key"] not in own)
        rows.append({"user": user, "question": question, "answer": answer,
                     "literal": [r["key"] for r in literal[:3]], "meaning": [r["key"] for r in meaning[:3]],
                     "combined": [r["key"] for r in combined[:3]], "leaked": leaked,
                     "similarity": next((r["similarity"] for r in store.search_by_meaning(
                         user, question, limit=50, min_similarity=-1.0) if r["key"] == answer), None)})
    answered = [r for r in rows if r["answer"] is not None]
    share = {name: sum(r["answer"] in r[name] for r in answered) for name in ("literal", "meaning", "combined")}
    unanswerable = [r for r in rows if r["answer"] is None]
    return {"threshold": threshold, "questions": len(answered), "hits": share,
            "recall": {name: n / len(answered) for name, n in share.items()},
            "no_answer_hits": {name: sum(len(r[name]) for r in unanswerable) for name in ("literal", "meaning")},
            "leaked": sum(r["leaked"] for r in rows), "rows": rows}


def global_then_filtered(store: Any, embedder: Any) -> dict[str, int]:
    """The wrong order, for contrast: the 3 nearest vectors of the WHOLE store, then the user filter.

    Read past the store's API (which offers no such search): every user's vectors ranked together.
    Counts the questions whose global top 3 holds another user's record (handed out if the filter
    were forgotten), and those whose answer the filter then drops to fewer than 3 own records.
    """
    import numpy

    rows = store.connection.execute(
        "SELECT m.user_id, m.memory_key, e.vector FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
    ).fetchall()
    vectors = numpy.stack([numpy.frombuffer(r[2], dtype="<f4") for r in rows])
    foreign = short = 0
    for user, question, _ in QUESTIONS:
        sims = vectors @ embedder.embed([question])[0]
        top = [rows[i] for i in numpy.argsort(-sims)[:3]]
        foreign += any(r[0] != user for r in top)
        short += sum(r[0] == user for r in top) < 3
    return {"questions": len(QUESTIONS), "with_foreign_records": foreign, "fewer_than_3_own_after_filter": short}


QUESTION = "What coffee do I like?"


def _at_quota(store: Any, embedder: Any) -> tuple[dict[str, int], dict[str, Callable[[], Any]]]:
    """Fill the store with users at the per-user quota; the calls timed for one of them."""
    from memkit import retrieve

    quota = store.limits.max_records_per_user
    users = store.limits.max_records_total // quota  # the store full: every user at the quota
    for u in range(users):
        with store.transaction():
            for n in range(quota):
                _user, kind, key, value = RECORDS[(u * quota + n) % len(RECORDS)]
                store.put(f"q{u}", "bench", kind, f"{key}.{n}", f"{value} ({n})")
    return {"records_per_user": quota, "users": users}, {
        "embed_question": lambda: embedder.embed([QUESTION]),
        "search_by_meaning": lambda: store.search_by_meaning("q0", QUESTION, limit=3),
        "literal_search_many": lambda: store.search_many("q0", ["coffee"], limit=8),
        "retrieve_literal": lambda: retrieve(store, "q0", QUESTION, by_meaning=False),
        "retrieve_combined": lambda: retrieve(store, "q0", QUESTION, by_meaning=True)}


def timing_at_quota(store: Any, embedder: Any, repeat: int) -> dict[str, float]:
    """Median seconds for a user holding the per-user quota's records, among others at the quota."""
    shape, calls = _at_quota(store, embedder)
    return {**shape, **{name: median_time(call, repeat) for name, call in calls.items()}}


def _postgres_timing(embedder: Any, repeat: int) -> dict[str, dict[str, float]]:
    """The same on the pgserver wheel's PostgreSQL 16 (it has pgvector): ranked in SQL by pgvector,
    and in Python (the path of a server without it) on the same rows, alternating call by call so
    that both see the same load."""
    from memkit.store import PostgresStore
    from memkit.store.postgres import start_embedded_postgres

    with start_embedded_postgres() as server, PostgresStore(server.url, schema="quota", embedder=embedder) as store:
        vector_schema = store.vector_schema
        if vector_schema is None:
            return {}
        shape, calls = _at_quota(store, embedder)
        times: dict[str, dict[str, list[float]]] = {"pgvector": {}, "Python": {}}
        for _ in range(repeat):
            for path, schema in (("pgvector", vector_schema), ("Python", None)):
                store.vector_schema = schema
                for name, call in calls.items():
                    times[path].setdefault(name, []).append(median_time(call, 1, warm=False))
        store.vector_schema = vector_schema
    return {f"PostgreSQL ({path})": {**shape, **{k: statistics.median(v) for k, v in figures.items()}}
            for path, figures in times.items()}


def run(postgres: bool = True, repeat: int = 50) -> dict[str, Any]:
    from memkit.semantic import load_embedder
    from memkit.store import MemoryStore

    started = time.perf_counter()
    embedder = load_embedder()
    load_s = time.perf_counter() - started
    results: dict[str, Any] = {"model": embedder.name, "load_s": load_s, "records": len(RECORDS),
                               "questions": len(QUESTIONS)}
    with tempfile.TemporaryDirectory() as scratch:
        with MemoryStore(Path(scratch) / "set.sqlite3", embedder=embedder) as store:
            fill(store)
            results["sweep"] = [recall_at_3(store, t) for t in THRESHOLDS]
            results["global"] = global_then_filtered(store, embedder)
        with MemoryStore(Path(scratch) / "quota.sqlite3", embedder=embedder) as store:
            results["timing"] = {"SQLite": timing_at_quota(store, embedder, repeat)}
        if postgres:
            results["timing"].update(_postgres_timing(embedder, repeat))
    return results
