"""Retrieval by meaning, measured: recall at 3 on a labelled set made here, and the time at the quota.

    python -m bench.semantic_bench                 # writes the "Retrieval by meaning" section of RESULTS.md
    python -m bench.semantic_bench --out /tmp/b    # somewhere else
    python -m bench.semantic_bench --no-postgres   # SQLite only

The labelled set: 40 records of four users (ten each: preferences and episodes), 34 questions, each
with the one record that answers it, and 3 questions of a user who holds no answer (another user
does). Written for this kit, not drawn from a benchmark: questions a person would ask an assistant,
some sharing a word with their record ("which seat do I want?"), most not ("what coffee do I
like?" for "espresso, no sugar"). Recall at 3: the share of questions whose record is among the
first three a ranking returns. Three rankings, all of one user's records:

- literal: the retrieval's rule (the task's terms, a case-folded substring of key or value),
  ranked by how many terms matched, then newest first;
- by meaning: `search_by_meaning` (cosine similarity of the embeddings, above the threshold);
- combined: the literal hits first, then the records found by meaning alone (what `retrieve` does
  within each kind).

Also: how many records of OTHER users a by-meaning search returns (the store: none, by
construction; a global nearest-neighbour search filtered afterwards is shown beside it), and the
time of a search by meaning and of a whole `retrieve` for a user at the per-user quota, on SQLite
and on PostgreSQL (pgvector in SQL, and the Python path on the same server).
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from .sections import write_section

HERE = Path(__file__).resolve().parent
SECTION = "## Retrieval by meaning"

RECORDS: list[tuple[str, str, str, str]] = [
    ("alice", "preference", "drink", "espresso, no sugar"),
    ("alice", "preference", "flight_seat", "window seat"),
    ("alice", "preference", "diet", "vegetarian"),
    ("alice", "preference", "name", "call me Ali"),
    ("alice", "preference", "city", "lives in Porto"),
    ("alice", "episode", "trip.kyoto", "visited the temples of Kyoto in May 2025"),
    ("alice", "episode", "pet", "adopted a cat named Miso"),
    ("alice", "episode", "allergy", "reacted badly to peanuts at a dinner"),
    ("alice", "preference", "music", "listens to jazz while working"),
    ("alice", "episode", "job", "started a new job as a nurse at the hospital"),
    ("bob", "preference", "drink", "green tea in the afternoon"),
    ("bob", "preference", "flight_seat", "aisle seat, close to the front"),
    ("bob", "preference", "sport", "plays football on Sundays"),
    ("bob", "preference", "language", "answers in Portuguese please"),
    ("bob", "episode", "car", "bought a used electric car"),
    ("bob", "episode", "surgery", "knee operation in March"),
    ("bob", "preference", "pet", "has two dogs, Rex and Bolt"),
    ("bob", "episode", "wedding", "got married in Lisbon last June"),
    ("bob", "preference", "reading", "reads science fiction novels"),
    ("bob", "episode", "move", "moved from Berlin to Munich"),
    ("chen", "preference", "drink", "cappuccino with oat milk"),
    ("chen", "preference", "diet", "lactose intolerant"),
    ("chen", "episode", "trip.alps", "hiked in the Swiss Alps last summer"),
    ("chen", "preference", "hobby", "paints watercolours"),
    ("chen", "preference", "transport", "cycles to work"),
    ("chen", "episode", "kids", "daughter started school in September"),
    ("chen", "preference", "music", "plays the violin"),
    ("chen", "episode", "loss", "left her wallet on the train"),
    ("chen", "preference", "schedule", "prefers meetings in the morning"),
    ("chen", "episode", "baking", "learned to bake sourdough bread"),
    ("dara", "preference", "drink", "decaf latte"),
    ("dara", "preference", "flight_seat", "exit row for the legroom"),
    ("dara", "preference", "sport", "runs marathons"),
    ("dara", "episode", "exam", "passed the driving test"),
    ("dara", "preference", "diet", "gluten free"),
    ("dara", "episode", "house", "bought an apartment with a balcony"),
    ("dara", "preference", "pet", "allergic to cats"),
    ("dara", "episode", "illness", "had the flu in January"),
    ("dara", "preference", "tv", "watches cooking shows"),
    ("dara", "preference", "phone", "uses an Android phone"),
]
"""(user, kind, key, value): ten records of each of four users."""

QUESTIONS: list[tuple[str, str, str | None]] = [
    ("alice", "What coffee do I like?", "drink"),
    ("alice", "Which seat do I want on a plane?", "flight_seat"),
    ("alice", "Do I eat meat?", "diet"),
    ("alice", "What should you call me?", "name"),
    ("alice", "Where do I live?", "city"),
    ("alice", "Tell me about my holiday in Japan", "trip.kyoto"),
    ("alice", "Do I have any pets?", "pet"),
    ("alice", "What food allergies do I have?", "allergy"),
    ("alice", "What kind of music do I enjoy?", "music"),
    ("alice", "What is my profession?", "job"),
    ("bob", "What hot drink do I have after lunch?", "drink"),
    ("bob", "Window or aisle when flying?", "flight_seat"),
    ("bob", "What sport do I play at the weekend?", "sport"),
    ("bob", "Which language should you reply in?", "language"),
    ("bob", "What vehicle do I drive?", "car"),
    ("bob", "Did I have any medical procedures?", "surgery"),
    ("bob", "What are my dogs called?", "pet"),
    ("bob", "Where was my wedding?", "wedding"),
    ("bob", "What books do I like?", "reading"),
    ("bob", "Which city did I relocate to?", "move"),
    ("chen", "How do I take my coffee?", "drink"),
    ("chen", "Can I have dairy?", "diet"),
    ("chen", "Where did I go hiking?", "trip.alps"),
    ("chen", "What art do I make?", "hobby"),
    ("chen", "How do I commute?", "transport"),
    ("chen", "What instrument do I play?", "music"),
    ("chen", "What did I lose on my journey?", "loss"),
    ("chen", "When do I like to schedule meetings?", "schedule"),
    ("dara", "What coffee do I order?", "drink"),
    ("dara", "Where do I like to sit on flights?", "flight_seat"),
    ("dara", "Can I eat bread?", "diet"),
    ("dara", "Did I get my driving licence?", "exam"),
    ("dara", "Should I get a kitten?", "pet"),
    ("dara", "What exercise do I do?", "sport"),
    # No answer among the asker's records (another user holds one): a ranking should return little.
    ("alice", "Which football team do I support?", None),
    ("chen", "What car do I drive?", None),
    ("dara", "Where did I get married?", None),
]
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


def _median_time(call: Callable[[], Any], repeat: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def timing_at_quota(store: Any, embedder: Any, repeat: int) -> dict[str, float]:
    """Median seconds for a user holding the per-user quota's records, among others at the quota."""
    from memkit import retrieve

    quota = store.limits.max_records_per_user
    users = store.limits.max_records_total // quota  # the store full: every user at the quota
    for u in range(users):
        with store.transaction():
            for n in range(quota):
                user, kind, key, value = RECORDS[(u * quota + n) % len(RECORDS)]
                store.put(f"q{u}", "bench", kind, f"{key}.{n}", f"{value} ({n})")
    question = "What coffee do I like?"
    return {
        "records_per_user": quota, "users": users,
        "embed_question": _median_time(lambda: embedder.embed([question]), repeat),
        "search_by_meaning": _median_time(lambda: store.search_by_meaning("q0", question, limit=3), repeat),
        "literal_search_many": _median_time(lambda: store.search_many("q0", ["coffee"], limit=8), repeat),
        "retrieve_literal": _median_time(lambda: retrieve(store, "q0", question, by_meaning=False), repeat),
        "retrieve_combined": _median_time(lambda: retrieve(store, "q0", question, by_meaning=True), repeat),
    }


