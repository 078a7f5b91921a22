"""The fixture model: a rule-following stand-in for a real model, so the kit runs with no credentials.

What is worth remembering is decided by a policy (`memkit.remembering.worth_remembering` unless
another is given); the fixture turns its answer into a memory tool call.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..remembering import ONE_OFF, Policy, worth_remembering
from .scripted import ModelReply, RecordingModel, call, say, user_envelope


# "My ticket number is T-4471": a fact told in the conversation, not a request to save it.
_TOLD = re.compile(r"^my ([a-z][a-z0-9 _-]*?) is (.+?)[.!]?$", re.I)
# "What was my ticket number?": a question the recent conversation may answer.
_ASKED = re.compile(r"^what(?:'s| is| was) my ([a-z][a-z0-9 _-]*?)\??$", re.I)


def propose(task: str, policy: Policy = worth_remembering) -> tuple[str, dict[str, str]] | None:
    """The memory tool call the fixture model proposes for what the person said, or None.

    `policy` decides what is worth remembering (default: `memkit.remembering.worth_remembering`);
    this only turns its answer into a `memory_put` or `memory_delete` call.

    Example:
        >>> propose("I moved to Porto")
        ('memory_put', {'kind': 'preference', 'key': 'city', 'value': 'Porto'})
    """
    change = policy(task)
    if change is None:
        return None
    if change.action == "delete":
        return "memory_delete", {"kind": change.kind, "key": change.key}
    return "memory_put", {"kind": change.kind, "key": change.key, "value": change.value or ""}


class FixtureModel(RecordingModel):
    """A rule-following stand-in for a real model, so the kit runs with no credentials.

    What its policy proposes (`worth_remembering` unless `policy=` names another) becomes a
    `memory_put` or `memory_delete` call; "my THING is VALUE" about anything else (a ticket number)
    is acknowledged, as it lives in the conversation; "what was my THING?" is answered from the
    newest such turn of the recent history; anything else from the retrieved memory. After tool
    results it reports them. Proposing is all it can do: the tools decide.
    """

    def __init__(self, policy: Policy = worth_remembering) -> None:
        super().__init__()
        self.policy = policy

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """A reply by the rules above."""
        self._record(messages, tools)
        if messages[-1]["role"] == "tool":
            return say(" ".join(self._report(json.loads(m["content"])) for m in messages if m["role"] == "tool"))
        envelope = user_envelope(messages)
        task = envelope["task"].strip()
        if proposed := propose(task, self.policy):
            return self._numbered(call(*proposed))
        if ONE_OFF.search(task) and not task.endswith("?"):
            return say("Understood, for this time only: nothing to remember.")
        if match := _TOLD.search(task):
            return say(f"Noted: your {match.group(1).strip()} is {match.group(2).strip()}.")
        if (match := _ASKED.search(task)) and (told := _recall(envelope.get("recent_history") or [], match.group(1))):
            return say(f"From our conversation: your {match.group(1).strip()} is {told}.")
        memory = envelope.get("retrieved_memory") or []
        if not memory:
            return say("I have nothing in memory about that yet.")
        facts = "; ".join(f"{m['kind']} {m['key']} = {m['value']}" for m in memory)
        return say(f"From memory: {facts}.")

    @staticmethod
    def _report(outcome: dict[str, Any]) -> str:
        if not outcome.get("ok"):
            return f"I could not do that: {outcome.get('error')}."
        result = outcome.get("result")
        if isinstance(result, dict) and "revision" in result:
            return f"Saved {result['kind']} {result['key']} = {result['value']} (revision {result['revision']})."
        if isinstance(result, dict) and "deleted" in result:
            return "Deleted." if result["deleted"] else "There was nothing to delete."
        if isinstance(result, dict) and result.get("status") == "waiting_for_approval":
            # As a model should: say it waits for the person, never that it was done.
            return f"I have proposed this; it waits for your approval: {result['proposed']}."
        return f"Result: {json.dumps(result, ensure_ascii=False)}."


def _recall(history: list[dict[str, str]], thing: str) -> str | None:
    """The value the user last gave for `thing` in the recent history ("my THING is VALUE"), if any."""
    wanted = " ".join(thing.lower().split())
    for exchange in reversed(history):
        told = _TOLD.search(exchange.get("user", "").strip())
        if told and " ".join(told.group(1).lower().split()) == wanted:
            return told.group(2).strip()
    return None
