"""The fixture model: a rule-following stand-in for a real model, so the kit runs with no credentials.

Its phrase table (`propose`, `STATEMENTS`) decides which memory tool call it proposes for what the
person said; the goldfish agent of `classroom.lab` reads the same table.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .scripted import ModelReply, RecordingModel, call, say, user_envelope


REMEMBER_RULE = re.compile(r"remember (?:that )?my ([a-z][a-z0-9_ .:-]*?) is (.+?)\.?$", re.I)
"""The fixture's explicit phrase for saving a preference ("remember my KEY is VALUE"); the goldfish
agent of `classroom.lab` follows the same one."""
_EPISODE = re.compile(r"note (?:the )?episode ([a-z][a-z0-9_.:-]*): (.+?)$", re.I)
_FORGET = re.compile(r"^forget (?:about )?(?:my )?(episode )?([a-z][a-z0-9 _.:-]*?)$", re.I)
# "My ticket number is T-4471": a fact told in the conversation, not a request to save it.
_TOLD = re.compile(r"^my ([a-z][a-z0-9 _-]*?) is (.+?)[.!]?$", re.I)
# "What was my ticket number?": a question the recent conversation may answer.
_ASKED = re.compile(r"^what(?:'s| is| was) my ([a-z][a-z0-9 _-]*?)\??$", re.I)

PROFILE_KEYS = ("city", "drink", "name", "diet", "language", "pet", "food", "allergy")
"""The stable facts about a person that the fixture proposes to keep when it is told them plainly
("My city is Lisbon"); any other "my THING is VALUE" (a ticket number) stays in the conversation."""

_KEYS = "|".join(PROFILE_KEYS)
STATEMENTS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(rf"^my (?:favou?rite |usual )?(?P<key>{_KEYS}) is (?P<value>.+)$", re.I), None),
    (re.compile(r"^i (?:now )?(?:live|am living|'m living) in (?P<value>.+)$", re.I), "city"),
    (re.compile(r"^i(?:'ve| have| just)? moved to (?P<value>.+)$", re.I), "city"),
    (re.compile(r"^i(?:'m| am) (?:a )?(?P<value>vegetarian|vegan|pescatarian)$", re.I), "diet"),
    (re.compile(r"^i(?:'m| am) allergic to (?P<value>.+)$", re.I), "allergy"),
    (re.compile(r"^(?:you can |please )?call me (?P<value>.+)$", re.I), "name"),
    (re.compile(r"^i (?:usually )?drink (?P<value>.+)$", re.I), "drink"),
    (re.compile(r"^i speak (?P<value>.+)$", re.I), "language"),
)
"""What the fixture understands as a stable fact worth keeping: (pattern, preference key); a key of
None comes from the pattern's `key` group. Each pattern reads a whole statement."""

ONE_OFF = re.compile(r"\b(?:this time|just this once|for now|today|tonight|this week|right now|"
                     r"for this (?:answer|reply|question|chat))\b", re.I)
"""Words that make a request a one-off ("answer in French this time"): nothing to remember."""

_REMEMBER_THAT = re.compile(r"^remember (?:that )?(?P<rest>.+)$", re.I)
_FORGET_CITY = re.compile(r"^forget (?:where i live|my address)$", re.I)
_POLITE = re.compile(r"^(?:please|ok|okay|so|btw|by the way|oh|hi|hello)[,!]?\s+", re.I)
_STOPWORDS = {"a", "an", "the", "that", "my", "i", "is", "am", "to", "on", "in", "at", "of", "was"}


def _key(text: str) -> str:
    return "_".join(text.strip().lower().split())


def _clean(value: str) -> str:
    """A value as the person meant it: no trailing punctuation, quotes or "now"."""
    value = value.strip().rstrip(".!").strip()
    value = re.sub(r"\s+now$", "", value, flags=re.I)
    return value.strip("\"'").strip()


def _statement(text: str) -> tuple[str, str] | None:
    """The (key, value) of a preference a plain statement tells, by the table `STATEMENTS`."""
    for pattern, key in STATEMENTS:
        if match := pattern.match(text):
            value = _clean(match.group("value"))
            if value:
                return (key or _key(match.group("key"))), value
    return None


def propose(task: str) -> tuple[str, dict[str, str]] | None:
    """The memory tool call the fixture model proposes for what the person said, or None.

    Deterministic, and small on purpose (a table of patterns, not a language model):

    - an explicit request: "remember my KEY is VALUE", "remember that I live in Lisbon", "remember
      that the dentist moved to Friday" (an episode), "note episode KEY: VALUE";
    - a plain statement of a stable fact, by `STATEMENTS`: "My city is Lisbon", "I live in Lisbon",
      "I moved to Porto", "I'm vegetarian", "call me Sam";
    - a request to forget: "forget my city", "forget where I live", "forget episode KEY";
    - a one-off instruction ("answer in French this time") proposes nothing, nor does a question.

    Returns:
        (tool name, arguments) for `memory_put` or `memory_delete`, or None.

    Example:
        >>> propose("I moved to Porto")
        ('memory_put', {'kind': 'preference', 'key': 'city', 'value': 'Porto'})
    """
    text = _POLITE.sub("", " ".join(task.split())).rstrip("?.! ")
    text = re.sub(r",?\s+please$", "", text, flags=re.I)
    if not text or task.strip().endswith("?"):
        return None
    if match := REMEMBER_RULE.match(text):
        return "memory_put", {"kind": "preference", "key": _key(match.group(1)), "value": _clean(match.group(2))}
    if match := _EPISODE.match(text):
        return "memory_put", {"kind": "episode", "key": match.group(1).lower(), "value": _clean(match.group(2))}
    if _FORGET_CITY.match(text):
        return "memory_delete", {"kind": "preference", "key": "city"}
    if match := _FORGET.match(text):
        kind = "episode" if match.group(1) else "preference"
        return "memory_delete", {"kind": kind, "key": _key(match.group(2))}
    if match := _REMEMBER_THAT.match(text):
        rest = match.group("rest")
        if told := _statement(rest):
            return "memory_put", {"kind": "preference", "key": told[0], "value": told[1]}
        words = [w for w in re.findall(r"[a-z0-9]+", rest.lower()) if w not in _STOPWORDS][:3]
        if words and words[0][0].isalpha():
            value = _clean(rest)
            return "memory_put", {"kind": "episode", "key": "note." + "-".join(words),
                                  "value": value[:1].upper() + value[1:]}
        return None
    if ONE_OFF.search(text):
        return None
    if told := _statement(text):
        return "memory_put", {"kind": "preference", "key": told[0], "value": told[1]}
    return None


class FixtureModel(RecordingModel):
    """A rule-following stand-in for a real model, so the kit runs with no credentials.

    What `propose` understands becomes a `memory_put` or `memory_delete` call (a one-off instruction
    does not); "my THING is VALUE" about anything else (a ticket number) is acknowledged, as it lives
    in the conversation; "what was my THING?" is answered from the newest such turn of the recent
    history; anything else from the retrieved memory. After tool results it reports them. Proposing
    is all it can do: the tools decide.
    """

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """A reply by the rules above."""
        self._record(messages, tools)
        if messages[-1]["role"] == "tool":
            return say(" ".join(self._report(json.loads(m["content"])) for m in messages if m["role"] == "tool"))
        envelope = user_envelope(messages)
        task = envelope["task"].strip()
        if proposed := propose(task):
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
