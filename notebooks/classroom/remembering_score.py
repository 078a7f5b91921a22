"""Scoring a remembering policy: a labelled set of things people say, and what each should change.

Notebook 10 scores `memkit.remembering.worth_remembering`, then the student's own policy, then (with
a live model) a prompt and a JSON schema, all on the same `LABELLED` set: precision (of what it
proposed, how much was right), recall (of what it should have proposed, how much it did) and the
mistakes, one row each.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from memkit import MemoryStore
from memkit.clock import Clock, utc_now
from memkit.remembering import MemoryChange, Policy, worth_remembering

from . import exercises


def _put(key: str, value: str) -> MemoryChange:
    return MemoryChange("put", "preference", key, value)


def _delete(key: str, kind: str = "preference") -> MemoryChange:
    return MemoryChange("delete", kind, key)


LABELLED: tuple[tuple[str, str, MemoryChange | None], ...] = (
    ("I live in Lisbon", "stable fact", _put("city", "Lisbon")),
    ("My name is Samantha", "stable fact", _put("name", "Samantha")),
    ("I'm vegetarian", "stable fact", _put("diet", "vegetarian")),
    ("I'm allergic to peanuts", "stable fact", _put("allergy", "peanuts")),
    ("I speak Portuguese", "stable fact", _put("language", "Portuguese")),
    ("My favourite drink is green tea", "stable fact", _put("drink", "green tea")),
    ("Call me Sam", "stable fact", _put("name", "Sam")),
    ("I usually drink oat flat whites", "stable fact", _put("drink", "oat flat whites")),
    ("I moved to Porto", "changed fact", _put("city", "Porto")),
    ("I've relocated to Évora", "changed fact", _put("city", "Évora")),
    ("I now live in Braga", "changed fact", _put("city", "Braga")),
    ("I've moved to Faro", "changed fact", _put("city", "Faro")),
    ("My diet is vegan now", "changed fact", _put("diet", "vegan")),
    ("I'm vegan now", "changed fact", _put("diet", "vegan")),
    ("My city is Coimbra now", "changed fact", _put("city", "Coimbra")),
    ("Answer in French this time", "one-off", None),
    ("Just this once, keep it short", "one-off", None),
    ("Use bullet points for this answer", "one-off", None),
    ("Today I'd like a formal tone", "one-off", None),
    ("For now, skip the small talk", "one-off", None),
    ("I'm in Paris this week", "one-off", None),
    ("Forget my city", "forget", _delete("city")),
    ("Forget where I live", "forget", _delete("city")),
    ("Please forget my diet", "forget", _delete("diet")),
    ("Forget episode dentist", "forget", _delete("dentist", "episode")),
    ("Stop remembering my drink", "forget", _delete("drink")),
    ("Delete what you know about my allergy", "forget", _delete("allergy")),
    ("Hello!", "small talk", None),
    ("Thanks, that was helpful", "small talk", None),
    ("What a lovely day", "small talk", None),
    ("Haha, good one", "small talk", None),
    ("Where do I live?", "small talk", None),
    ("My ticket number is T-4471", "small talk", None),
    ("I'm based in Lisbon", "paraphrase", _put("city", "Lisbon")),
    ("Home for me is Lisbon these days", "paraphrase", _put("city", "Lisbon")),
    ("I live in Lisbon these days", "paraphrase", _put("city", "Lisbon")),
    ("Lisbon is home now", "paraphrase", _put("city", "Lisbon")),
    ("I don't eat meat", "paraphrase", _put("diet", "vegetarian")),
    ("Everyone calls me Sam", "paraphrase", _put("name", "Sam")),
    ("Remember that I live in Lisbon", "paraphrase", _put("city", "Lisbon")),
    ("Remember my drink is decaf latte", "paraphrase", _put("drink", "decaf latte")),
    ("My sister lives in Berlin", "another person", None),
    ("My husband is vegetarian", "another person", None),
    ("Call my brother Tom tomorrow", "another person", None),
    ("My friend's name is Ana", "another person", None),
    ("My boss drinks espresso", "another person", None),
    ("Tom is home now", "another person", None),
    ("I live in a small flat", "looks like a fact", None),
    ("I drink too much coffee", "looks like a fact", None),
    ("I'm allergic to Mondays", "looks like a fact", None),
    ("I'm based in a shared office", "looks like a fact", None),
)
"""(what a person said, what kind of utterance it is, the change it should make or None)."""

HELD_OUT: tuple[tuple[str, str, MemoryChange | None], ...] = (
    ("My name is Joana", "stable fact", _put("name", "Joana")),
    ("I'm allergic to shellfish", "stable fact", _put("allergy", "shellfish")),
    ("I relocated to Madrid", "changed fact", _put("city", "Madrid")),
    ("I'm pescatarian now", "changed fact", _put("diet", "pescatarian")),
    ("Reply in Spanish just this once", "one-off", None),
    ("Keep it brief tonight", "one-off", None),
    ("Forget my language", "forget", _delete("language")),
    ("Please delete what you know about my diet", "forget", _delete("diet")),
    ("Stop remembering where I live", "forget", _delete("city")),
    ("Good morning!", "small talk", None),
    ("My order number is 55120", "small talk", None),
    ("People call me Jo", "paraphrase", _put("name", "Jo")),
    ("I no longer eat meat", "paraphrase", _put("diet", "vegetarian")),
    ("Madrid is where I live now", "paraphrase", _put("city", "Madrid")),
    ("My partner is vegan", "another person", None),
    ("My mum lives in Faro", "another person", None),
    ("I live in a big house", "looks like a fact", None),
    ("I drink a lot of water", "looks like a fact", None),
)
"""A second labelled set, of the same kinds, that nobody tunes a policy on: kept out of sight while
a rule is written, it says whether the rule learned the language or only the sentences it was
written for (a rule for "I don't eat meat" misses "I no longer eat meat")."""


def describe(change: MemoryChange | None) -> str:
    """A change in a few words: `put city = 'Lisbon'`, `delete diet`, or `nothing`."""
    if change is None:
        return "nothing"
    if change.action == "delete":
        return f"delete {change.key}" + (" (episode)" if change.kind == "episode" else "")
    return f"put {change.key} = {change.value!r}"


def _same(got: MemoryChange | None, wanted: MemoryChange | None) -> bool:
    """The same change, values compared without case or spaces around ('lisbon' is 'Lisbon')."""
    if got is None or wanted is None:
        return got is wanted
    value = (got.value or "").strip().casefold() == (wanted.value or "").strip().casefold()
    return (got.action, got.kind, got.key) == (wanted.action, wanted.kind, wanted.key) and value


@dataclasses.dataclass(frozen=True)
class Score:
    """How a policy did on the labelled set.

    Attributes:
        precision: of the changes it proposed, the share that were right (1.0 if it proposed none).
        recall: of the changes it should have proposed, the share it proposed exactly.
        right, proposed, expected: the counts behind them.
        mistakes: one row per utterance it got wrong (said, kind, expected, proposed, mistake).
    """

    precision: float
    recall: float
    right: int
    proposed: int
    expected: int
    mistakes: list[dict[str, str]]

    def __str__(self) -> str:
        return (f"precision {self.precision:.2f} ({self.right} of {self.proposed} proposed were right), "
                f"recall {self.recall:.2f} ({self.right} of {self.expected} worth keeping were proposed), "
                f"{len(self.mistakes)} mistakes")


def score(policy: Policy,
          labelled: Iterable[tuple[str, str, MemoryChange | None]] = LABELLED) -> Score:
    """Run `policy` on every labelled utterance and score what it proposed.

    Raises:
        TypeError: the policy returned something that is not a `MemoryChange` or None.
    """
    right = proposed = expected = 0
    mistakes: list[dict[str, str]] = []
    for said, kind, wanted in labelled:
        got = policy(said)
        if got is not None and not isinstance(got, MemoryChange):
            raise TypeError(f"the policy returned {type(got).__name__} for {said!r}; "
                            "return a MemoryChange or None")
        proposed += got is not None
        expected += wanted is not None
        if _same(got, wanted):
            right += wanted is not None
            continue
        mistake = ("kept what is not worth keeping" if wanted is None else
                   "missed it" if got is None else "proposed the wrong change")
        mistakes.append({"said": said, "kind": kind, "expected": describe(wanted),
                         "proposed": describe(got), "mistake": mistake})
    return Score(right / proposed if proposed else 1.0, right / expected if expected else 1.0,
                 right, proposed, expected, mistakes)


DEFAULT = score(worth_remembering)
"""The score of the default policy, which a student's policy is compared with."""


