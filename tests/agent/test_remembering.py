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
]


@pytest.mark.parametrize(("said", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_default_policy_reads_one_utterance(said, expected):
    assert worth_remembering(said) == expected


def test_the_fixture_model_proposes_what_its_policy_says(store):
    """A policy that keeps 'I'm based in X' (the default does not) changes what the model proposes."""

    def based_in(said: str) -> MemoryChange | None:
        if said.lower().startswith("i'm based in "):
            return MemoryChange("put", "preference", "city", said[len("I'm based in "):])
        return worth_remembering(said)

    async def talk(model: FixtureModel, session: str) -> list[str]:
        agent = MemoryAgent(store, "sam", session, model, unconfirmed="propose")
        reply = await agent.ask("I'm based in Lisbon")
        return [call["name"] for call in reply.tool_results]

    assert asyncio.run(talk(FixtureModel(), "s1")) == []
    assert store.proposals("sam") == []
    assert asyncio.run(talk(FixtureModel(policy=based_in), "s2")) == ["memory_put"]
    [waiting] = store.proposals("sam")
    assert (waiting["key"], waiting["value"], waiting["status"]) == ("city", "Lisbon", "pending")
    assert store.get("sam", "preference", "city") is None  # proposed, not saved
