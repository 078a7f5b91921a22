"""What is worth remembering: the policy that turns one thing a person said into a memory change.

`worth_remembering` is the default policy: the fixture model (`memkit chat` without `--live`) and
`consolidate` call it. Notebook 10 shows it, lets a student write another and scores both on a
labelled set. It is a table of patterns, not a language model, so its mistakes can be read.

Example:
    >>> worth_remembering("I moved to Porto")
    MemoryChange(action='put', kind='preference', key='city', value='Porto')
    >>> worth_remembering("answer in French this time") is None
    True
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple
from collections.abc import Callable


class MemoryChange(NamedTuple):
    """One change a policy proposes: save (`put`) a value, or forget (`delete`) a key.

    Attributes:
        action: `put` or `delete`.
        kind: `preference` (a lasting fact) or `episode` (something that happened).
        key: the record's key, such as `city`.
        value: the value to save; None for a delete.
    """

    action: Literal["put", "delete"]
    kind: str
    key: str
    value: str | None = None


Policy = Callable[[str], "MemoryChange | None"]
"""A policy: what one utterance should change in memory, or None for nothing."""

REMEMBER_RULE = re.compile(r"remember (?:that )?my ([a-z][a-z0-9_ .:-]*?) is (.+?)\.?$", re.I)
"""The explicit phrase for saving a preference ("remember my KEY is VALUE"); the goldfish agent of
`classroom.lab` follows the same one."""
_EPISODE = re.compile(r"note (?:the )?episode ([a-z][a-z0-9_.:-]*): (.+?)$", re.I)
# "Forget it" and "forget about that" mean "never mind": nothing is named, so nothing is forgotten.
_FORGET = re.compile(r"^forget (?!(?:about )?(?:it|that|this|everything)$)(?:about )?(?:my )?(episode )?"
                     r"([a-z][a-z0-9 _.:-]*?)$", re.I)
_FORGET_CITY = re.compile(r"^forget (?:where i live|my address)$", re.I)
_REMEMBER_THAT = re.compile(r"^remember (?:that )?(?P<rest>.+)$", re.I)
_POLITE = re.compile(r"^(?:please|ok|okay|so|btw|by the way|oh|hi|hello|these days|nowadays)[,!]?\s+", re.I)
_STOPWORDS = {"a", "an", "the", "that", "my", "i", "is", "am", "to", "on", "in", "at", "of", "was"}

PROFILE_KEYS = ("city", "drink", "name", "diet", "language", "pet", "food", "allergy")
"""The stable facts about a person worth keeping when told plainly ("My city is Lisbon"); any other
"my THING is VALUE" (a ticket number) stays in the conversation."""

_KEYS = "|".join(PROFILE_KEYS)
# A place named as a place ("Lisbon"), not a description ("a shared office", "the suburbs").
_PLACE = r"(?!(?:a|an|the|my|our|his|her|their|he|she|it|this|that|there|where)\b)(?P<value>.+?)"
# Sayings, not places: "I live in hope", "I live in the moment".
_SAYING = r"(?!(?:fear|hope|denial|peace|sin|the moment|the past|the present|my head)$)"
# Not a name: "call me later", "call me back tomorrow", "call me when it's ready".
_NOT_A_NAME = r"(?!(?:later|back|again|soon|tomorrow|tonight|anytime|when|if|at|on|after|before)\b)"
STATEMENTS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(rf"^my (?:favou?rite |usual )?(?P<key>{_KEYS}) is (?P<value>.+)$", re.I), None),
    (re.compile(rf"^i (?:now )?(?:live|am living|'m living) in {_SAYING}(?P<value>.+)$", re.I), "city"),
    (re.compile(r"^i(?:'ve| have| just)? (?:moved|relocated) to (?P<value>.+)$", re.I), "city"),
    (re.compile(rf"^i(?:'m| am) (?:now )?based in {_PLACE}$", re.I), "city"),
    (re.compile(rf"^(?:my )?home(?: for me)? is (?:now )?(?:in )?{_PLACE}$", re.I), "city"),
    # Not "X is home": "Tom is home now" is about Tom.
    (re.compile(rf"^{_PLACE} is (?:my home|where i live)(?: now)?$", re.I), "city"),
    (re.compile(r"^i(?:'m| am) (?:a )?(?P<value>vegetarian|vegan|pescatarian)$", re.I), "diet"),
    (re.compile(r"^i(?:'m| am) allergic to (?P<value>.+)$", re.I), "allergy"),
    (re.compile(rf"^(?:you can |please )?call me {_NOT_A_NAME}(?P<value>.+)$", re.I), "name"),
    (re.compile(r"^i (?:usually )?drink (?P<value>.+)$", re.I), "drink"),
    (re.compile(r"^i speak (?!(?:to|with|about|for|up)\b)(?P<value>.+)$", re.I), "language"),
)
"""The stable facts the default policy understands: (pattern, preference key); a key of None comes
from the pattern's `key` group. Each pattern reads a whole statement."""

