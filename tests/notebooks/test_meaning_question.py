"""Notebook 10's exercise (b), judged on the idea: a question whose answer is Alice's diet record,
which literal retrieval misses and retrieval by meaning ranks first of her records.

Alice's records are the notebook's, in a real SQLite store with the real embedding model; the
questions are ones a teacher would accept (honest paraphrases, most of them far under the 0.3
threshold the notebook's retrieval uses) and ones a teacher would not.
"""

from __future__ import annotations

import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)
import pytest

from memkit import FakeClock, MemoryStore

semantic = pytest.importorskip("memkit.semantic")

from classroom.meaning_question import ask_both, check_meaning_question  # noqa: E402

ALICE = [("preference", "drink", "decaf latte"), ("preference", "diet", "vegetarian"),
         ("preference", "flight_seat", "window seat"), ("preference", "pet", "a cat named Miso"),
         ("preference", "city", "lives in Porto"), ("preference", "allergy", "peanuts"),
         ("episode", "trip.kyoto", "visited the temples of Kyoto in May")]

ACCEPTED = ["Do I eat meat?", "Can I have a steak?", "What kind of food do I eat?", "Is chicken okay for me?",
            "What should I cook for dinner?", "Is beef fine for me?", "Can you book me a steakhouse?"]
REFUSED = [("Am I vegetarian?", "literal retrieval already finds the diet record"),
           ("Is my diet strict?", "literal retrieval already finds the diet record"),
           ("What is the weather like?", "the diet record scored"),
           ("What coffee do I like?", "came #"),
           ("Do I have any pets?", "came #2"),
           ("Tell me about my cat", "came #2"),
           ("What am I allergic to?", "the diet record scored")]


@pytest.fixture(scope="module")
def alice(tmp_path_factory):
    path = tmp_path_factory.mktemp("meaning") / "memory.sqlite3"
    with MemoryStore(path, clock=FakeClock(step_seconds=1), embedder=semantic.load_embedder()) as store:
        for kind, key, value in ALICE:
            store.put("alice", "setup", kind, key, value)
        yield store


@pytest.mark.parametrize("question", ACCEPTED)
def test_an_honest_paraphrase_is_right(alice, question):
    verdict = check_meaning_question(ask_both(alice, "alice", question))
    assert verdict.right and "ranked it first" in verdict.message, verdict


@pytest.mark.parametrize(("question", "said"), REFUSED, ids=[r[0] for r in REFUSED])
def test_a_question_a_teacher_would_not_accept_is_wrong_with_its_reason(alice, question, said):
    verdict = check_meaning_question(ask_both(alice, "alice", question))
    assert verdict.state == "wrong" and said in verdict.message, verdict
