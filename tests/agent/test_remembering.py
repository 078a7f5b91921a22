"""The remembering policy: a function of what a person said, which the fixture model calls.

The default (`worth_remembering`) keeps what the fixture always proposed; a policy given to
`FixtureModel(policy=...)` decides instead, through a real agent and a real SQLite store.
"""

from __future__ import annotations

import asyncio

import pytest

from memkit import FixtureModel, MemoryAgent
from memkit.remembering import MemoryChange, worth_remembering

CASES = [
    ("I live in Lisbon", MemoryChange("put", "preference", "city", "Lisbon")),
    ("I moved to Porto.", MemoryChange("put", "preference", "city", "Porto")),
    ("By the way, I'm vegan", MemoryChange("put", "preference", "diet", "vegan")),
    ("Remember that the dentist moved to Friday",
     MemoryChange("put", "episode", "note.dentist-moved-friday", "The dentist moved to Friday")),
    ("forget where I live", MemoryChange("delete", "preference", "city")),
    ("answer in French this time", None),
    ("Where do I live?", None),
    ("My sister lives in Berlin", None),
    ("My ticket number is T-4471", None),
    # Where one lives, in the words a teacher would accept (notebook 00's exercise)
    ("I'm based in Lisbon now", MemoryChange("put", "preference", "city", "Lisbon")),
    ("I live in Lisbon these days", MemoryChange("put", "preference", "city", "Lisbon")),
    ("Nowadays, I live in Lisbon", MemoryChange("put", "preference", "city", "Lisbon")),
    ("I've relocated to Lisbon", MemoryChange("put", "preference", "city", "Lisbon")),
    ("Home is Lisbon now", MemoryChange("put", "preference", "city", "Lisbon")),
    ("My home is in Lisbon", MemoryChange("put", "preference", "city", "Lisbon")),
    ("Lisbon is where I live", MemoryChange("put", "preference", "city", "Lisbon")),
    # ... and what only looks like it: a description, another person, a saying
    ("I'm based in a shared office", None),
    ("Tom is home now", None),
    ("My sister is where I live", None),
    ("Home is where the heart is", None),
]

# What the default must not keep: each would be a wrong memory, proposed to a person or (in the
# hot path) offered to every later conversation.
NOT_KEPT = [
    # another person's facts, or words reported from someone else
    "My sister's city is Rome", "My friend lives in Berlin", "Tom is based in Paris",
    "My mum said I live in Lisbon", "She told me I'm vegan", "My husband is vegetarian",
    "Remember my sister lives in Rome, not me?",
    # sayings: a way of living, not a place
    "I live in fear", "I live in hope", "I live in the moment", "Home is where the heart is",
    "My home is my castle",
    # questions, with a question mark or a question tag
    "I moved to Porto?", "Did I say I moved to Porto", "I live in Lisbon, right",
    "I'm vegan, aren't I", "My name is Sam, correct",
    # "never mind", not "forget a record"
    "forget it", "Forget about it", "forget that", "Forget this", "forget everything",
    # a call back, a conversation: not a name, not a language
    "call me later", "Call me when it's ready", "you can call me back tomorrow",
    "I speak to my boss tomorrow", "I speak with an accent",
    # a denial, or two clauses of which a rule cannot tell the fact
    "My name is not important", "My city is none of your business", "I'm not vegan",
    "I moved to Porto last year but now I live in Lisbon", "I live in Lisbon and I work in Porto",
    # what might be, or was
    "I'd live in Paris if I could", "I'll move to Porto next year", "I used to live in Berlin",
]


@pytest.mark.parametrize(("said", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_default_policy_reads_one_utterance(said, expected):
    assert worth_remembering(said) == expected


@pytest.mark.parametrize("said", NOT_KEPT)
def test_the_default_policy_keeps_nothing_of_what_is_not_a_fact_about_the_person(said):
    assert worth_remembering(said) is None


@pytest.mark.parametrize(("said", "expected"), [
    ("Forget about my diet", MemoryChange("delete", "preference", "diet")),
    ("Call me Ishmael", MemoryChange("put", "preference", "name", "Ishmael")),
    ("I speak French and Portuguese", MemoryChange("put", "preference", "language", "French and Portuguese")),
    ("I live in Lisbon, Portugal", MemoryChange("put", "preference", "city", "Lisbon, Portugal")),
    ("My name is Nora", MemoryChange("put", "preference", "name", "Nora")),
])
def test_the_narrowing_rules_leave_the_facts_they_sit_beside(said, expected):
    """Each rule that keeps something out (a saying, "never mind", a call back, a denial) is narrow:
    the fact told plainly in the same words is still kept."""
    assert worth_remembering(said) == expected


def test_the_fixture_model_proposes_what_its_policy_says(store):
    """A policy that keeps 'X is home now' (the default does not: "Tom is home now") changes what the
    model proposes."""

    def home_now(said: str) -> MemoryChange | None:
        if said.lower().endswith(" is home now"):
            return MemoryChange("put", "preference", "city", said[: -len(" is home now")])
        return worth_remembering(said)

    async def talk(model: FixtureModel, session: str) -> list[str]:
        agent = MemoryAgent(store, "sam", session, model, unconfirmed="propose")
        reply = await agent.ask("Lisbon is home now")
        return [call["name"] for call in reply.tool_results]

    assert asyncio.run(talk(FixtureModel(), "s1")) == []
    assert store.proposals("sam") == []
    assert asyncio.run(talk(FixtureModel(policy=home_now), "s2")) == ["memory_put"]
    [waiting] = store.proposals("sam")
    assert (waiting["key"], waiting["value"], waiting["status"]) == ("city", "Lisbon", "pending")
    assert store.get("sam", "preference", "city") is None  # proposed, not saved
