"""Consolidation: after a session, read its archived turns and propose what to keep.

The other path to memory from the hot one. In the hot path the model proposes while the person
talks, at a cost on every turn; here nothing is proposed until the session has finished and its
turns are in the store's transcript archive. Then one pass reads them, proposes the facts they
tell (the last word on each key: a fact changed in the session is proposed once, as it ended) and
an episode that summarises the session (`summarise` writes one without a model; a model's summary
can be given instead). Everything is a proposal a person approves
(`memkit.store.proposals`): consolidation never writes memory itself.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .errors import CommittedThenFailedError, MemkitError, ValidationError
from .limits import DEFAULT_LIMITS
from .remembering import NOT_A_VALUE, ONE_OFF, MemoryChange, Policy, worth_remembering
from .store import Store
from .transcript import Turn


@dataclasses.dataclass
class Consolidation:
    """What one consolidation read and proposed.

    Attributes:
        user, session: whose session was read.
        turns_read: archived turns read; `chars_read` their characters; `policy_calls` how many
            times the policy ran (once per thing the person said).
        proposed: the proposals made now, waiting for a person.
        already_waiting: the same proposals made before and still waiting (nothing new).
        unchanged: the changes memory already holds (nothing to propose), as sentences.
    """

    user: str
    session: str
    turns_read: int
    chars_read: int
    policy_calls: int
    proposed: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    already_waiting: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    unchanged: list[str] = dataclasses.field(default_factory=list)


def consolidate(store: Store, user: str, session: str, policy: Policy = worth_remembering, *,
                summary: bool | str = True, turns: list[Turn] | None = None) -> Consolidation:
    """Propose what a finished session of `user` told worth keeping; approve nothing.

    Args:
        store: the store holding the session's archived turns and the user's proposals.
        user, session: the session to read.
        policy: what one thing the person said should change (default `worth_remembering`).
        summary: also propose an episode `session.<id>` summarising the session: True for the
            summary `summarise` writes, a text for another (a model's), False for none.
        turns: the session's turns, if the caller read them (default: the store's archived turns;
            `memkit consolidate` adds those still in the store's own window).

    Returns:
        A `Consolidation`: what was read and which proposals were made.

    Raises:
        ValidationError: the session has no turns of the user to read (unknown, or not archived
            yet): nothing was proposed. CommittedThenFailedError: some proposals were kept, then one
            failed (the proposals bound, say): those kept stand, and the error names them.
    """
    turns = store.archived_turns(user, session) if turns is None else turns
    said = [turn["content"] for turn in turns if turn["role"] == "user"]
    if not said:
        raise ValidationError(
            f"user {user!r} has no turns of theirs in session {session!r} to read (an unknown session, or one "
            "whose turns are not archived yet); check the user and the session. Nothing was proposed")
    done = Consolidation(user, session, len(turns), sum(len(t["content"]) for t in turns), len(said))
    told: list[MemoryChange] = []  # every change the policy found, in the order said
    other: list[str] = []  # what the person said that the policy did not keep: the summary reads it
    for text in said:
        if (change := policy(text)) is None:
            other.append(text)
        else:
            told.append(change)
    changes: dict[tuple[str, str], MemoryChange] = {}
    for change in told:
        changes.pop((change.kind, change.key), None)  # the last word on a key, in the order said
        changes[(change.kind, change.key)] = change
    if summary:
        limit = store.limits.max_value_chars
        text = summary if isinstance(summary, str) else summarise(session, turns, told, other, limit)
        key = episode_key(session, store.limits.max_key_chars)
        episode = MemoryChange("put", "episode", key, fit(text, limit))
        changes[(episode.kind, episode.key)] = episode
    for change in changes.values():
        _propose(store, done, change)
    return done


def _propose(store: Store, done: Consolidation, change: MemoryChange) -> None:
    """Keep one change as a proposal; record it in `done` as new, already waiting or unchanged."""
    held = store.get(done.user, change.kind, change.key)
    value = held["value"] if held else None
    if (change.action == "put" and value == change.value) or (change.action == "delete" and held is None):
        done.unchanged.append(f"{change.kind} {change.key}: memory already holds this, nothing to propose")
        return
    try:
        if change.action == "delete":
            proposal = store.propose_delete(done.user, done.session, change.kind, change.key)
        else:
            proposal = store.propose_put(done.user, done.session, change.kind, change.key, change.value or "")
    except MemkitError as exc:  # a value that breaks a rule, the proposals bound, the size cap
        raise _after(done, exc) from None
    (done.proposed if proposal["new"] else done.already_waiting).append(proposal)


def _after(done: Consolidation, exc: MemkitError) -> MemkitError:
    """The error to raise: the same one if nothing was kept yet, else one naming what was kept."""
    if not done.proposed:
        return exc
    return CommittedThenFailedError([f"proposal {p['id']} kept" for p in done.proposed], exc)


def episode_key(session: str, max_chars: int = DEFAULT_LIMITS.max_key_chars) -> str:
    """The episode key of a session's summary: `session.` and the id in key characters, cut to the
    store's longest key (`Limits.max_key_chars`)."""
    word = re.sub(r"[^a-z0-9_.:-]+", "-", session.lower()).strip("-") or "unnamed"
    return f"session.{word}"[:max_chars]


def summarise(session: str, turns: list[Turn], told: list[MemoryChange], other: list[str],
              limit: int | None = None) -> str:
    """A short summary of a session without a model: when, what it was about, how it ended.

    What it was about: the facts told (a fact changed during the session says so), what the person
    asked to forget, what else was named ("my ticket number is T-4471", codes and figures), the
    questions asked and the one-off instructions left out. How it ended: the assistant's last
    answer. It is written from the turns by rules, so the same session gives the same summary; a
    model would paraphrase (notebook 10). Over `limit` characters, the last things named give way
    first ("and 4 more"), so the summary still says how the session ended.

    Example:
        >>> summarise("s1", [{"role": "user", "content": "I moved to Porto", "at": "2026-01-01T09:00Z"},
        ...                  {"role": "assistant", "content": "Noted.", "at": "2026-01-01T09:00Z"}],
        ...           [MemoryChange("put", "preference", "city", "Porto")], [])
        "Session s1 on 2026-01-01, 1 message from the person. Told: city Porto. Ended with: 'Noted.'"
    """
    people = len(told) + len(other)
    head = f"Session {session} on {turns[0]['at'][:10]}, {people} message{'s' * (people != 1)} from the person"
    facts: dict[tuple[str, str], list[str | None]] = {}
    for change in told:  # every value in the order said; None for a request to forget the key
        facts.setdefault((change.kind, change.key), []).append(change.value if change.action == "put" else None)
    kept = [_told(kind, key, values) for (kind, key), values in facts.items() if values[-1] is not None]
    forgotten = [key for (_, key), values in facts.items() if values[-1] is None]
    before = [f"Told: {', '.join(kept)}" if kept else "",
              f"Asked to forget: {', '.join(forgotten)}" if forgotten else ""]
    asked = sum(text.rstrip().endswith("?") for text in other)
    one_off = sum(bool(ONE_OFF.search(text)) and not text.rstrip().endswith("?") for text in other)
    answers = [turn["content"] for turn in turns if turn["role"] == "assistant"]
    after = [f"Asked {asked} question{'s' * (asked != 1)}" if asked else "",
             f"{one_off} instruction{'s' * (one_off != 1)} for that time only, not kept" if one_off else "",
             f"Ended with: '{fit(' '.join(answers[-1].split()), 120)}'" if answers else ""]
    named = _named(other)
    shown = len(named)
    while True:
        more = f" and {len(named) - shown} more" if shown < len(named) else ""
        middle = [f"Named: {', '.join(named[:shown])}{more}" if shown else
                  f"{len(named)} thing{'s' * (len(named) != 1)} named" if named else ""]
        text = ". ".join(part for part in [head, *before, *middle, *after] if part)
        if limit is None or len(text) <= limit or shown == 0:
            return text
        shown -= 1


def _told(kind: str, key: str, values: list[str | None]) -> str:
    """One fact told: `city Porto`, `city Porto (changed from Lisbon)`, or a note's text."""
    now, earlier = values[-1], [v for v in values[:-1] if v is not None and v != values[-1]]
    fact = f"'{now}'" if kind == "episode" else f"{key} {now}"
    return fact + (f" (changed from {earlier[-1]})" if earlier and kind != "episode" else "")


def _named(other: list[str]) -> list[str]:
    """What the person named that no fact keeps, in the order said: "ticket number T-4471" from
    "my ticket number is T-4471", and codes and figures ("TP-1234", "18:05") from anything else.
    A lone digit ("2 tickets", "at 9") is a count or an hour, not something to look up later."""
    named: list[str] = []
    for text in other:
        # A denial at the start ("my name is not important") names nothing.
        if (match := _TOLD.match(text.strip())) and not NOT_A_VALUE.match(match.group(2)):
            # "My order number is 55120 and flight TP-1234 was late": the order, then the flight.
            value, *rest = _CLAUSE.split(match.group(2), maxsplit=1)
            named.append(f"{match.group(1).lower()} {value.strip()}")
            text = " ".join(rest)
        named += [code for code in _CODE.findall(text) if sum(c.isdigit() for c in code) >= 2]
    return list(dict.fromkeys(named))


def fit(text: str, limit: int) -> str:
    """`text`, cut to at most `limit` characters with an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# "My ticket number is T-4471": something named in the conversation that is not a lasting fact.
_TOLD = re.compile(r"^my ([a-z][a-z0-9 _-]*?) is (.+?)[.!]?$", re.I)
# A code or a figure inside a sentence ("order 55120", "flight TP-1234").
_CODE = re.compile(r"\b[A-Za-z]{0,6}-?\d[\w:./-]*\b")
# Where a second clause starts: the value named is the first one's.
_CLAUSE = re.compile(r",|;|\s(?:and|but|because|so)\s", re.I)
