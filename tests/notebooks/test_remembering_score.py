"""Notebook 10's remembering policy exercise: the labelled set, its score, and the check on a policy.

Each policy below is one a student could write in the notebook's `better_policy` cell; the check is
run on it as the notebook runs it, and must judge it as a teacher would.
"""

from __future__ import annotations

import re

import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)
import pytest

from memkit.remembering import MemoryChange, plain, worth_remembering
from classroom.remembering_score import (DEFAULT, HELD_OUT, LABELLED, change_of, check_policy, generalisation,
                                         practice_copy, score)


def vegan_now(said):
    if match := re.fullmatch(r"i'?m (vegan|vegetarian) now", plain(said), re.I):
        return MemoryChange("put", "preference", "diet", match.group(1).lower())
    return worth_remembering(said)


def no_meat(said):
    if re.fullmatch(r"i (?:don't|do not) eat meat", plain(said), re.I):
        return MemoryChange("put", "preference", "diet", "vegetarian")
    return worth_remembering(said)


def called(said):
    if match := re.match(r"(?:everyone|people|friends) calls? me (.+)", plain(said), re.I):
        return MemoryChange("put", "preference", "name", match.group(1))
    return worth_remembering(said)


def stop_remembering(said):
    if match := re.match(r"(?:stop remembering|delete what you know about) my (\w+)", plain(said), re.I):
        return MemoryChange("delete", "preference", match.group(1).lower())
    return worth_remembering(said)


def now_dropped(said):
    return worth_remembering(re.sub(r"\s+now\.?$", "", said))


def no_traps(said):
    """Narrower than the default and one more paraphrase: precision rises too."""
    if plain(said).lower() in ("i live in a small flat", "i drink too much coffee"):
        return None
    return vegan_now(said)


def narrower(said):
    """No new rule: only what looks like a fact kept out, so precision rises and recall holds."""
    if re.fullmatch(r"i live in an? (?:small |big )?(?:flat|house)", plain(said), re.I):
        return None
    return worth_remembering(said)


RIGHT = [vegan_now, no_meat, called, stop_remembering, now_dropped, no_traps, narrower]


def every_in_is_a_city(said):
    """Too broad: any 'in X' becomes a city."""
    if match := re.search(r"\bin (\w+)", said):
        return MemoryChange("put", "preference", "city", match.group(1))
    return worth_remembering(said)


def home_now(said):
    """Too broad: "Tom is home now" is about Tom, not a city."""
    if match := re.fullmatch(r"(\w+) is home(?: now)?", plain(said), re.I):
        return MemoryChange("put", "preference", "city", match.group(1))
    return worth_remembering(said)


def wrong_key(said):
    if re.fullmatch(r"i (?:don't|do not) eat meat", plain(said), re.I):
        return MemoryChange("put", "preference", "dietary_preference", "vegetarian")
    return worth_remembering(said)


_ANSWERS = {said: change for said, _, change in LABELLED}


def the_answers(said):
    """Around the rule: the labelled set's own answers looked up."""
    return _ANSWERS[said] if said in _ANSWERS else worth_remembering(said)


def only_narrower(said):
    """Narrower, but it loses a fact too: precision rises, recall falls."""
    return None if plain(said).lower().startswith("i live in") else worth_remembering(said)


WRONG = [
    (lambda said: None, "recall fell to 0.00 from 0.79: it now misses ['I live in Lisbon', "),
    (the_answers, "on sentences it never saw it does no better than the default"),
    (only_narrower, "recall fell to 0.72 from 0.79: it now misses ['I live in Lisbon', 'I live in Lisbon these days']"),
    (every_in_is_a_city, "precision fell to"),
    (home_now, "it now keeps ['Tom is home now'"),
    (wrong_key, "it proposes put dietary_preference = 'vegetarian', where put diet = 'vegetarian' was expected"),
    (lambda said: 1 / 0, "the policy stopped: ZeroDivisionError"),
    (lambda said: ("put", "city", "Lisbon"), "return a MemoryChange or None"),
    ("is home now", "not a function"),
]


def test_the_labelled_set_has_every_kind_and_at_least_forty_utterances():
    kinds = {kind for _, kind, _ in LABELLED}
    assert len(LABELLED) >= 40 and len({said for said, _, _ in LABELLED}) == len(LABELLED)
    assert {"stable fact", "changed fact", "one-off", "forget", "small talk", "paraphrase",
            "another person"} <= kinds