def run(postgres: bool = True, repeat: int = 50) -> dict[str, Any]:
    from memkit.semantic import load_embedder
    from memkit.store import MemoryStore

    started = time.perf_counter()
    embedder = load_embedder()
    load_s = time.perf_counter() - started
    results: dict[str, Any] = {"model": embedder.name, "load_s": load_s}
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


def _postgres_timing(embedder: Any, repeat: int) -> dict[str, dict[str, float]]:
    """The same on the pgserver wheel's PostgreSQL 16 (it has pgvector): ranked in SQL by pgvector,
    and in Python (the path of a server without it) on the same rows, alternating call by call so
    that both see the same load."""
    from memkit import retrieve
    from memkit.store import PostgresStore, start_embedded_postgres

    question = "What coffee do I like?"
    with start_embedded_postgres() as server, PostgresStore(server.url, schema="quota", embedder=embedder) as store:
        vector_schema = store.vector_schema
        if vector_schema is None:
            return {}
        base = timing_at_quota(store, embedder, 3)  # fills the store; its times are redone below
        calls = {
            "search_by_meaning": lambda: store.search_by_meaning("q0", question, limit=3),
            "retrieve_combined": lambda: retrieve(store, "q0", question, by_meaning=True),
            "literal_search_many": lambda: store.search_many("q0", ["coffee"], limit=8),
            "retrieve_literal": lambda: retrieve(store, "q0", question, by_meaning=False),
            "embed_question": lambda: embedder.embed([question]),
        }
        times: dict[str, dict[str, list[float]]] = {"pgvector": {k: [] for k in calls},
                                                    "Python": {k: [] for k in calls}}
        for _ in range(repeat):
            for path in ("pgvector", "Python"):
                store.vector_schema = vector_schema if path == "pgvector" else None
                for name, call in calls.items():
                    started = time.perf_counter()
                    call()
                    times[path][name].append(time.perf_counter() - started)
        store.vector_schema = vector_schema
    return {f"PostgreSQL ({path})": {**{k: base[k] for k in ("records_per_user", "users")},
                                     **{k: statistics.median(v) for k, v in figures.items()}}
            for path, figures in times.items()}


