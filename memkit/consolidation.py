"""Consolidation: after a session, read its archived turns and propose what to keep.

The other path to memory from the hot one. In the hot path the model proposes while the person
talks, at a cost on every turn; here nothing is proposed until the session has finished and its
turns are in the store's transcript archive. Then one pass reads them, proposes the facts they
tell (the last word on each key: a fact changed in the session is proposed once, as it ended) and
an episode that summarises the session. Everything is a proposal a person approves
(`memkit.store.proposals`): consolidation never writes memory itself.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from .errors import CommittedThenFailedError, MemkitError, ValidationError
from .remembering import MemoryChange, Policy, worth_remembering
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
                summary: bool = True, turns: list[Turn] | None = None) -> Consolidation:
    """Propose what a finished session of `user` told worth keeping; approve nothing.

    Args:
        store: the store holding the session's archived turns and the user's proposals.
        user, session: the session to read.
        policy: what one thing the person said should change (default `worth_remembering`).
        summary: also propose an episode `session.<id>` summarising the session.
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
    changes: dict[tuple[str, str], MemoryChange] = {}
    other: list[str] = []  # what the person said that the policy did not keep: the summary quotes it
    for text in said:
        if (change := policy(text)) is None:
            other.append(text)
        else:
            changes.pop((change.kind, change.key), None)  # the last word on a key, in the order said
            changes[(change.kind, change.key)] = change
    if summary:
        text = summarise(session, turns, list(changes.values()), other)[:store.limits.max_value_chars]
        episode = MemoryChange("put", "episode", episode_key(session), text)
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


def episode_key(session: str) -> str:
    """The episode key of a session's summary: `session.` and the id in key characters."""
    word = re.sub(r"[^a-z0-9_.:-]+", "-", session.lower()).strip("-") or "unnamed"
    return f"session.{word}"[:64]  # Limits.max_key_chars by default


def summarise(session: str, turns: list[Turn], changes: list[MemoryChange], other: list[str]) -> str:
    """A short, extractive summary of a session: when, what changed, what else the person said.

    A stand-in for a model's summary that needs no model: it quotes, it does not paraphrase.
    """
    parts = [f"Session {session} on {turns[0]['at'][:10]}, {len(turns)} turns"]
    if changes:
        parts.append("told: " + ", ".join(f"{c.key} = {c.value}" if c.action == "put" else f"forget {c.key}"
                                         for c in changes))
    if other:
        parts.append("also said: " + "; ".join(f"'{text[:60]}'" for text in other[:4]))
    return "; ".join(parts) + "."