def test_the_default_policy_scores_as_the_notebook_says():
    assert (DEFAULT.right, DEFAULT.proposed, DEFAULT.expected, len(DEFAULT.mistakes)) == (23, 26, 29, 9)
    kept_wrongly = {m["said"] for m in DEFAULT.mistakes if m["mistake"] == "kept what is not worth keeping"}
    assert kept_wrongly == {"I live in a small flat", "I drink too much coffee", "I'm allergic to Mondays"}
    # The ways a teacher would accept of saying where one lives are read (00's "in her own words").
    for said in ("I'm based in Lisbon", "Home for me is Lisbon these days", "I live in Lisbon these days"):
        assert said not in {m["said"] for m in DEFAULT.mistakes}


def test_the_held_out_set_is_apart_from_the_labelled_one_and_of_the_same_kinds():
    assert 15 <= len(HELD_OUT) <= 20
    assert not {said for said, _, _ in HELD_OUT} & {said for said, _, _ in LABELLED}
    assert {kind for _, kind, _ in HELD_OUT} == {kind for _, kind, _ in LABELLED}
    held = score(worth_remembering, HELD_OUT)
    assert (held.right, held.proposed, held.expected, len(held.mistakes)) == (5, 7, 10, 7)


def test_the_held_out_set_tells_a_rule_for_the_language_from_a_rule_for_one_sentence():
    """no_meat matches only the sentence it was written for; called and stop_remembering read the
    phrase, so "People call me Jo" and "delete what you know about my diet" are found too."""
    [default, one_sentence, phrase, forget] = generalisation(
        {"default": worth_remembering, "no_meat": no_meat, "called": called, "forget": stop_remembering})
    assert one_sentence["labelled recall"] > default["labelled recall"]
    assert one_sentence["held-out recall"] == default["held-out recall"] == 0.5
    assert phrase["held-out recall"] == forget["held-out recall"] == 0.6
    assert phrase["labelled recall"] > default["labelled recall"]  # it raises both, as 10 says
    assert phrase["held-out precision"] > default["held-out precision"]
    assert default == {"policy": "default", "labelled precision": 0.88, "labelled recall": 0.79,
                       "held-out precision": 0.71, "held-out recall": 0.5, "held-out mistakes": 7}


def test_a_value_is_compared_without_case():
    lower = score(lambda said: (change._replace(value=change.value.lower())
                                if (change := worth_remembering(said)) and change.value else change))
    assert lower.right == DEFAULT.right


@pytest.mark.parametrize("policy", RIGHT, ids=[p.__name__ for p in RIGHT])
def test_a_policy_that_raises_recall_and_keeps_precision_is_right(policy):
    verdict = check_policy(policy)
    assert verdict.right, verdict


@pytest.mark.parametrize(("policy", "said"), WRONG, ids=[w[1] for w in WRONG])
def test_a_policy_that_does_not_is_judged_wrong_with_the_reason(policy, said):
    verdict = check_policy(policy)
    assert verdict.state == "wrong" and said in verdict.message, verdict


def test_the_default_unchanged_and_a_placeholder_are_not_answered():
    assert check_policy(worth_remembering).state == "unanswered"
    assert check_policy(None).state == "unanswered"


@pytest.mark.parametrize(("arguments", "change"), [
    ('{"action": "put", "kind": "preference", "key": "City", "value": "Lisbon"}',
     MemoryChange("put", "preference", "city", "Lisbon")),
    ('{"action": "delete", "kind": "preference", "key": "diet", "value": ""}',
     MemoryChange("delete", "preference", "diet")),
    ('{"action": "keep"}', None), ("not json", None), ('{"kind": "preference"}', None),
])
def test_a_models_structured_proposal_is_read_or_refused(arguments, change):
    assert change_of(arguments) == change


def test_a_practice_copy_is_decided_apart_from_the_original(tmp_path):
    from memkit import FakeClock, MemoryStore

    with MemoryStore(tmp_path / "talk.sqlite3", clock=FakeClock(step_seconds=1)) as talk:
        made = talk.propose_put("sam", "s1", "preference", "city", "Lisbon")
        with practice_copy(talk, tmp_path / "practice.sqlite3", clock=FakeClock(step_seconds=1)) as copy:
            copy.approve("sam", made["id"], origin="notebook")
            assert copy.get("sam", "preference", "city")["value"] == "Lisbon"
        assert talk.get("sam", "preference", "city") is None
        assert [p["status"] for p in talk.proposals("sam")] == ["pending"]