def _time(seconds: float) -> str:
    if seconds != seconds:
        return "–"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def markdown(results: dict[str, Any]) -> str:
    """The section of RESULTS.md."""
    from memkit.semantic import DEFAULT_MIN_SIMILARITY

    chosen = next(s for s in results["sweep"] if s["threshold"] == DEFAULT_MIN_SIMILARITY)
    n = chosen["questions"]
    lines = [
        SECTION, "",
        f"Written by `python -m bench.semantic_bench` on {dt.date.today().isoformat()}. Machine: "
        f"{platform.system()} {platform.machine()}, Python {platform.python_version()}. Model "
        f"`{results['model']}` (the `semantic` extra), loaded in {results['load_s']:.2f} s.",
        "",
        f"The labelled set (in `bench/semantic_bench.py`): {len(RECORDS)} records of 4 users, {n} questions "
        "with the record that answers them, and 3 questions of a user who holds no answer (another user "
        "does). Recall at 3: the share of questions whose record is among the first three a ranking returns. "
        "Literal: the retrieval's rule (task terms, case-folded substrings), most terms first; by meaning: "
        "`search_by_meaning`; combined: literal hits first, then by meaning (what `retrieve` does).",
        "",
        f"### Recall at 3 (threshold {DEFAULT_MIN_SIMILARITY}, the default)",
        "",
        "| ranking | found | recall at 3 |",
        "|---|---:|---:|",
    ]
    for name, label in (("literal", "literal"), ("meaning", "by meaning"), ("combined", "combined")):
        lines.append(f"| {label} | {chosen['hits'][name]} of {n} | {chosen['recall'][name]:.2f} |")
    lines += [
        "",
        "### The threshold",
        "",
        "| threshold | by meaning | combined | records returned for the 3 no-answer questions (by meaning) |",
        "|---:|---:|---:|---:|",
    ]
    for sweep in results["sweep"]:
        lines.append(f"| {sweep['threshold']} | {sweep['recall']['meaning']:.2f} | {sweep['recall']['combined']:.2f} | "
                     f"{sweep['no_answer_hits']['meaning']} |")
    glob = results["global"]
    lines += [
        "",
        "### Another user's records",
        "",
        f"By-meaning searches returned **{sum(s['leaked'] for s in results['sweep'])}** records of another "
        f"user, over {len(QUESTIONS)} questions at {len(THRESHOLDS)} thresholds (the store reads the asking "
        "user's vectors alone; `tests/test_semantic.py` checks it on every backend with hypothesis). For "
        f"contrast, the three nearest vectors of the whole store held another user's record for "
        f"{glob['with_foreign_records']} of {glob['questions']} questions: a search that forgot the user "
        f"filter would hand those out, and filtering afterwards left fewer than three of the user's own "
        f"records for {glob['fewer_than_3_own_after_filter']}.",
        "",
        "### Questions, and the first three each ranking returned (threshold "
        f"{DEFAULT_MIN_SIMILARITY})",
        "",
        "Bold: the record that answers the question. Similarity: the answer's, whether or not it passed the threshold.",
        "",
        "| user | question | answer | similarity | literal | by meaning | combined |",
        "|---|---|---|---:|---|---|---|",
    ]
    for row in chosen["rows"]:
        def cell(keys: list[str]) -> str:
            return ", ".join(f"**{k}**" if k == row["answer"] else k for k in keys) or "–"
        sim = f"{row['similarity']:.2f}" if row["similarity"] is not None else "–"
        lines.append(f"| {row['user']} | {row['question']} | {row['answer'] or '(none)'} | {sim} | "
                     f"{cell(row['literal'])} | {cell(row['meaning'])} | {cell(row['combined'])} |")
    lines += [
        "",
        "### Time at the per-user quota",
        "",
        "A user holding the per-user quota's records, in a store full of users at the quota; medians. "
        "A search by meaning embeds the question, then reads and ranks the user's vectors; "
        "`retrieve` combined adds it to the literal retrieval. Measured on a shared 2-core machine while "
        "other work ran, so the PostgreSQL figures especially are noisy; there the Python path's cost is "
        "mostly psycopg turning the user's `real[]` vectors into Python floats, which pgvector avoids.",
        "",
        "| store | records of the user | users | embed the question | search by meaning | literal search | "
        "retrieve (literal) | retrieve (combined) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in results["timing"].items():
        lines.append(f"| {name} | {t['records_per_user']} | {t['users']} | {_time(t['embed_question'])} | "
                     f"{_time(t['search_by_meaning'])} | {_time(t['literal_search_many'])} | "
                     f"{_time(t['retrieve_literal'])} | {_time(t['retrieve_combined'])} |")
    return "\n".join(lines) + "\n"




def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.semantic_bench", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="the folder of RESULTS.md (default: bench/)")
    parser.add_argument("--postgres", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--repeat", type=int, default=50, help="timed calls per figure (default 50)")
    args = parser.parse_args(argv)
    results = run(postgres=args.postgres, repeat=args.repeat)
    args.out.mkdir(parents=True, exist_ok=True)
    write_section(args.out / "RESULTS.md", markdown(results))
    print(markdown(results))


if __name__ == "__main__":
    main()
