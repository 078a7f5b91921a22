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


@pytest.mark.parametrize(("said", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_default_policy_reads_one_utterance(said, expected):
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