def generalisation(policies: dict[str, Policy]) -> list[dict[str, Any]]:
    """Each policy scored on the labelled set it was tuned on and on `HELD_OUT`, a row per policy.

    Only the scores: the held-out sentences stay out of sight, or the next rule would be tuned on
    them too.
    """
    rows = []
    for name, policy in policies.items():
        tuned, held = score(policy), score(policy, HELD_OUT)
        rows.append({"policy": name, "labelled precision": round(tuned.precision, 2),
                     "labelled recall": round(tuned.recall, 2),
                     "held-out precision": round(held.precision, 2), "held-out recall": round(held.recall, 2),
                     "held-out mistakes": len(held.mistakes)})
    return rows


def check_policy(policy: Any) -> exercises.Verdict:
    """Judge a student's policy: right when recall rises above the default's and precision does
    not fall below it, or precision rises and recall holds (a rule that keeps out what only looks
    like a fact); otherwise a hint that names the mistakes that stand in the way. A policy that
    gets every labelled sentence right and does no better than the default on `HELD_OUT` learned
    the set's answers, not the language: judged wrong."""
    if exercises.unanswered(policy):
        return exercises.not_answered("write a policy: a function of what was said")
    if not callable(policy):
        return exercises.wrong(f"the policy is {type(policy).__name__}, not a function",
                               "define it with def, taking what was said")
    try:
        got = score(policy)
    except Exception as exc:  # the student's code: any failure is a hint, not a traceback
        return exercises.wrong(f"the policy stopped: {type(exc).__name__}: {exc}",
                               "return a MemoryChange or None for every utterance")
    if got == DEFAULT:
        return exercises.not_answered("change the policy above, then run it and this cell")
    if not got.mistakes:
        held, default_held = score(policy, HELD_OUT), score(worth_remembering, HELD_OUT)
        if held.recall <= default_held.recall and held.precision <= default_held.precision:
            return exercises.wrong(
                f"every labelled sentence is right, but on sentences it never saw it does no better "
                f"than the default (held-out recall {held.recall:.2f})",
                "write a rule for a way of saying something, not a table of the set's answers")
    if got.precision > DEFAULT.precision and got.recall == DEFAULT.recall:
        return exercises.right(f"precision {DEFAULT.precision:.2f} -> {got.precision:.2f}, recall held at "
                               f"{got.recall:.2f}: it keeps out what only looked like a fact")
    if got.recall < DEFAULT.recall and got.precision >= DEFAULT.precision:
        before = {m["said"] for m in DEFAULT.mistakes}
        lost = [m["said"] for m in got.mistakes if m["said"] not in before and m["mistake"] == "missed it"][:3]
        return exercises.wrong(f"recall fell to {got.recall:.2f} from {DEFAULT.recall:.2f}: it now misses {lost}",
                               "keep out only what is not a fact about the person")
    if got.precision < DEFAULT.precision:
        before = {m["said"] for m in DEFAULT.mistakes}
        new = [m for m in got.mistakes if m["said"] not in before or m["mistake"] != "missed it"]
        if changed := [m for m in new if m["mistake"] == "proposed the wrong change"]:
            first = changed[0]
            return exercises.wrong(
                f"for {first['said']!r} it proposes {first['proposed']}, where {first['expected']} was expected",
                "use the keys and values the set expects: city, diet, name, drink, allergy, language")
        kept = [m["said"] for m in new if m["mistake"] == "kept what is not worth keeping"][:3]
        return exercises.wrong(
            f"precision fell to {got.precision:.2f} from {DEFAULT.precision:.2f}: it now keeps {kept}",
            "make the new rule narrower: it should match what a person means, no more")
    if got.recall <= DEFAULT.recall:
        return exercises.wrong(f"recall is {got.recall:.2f}, not above the default's {DEFAULT.recall:.2f}",
                               "add a rule for one of the utterances it missed")
    return exercises.right(f"recall {DEFAULT.recall:.2f} -> {got.recall:.2f}, precision "
                           f"{DEFAULT.precision:.2f} -> {got.precision:.2f}")


