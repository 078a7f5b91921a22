"""A change an MCP client asks for, as the person is asked about it, and its one confirmed write.

A `Question` holds the exact change, the record as it was shown (`RecordState`) and its ticket: the
pending proposal that records the question in the store (`ask`). An accepted answer is written by
`write_confirmed`, which approves that proposal in the write's transaction, so an answer is spent when
used, and is refused (`StaleAnswer`, everything rolled back) once the record changed or the question
was forgotten with its user. Nothing here speaks MCP.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Literal

from ..errors import ApprovalError, ProposalError, ValidationError
from ..store import Record, Store
from ..store.proposals import confirmation_of
from ..visible import quoted, visible_json


@dataclasses.dataclass(frozen=True)
class Memory:
    """What every tool call of one server works with: the store, the fixed user, and where its
    confirmations come from (`origin`, kept in the history as `proposal#N approved via ORIGIN`)."""

    store: Store
    user: str
    session: str
    origin: str


@dataclasses.dataclass(frozen=True)
class RecordState:
    """A record as the person was shown it: its value (None: absent), revision and write number.

    An absent key's `revision` is the last in its history (0: it never existed); `write`, which never
    goes back, tells a rewrite after a forget from the record seen (docs/design/integrations.md).
    """

    value: str | None
    revision: int
    write: int | None = None

    def describe(self) -> str:
        if self.value is not None:
            return f"{_quote(self.value)} (revision {self.revision})"
        return f"nothing saved (deleted at revision {self.revision})" if self.revision else "nothing saved"


@dataclasses.dataclass(frozen=True)
class Question:
    """One change to ask the person about, the state of the record when it was asked, and its ticket:
    the id of the pending proposal that records the question (None until `ask` made it)."""

    action: Literal["put", "delete"]
    user: str
    kind: str
    key: str
    value: str | None
    state: RecordState
    ticket: int | None = None

    @property
    def message(self) -> str:
        """What the person reads: the exact kind, key and value, what is stored now, and the question's
        proposal number (never used twice in a store: an answer fits this question and no later one).
        Hidden characters of the value are shown as escapes (memkit.visible)."""
        ticket = f"question: proposal {self.ticket}, answered once\n" if self.ticket is not None else ""
        if self.action == "put":
            assert self.value is not None
            return (f"Save this memory for user {quoted(self.user)}?\n"
                    f"kind: {self.kind}\nkey: {self.key}\nvalue: {_quote(self.value)}\n"
                    f"now: {self.state.describe()}\n{ticket}"
                    "Accept saves exactly this value, once. Decline and nothing is saved.")
        return (f"Delete this memory of user {quoted(self.user)}?\n"
                f"kind: {self.kind}\nkey: {self.key}\nvalue: {self.state.describe()}\n{ticket}"
                "Accept deletes it, once (its history keeps the old value). Decline and nothing is deleted.")

    @property
    def needed(self) -> bool:
        """Whether there is a change to ask about (not a save of the value stored, a delete of nothing)."""
        return self.state.value != self.value if self.action == "put" else self.state.value is not None

    def describe(self) -> str:
        if self.action == "put":
            return f"save {self.kind} {self.key!r} = {_quote(self.value or '')}"
        return f"delete {self.kind} {self.key!r}"


class StaleAnswer(ApprovalError):
    """The answer no longer fits its question; the change was rolled back. `reason`: `changed` (the
    record, or the question, changed since), `forgotten` (the question went with its user), `spent`
    (the answer was used already) or `expired`."""

    def __init__(self, message: str, reason: str = "changed") -> None:
        super().__init__(message)
        self.reason = reason


def _quote(text: str) -> str:
    """A value as JSON text, so spaces, quotes and line breaks are shown exactly as they are, and every
    hidden character (U+2028, U+202E, U+200B...) as a `\\u` escape."""
    return visible_json(json.dumps(text, ensure_ascii=False))


def read_state(memory: Memory, kind: str, key: str) -> RecordState:
    """The record of `kind`/`key` as the person would be shown it now."""
    record = memory.store.get(memory.user, kind, key)
    if record is not None:
        return RecordState(record["value"], record["revision"], memory.store.write_number(memory.user, kind, key))
    history = memory.store.history(memory.user, kind, key)
    return RecordState(None, history[-1]["revision"] if history else 0)


def ask(memory: Memory, question: Question) -> Question:
    """The question with its ticket: the user's pending proposal of exactly this change against this
    record, made now or found (the same change asked again, or a client's retry, finds the same one).

    A proposal id is never used again in a store (AUTOINCREMENT, an identity column), and forgetting
    the user removes it: a question asked after a forget has another number, so an answer to the old
    one cannot pass for an answer to it. If another writer made the change meanwhile, the question
    comes back with the record as it is now, and nothing to ask. Earlier questions of this server
    about the same change that the record has overtaken are rejected, so they do not wait for nothing.
    """
    store, q = memory.store, question
    for _ in range(3):
        if not q.needed:
            return q
        try:
            if q.action == "put":
                assert q.value is not None
                made = store.propose_put(memory.user, memory.session, q.kind, q.key, q.value)
            else:
                made = store.propose_delete(memory.user, memory.session, q.kind, q.key)
            break
        except ValidationError:  # another writer made the change meanwhile: look again
            q = dataclasses.replace(q, state=read_state(memory, q.kind, q.key))
    else:
        raise ApprovalError(f"{q.kind} {q.key!r} kept changing while the question was being made; "
                            "nothing was asked or changed. Call the tool again")
    for old in store.proposals(memory.user):
        if (old["stale"] and old["id"] != made["id"] and old["session"] == memory.session
                and (old["action"], old["kind"], old["key"], old["value"]) == (q.action, q.kind, q.key, q.value)):
            with contextlib.suppress(ProposalError):  # decided meanwhile by someone else: nothing to do
                store.reject(memory.user, old["id"], origin=memory.origin)
    return dataclasses.replace(q, ticket=made["id"])


_REFUSED = {"unknown": "forgotten", "decided": "spent", "expired": "expired", "stale": "changed"}
"""A refused approval's `ProposalError.reason` -> the reason the tool result gives."""


def write_confirmed(memory: Memory, question: Question) -> tuple[Record | None, str]:
    """Make the confirmed change by approving the question's proposal, in one transaction with the
    check that it is the change asked about: if any other change slipped in (the record, read under the
    write lock, or the key's last event shows it), the question was forgotten, or its answer was used
    already, everything is rolled back and `StaleAnswer` raised.

    Returns:
        The record saved (None for a delete) and the confirmation the key's history names.
    """
    store, user, q = memory.store, memory.user, question
    assert q.ticket is not None, "ask() gives a question its ticket before anyone answers it"
    try:
        with store.transaction():
            # Under the write lock: the record is still the one the person was shown, write number
            # included (a forget and a rewrite give the same revision, never the same write).
            if read_state(memory, q.kind, q.key) != q.state:
                raise StaleAnswer("", "changed")
            try:
                done = store.approve(user, q.ticket, origin=memory.origin)
            except ProposalError as exc:
                raise StaleAnswer(str(exc), _REFUSED.get(exc.reason, "changed")) from None
            result: Record | None = done.get("record")
            expected = q.state.revision + 1 if q.action == "put" else q.state.revision
            history = store.history(user, q.kind, q.key)
            last = history[-1] if history else None
            confirmation = confirmation_of(done["proposal"], memory.origin)
            if last is None or last["confirmation"] != confirmation or last["revision"] != expected:
                raise StaleAnswer("", "changed")  # rolls the change back
    except StaleAnswer as refused:
        raise StaleAnswer(_refusal(memory, q, refused), refused.reason) from None
    return result, confirmation


def _refusal(memory: Memory, q: Question, refused: StaleAnswer) -> str:
    """Why an accepted answer changed nothing, for the person and the model."""
    if refused.reason == "changed":
        now = read_state(memory, q.kind, q.key)
        return (f"{q.kind} {q.key!r} changed while the person was being asked (it was {q.state.describe()}, "
                f"it is now {now.describe()}); the answer was for the old state. Call the tool again to ask "
                "about the current one")
    if refused.reason == "forgotten":
        return (f"the question (proposal {q.ticket}) was forgotten with user {quoted(memory.user)} while the "
                "person was being asked; an answer to it changes nothing. Call the tool again to ask anew")
    return f"the answer to proposal {q.ticket} cannot be used: {refused}"


def decline(memory: Memory, question: Question) -> None:
    """The person said no: the question's proposal is rejected (its record keeps who and when)."""
    if question.ticket is not None:
        with contextlib.suppress(ProposalError):  # already decided, or forgotten: nothing waits
            memory.store.reject(memory.user, question.ticket, origin=memory.origin)
