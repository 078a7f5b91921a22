"""A change an MCP client asks for, as the person is asked about it, and its one confirmed write.

A `Question` holds the exact change and the record as it was shown (`RecordState`). An accepted
answer is written by `write_confirmed`, which refuses (`StaleAnswer`, everything rolled back) if
the record is no longer the one seen; `propose` keeps an unanswered one. Nothing here speaks MCP.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from ..approvals import Approvals, Confirmation
from ..errors import ApprovalError
from ..store import Record, Store


@dataclasses.dataclass(frozen=True)
class Memory:
    """What every tool call of one server works with: the store, the fixed user, the confirmations."""

    store: Store
    user: str
    session: str
    approvals: Approvals


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
    """One change to ask the person about, and the state of the record when it was asked."""

    action: Literal["put", "delete"]
    user: str
    kind: str
    key: str
    value: str | None
    state: RecordState

    @property
    def message(self) -> str:
        """What the person reads: the exact kind, key and value, and what is stored now."""
        if self.action == "put":
            assert self.value is not None
            return (f"Save this memory for user {self.user!r}?\n"
                    f"kind: {self.kind}\nkey: {self.key}\nvalue: {_quote(self.value)}\n"
                    f"now: {self.state.describe()}\n"
                    "Accept saves exactly this value, once. Decline and nothing is saved.")
        return (f"Delete this memory of user {self.user!r}?\n"
                f"kind: {self.kind}\nkey: {self.key}\nvalue: {self.state.describe()}\n"
                "Accept deletes it, once (its history keeps the old value). Decline and nothing is deleted.")

    def describe(self) -> str:
        if self.action == "put":
            return f"save {self.kind} {self.key!r} = {_quote(self.value or '')}"
        return f"delete {self.kind} {self.key!r}"


class _Overtaken(Exception):
    """Inside `write_confirmed`'s transaction: another change came between the question and this one."""


class StaleAnswer(ApprovalError):
    """The record changed between the question and the answer; the change was rolled back."""


def _quote(text: str) -> str:
    """A value as JSON text, so spaces, quotes and line breaks are shown exactly as they are."""
    return json.dumps(text, ensure_ascii=False)


def read_state(memory: Memory, kind: str, key: str) -> RecordState:
    """The record of `kind`/`key` as the person would be shown it now."""
    record = memory.store.get(memory.user, kind, key)
    if record is not None:
        return RecordState(record["value"], record["revision"], memory.store.write_number(memory.user, kind, key))
    history = memory.store.history(memory.user, kind, key)
    return RecordState(None, history[-1]["revision"] if history else 0)


def write_confirmed(memory: Memory, question: Question, confirmation: Confirmation) -> Record | None:
    """Make the confirmed change, in one transaction with the check that it is the change asked about:
    if any other change slipped in (the key's last event, read under the write lock, shows it),
    everything is rolled back and `StaleAnswer` raised."""
    store, user, q = memory.store, memory.user, question
    try:
        with store.transaction():
            # Under the write lock: the record is still the one the person was shown, write number
            # included (a forget and a rewrite give the same revision, never the same write).
            if read_state(memory, q.kind, q.key) != q.state:
                raise _Overtaken
            if q.action == "put":
                assert q.value is not None
                result: Record | None = store.put(user, memory.session, q.kind, q.key, q.value,
                                                  confirmation=confirmation.id)
                expected = q.state.revision + 1
            else:
                store.delete(user, q.kind, q.key, session=memory.session, confirmation=confirmation.id)
                result, expected = None, q.state.revision
            history = store.history(user, q.kind, q.key)
            last = history[-1] if history else None
            if last is None or last["confirmation"] != confirmation.id or last["revision"] != expected:
                raise _Overtaken  # rolls the change back
    except _Overtaken:
        now = read_state(memory, q.kind, q.key)
        raise StaleAnswer(f"{q.kind} {q.key!r} changed while the person was being asked (it was "
                          f"{q.state.describe()}, it is now {now.describe()}); the answer was for "
                          "the old state. Call the tool again to ask about the current one") from None
    # Spent only once committed; a rolled-back one is never found again (each question makes its own).
    memory.approvals.spend(confirmation)
    return result


def propose(memory: Memory, question: Question) -> dict[str, Any]:
    """Keep the unanswered change as a pending proposal of the server's user (see Store.propose_put)."""
    store, q = memory.store, question
    if q.action == "put":
        assert q.value is not None
        return dict(store.propose_put(memory.user, memory.session, q.kind, q.key, q.value))
    return dict(store.propose_delete(memory.user, memory.session, q.kind, q.key))