QUESTION_TAG = re.compile(r",\s*(?:right|no|yes|correct|isn't it|don't i|didn't i|aren't i|do i|did i)$", re.I)
"""A question asked as a statement ("I live in Lisbon, right"): it asks, it tells nothing."""

NOT_A_VALUE = re.compile(r"^(?:not|no|none|never|nothing)\b|\b(?:but|because|although|though)\b|\band i\b",
                         re.I)
"""A value that is not one: a denial ("My name is not important") or a second clause ("Lisbon and
I work in Porto", "Porto last year but now ..."), where a rule cannot tell which part is the fact."""

ONE_OFF = re.compile(r"\b(?:this time|just this once|for now|today|tonight|this week|right now|"
                     r"for this (?:answer|reply|question|chat))\b", re.I)
"""Words that make a request a one-off ("answer in French this time"): nothing to remember."""


def worth_remembering(utterance: str) -> MemoryChange | None:
    """The default policy: what one thing a person said should change in memory, or None.

    A question asks and tells nothing; an explicit request ("remember ...", "forget ...") is done;
    a one-off instruction ("answer in French this time") is not kept; a plain statement of a
    stable fact ("I moved to Porto", "I'm vegetarian") is. Anything else stays in the conversation.
    """
    text = plain(utterance)
    if not text or utterance.strip().endswith("?"):
        return None
    if asked := explicit_request(text):
        return asked
    if ONE_OFF.search(text):
        return None
    if fact := stated_fact(text):
        return MemoryChange("put", "preference", *fact)
    return None


def plain(utterance: str) -> str:
    """The utterance without politeness around it ("please", "by the way") or final punctuation."""
    text = _POLITE.sub("", " ".join(utterance.split())).rstrip("?.! ")
    return re.sub(r",?\s+please$", "", text, flags=re.I)


def explicit_request(text: str) -> MemoryChange | None:
    """A change the person asked for in so many words: "remember my KEY is VALUE", "remember that
    ...", "note episode KEY: VALUE", "forget my KEY", "forget where I live", "forget episode KEY"."""
    if match := REMEMBER_RULE.match(text):
        return MemoryChange("put", "preference", key_of(match.group(1)), clean(match.group(2)))
    if match := _EPISODE.match(text):
        return MemoryChange("put", "episode", match.group(1).lower(), clean(match.group(2)))
    if _FORGET_CITY.match(text):
        return MemoryChange("delete", "preference", "city")
    if match := _FORGET.match(text):
        return MemoryChange("delete", "episode" if match.group(1) else "preference", key_of(match.group(2)))
    if match := _REMEMBER_THAT.match(text):
        rest = match.group("rest")
        if fact := stated_fact(rest):
            return MemoryChange("put", "preference", *fact)
        words = [w for w in re.findall(r"[a-z0-9]+", rest.lower()) if w not in _STOPWORDS][:3]
        if words and words[0][0].isalpha():  # "remember that the dentist moved to Friday": an episode
            value = clean(rest)
            return MemoryChange("put", "episode", "note." + "-".join(words), value[:1].upper() + value[1:])
    return None


def stated_fact(text: str) -> tuple[str, str] | None:
    """The (key, value) of a stable fact a plain statement tells, by the table `STATEMENTS`; none
    for a statement that asks ("I live in Lisbon, right") or a value that is not one (`NOT_A_VALUE`)."""
    if QUESTION_TAG.search(text):
        return None
    for pattern, key in STATEMENTS:
        if match := pattern.match(text):
            value = clean(match.group("value"))
            if value and not NOT_A_VALUE.search(value):
                return (key or key_of(match.group("key"))), value
    return None


def key_of(text: str) -> str:
    """A key as the store keeps it: "Favourite Colour" -> "favourite_colour"."""
    return "_".join(text.strip().lower().split())


def clean(value: str) -> str:
    """A value as the person meant it: no trailing punctuation, quotes, "now" or "these days"."""
    value = value.strip().rstrip(".!").strip()
    value = re.sub(r"\s+(?:now|these days|nowadays)$", "", value, flags=re.I)
    return value.strip("\"'").strip()