# -- with a live model: a prompt and a JSON schema, scored on the same set ------------------------------

PROPOSAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": ["put", "delete"]},
        "kind": {"type": "string", "enum": ["preference", "episode"]},
        "key": {"type": "string", "description": "lower-case, e.g. city, diet, name, drink, allergy"},
        "value": {"type": "string", "description": "the value to keep; empty for a delete"},
    },
    "required": ["action", "kind", "key", "value"],
}
"""The JSON schema of one structured proposal: the arguments of the `propose_memory` tool."""


def change_of(arguments: str) -> MemoryChange | None:
    """The `MemoryChange` a model's `propose_memory` arguments (JSON text) describe, or None."""
    try:
        data = json.loads(arguments)
        action = data["action"] if data["action"] in ("put", "delete") else None
        if action is None:
            return None
        return MemoryChange(action, str(data["kind"]), str(data["key"]).strip().lower(),
                            str(data.get("value") or "") or None if action == "put" else None)
    except (ValueError, KeyError, TypeError):
        return None


async def model_answers(model: Any, prompt: str, schema: dict[str, Any] = PROPOSAL_SCHEMA,
                        labelled: Iterable[tuple[str, str, MemoryChange | None]] = LABELLED
                        ) -> dict[str, MemoryChange | None]:
    """Ask `model` (an `OpenAIModel`) about each labelled utterance: `prompt` as its instructions,
    `schema` as the one tool it may call. No tool call means "nothing to remember"."""
    tool = {"type": "function", "function": {
        "name": "propose_memory", "description": "propose one change to the user's memory",
        "parameters": schema}}
    answers: dict[str, MemoryChange | None] = {}
    for said, _, _ in labelled:
        reply = await model.complete([{"role": "system", "content": prompt},
                                      {"role": "user", "content": said}], [tool])
        calls = [c for c in reply.tool_calls if c.name == "propose_memory"]
        answers[said] = change_of(calls[0].arguments) if calls else None
    return answers


def practice_copy(store: MemoryStore, path: Path, clock: Clock = utc_now) -> MemoryStore:
    """A copy of `store` at `path` (SQLite's backup), to practise on: clicks there change only it.

    `clock`: the copy's clock (a notebook's `FakeClock`, so its proposals have not expired).
    """
    target = sqlite3.connect(path)
    try:
        store.connection.backup(target)
    finally:
        target.close()
    return MemoryStore(path, clock=clock)
