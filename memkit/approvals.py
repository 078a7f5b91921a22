"""One-time confirmations, made by a person outside the model, that allow one exact write or delete.

The model can propose `memory_put` or `memory_delete`; the tool runs only when a confirmation for
exactly that (kind, key, value) or (kind, key) is waiting, and spends it. A changed value, another
key or kind, or a confirmation already used is refused. Claims in the model's text count for nothing.

A confirmation is made before the model proposes. The other way round, a person approving after
the model proposed, is a stored proposal (`Store.propose_put`, `approve`; the tools keep one
when they are made with `unconfirmed="propose"`).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Literal

from .errors import ApprovalError
from .limits import DEFAULT_LIMITS, Limits, check_text


@dataclasses.dataclass(frozen=True)
class Confirmation:
    """One confirmation: what it allows and where it came from (`cli#1`, `widget#3`, ...)."""

    id: str
    action: Literal["put", "delete"]
    kind: str
    key: str
    value: str | None = None

    def describe(self) -> str:
        """A short human description, e.g. `save preference 'drink' = 'tea'`."""
        if self.action == "put":
            return f"save {self.kind} {self.key!r} = {self.value!r}"
        return f"delete {self.kind} {self.key!r}"


class Approvals:
    """The confirmations of one session, each usable once.

    Args:
        origin: names where confirmations come from; ids are `origin#1`, `origin#2`, ...
        limits: used to refuse a confirmation the store would refuse anyway.

    Example:
        >>> approvals = Approvals("cli")
        >>> approvals.confirm_put("preference", "drink", "tea").id
        'cli#1'
        >>> approvals.find_put("preference", "drink", "tea").id
        'cli#1'
    """

    def __init__(self, origin: str = "confirm", limits: Limits = DEFAULT_LIMITS) -> None:
        check_text("origin", origin)
        self.origin = origin
        self.limits = limits
        self._numbers = itertools.count(1)
        self._pending: list[Confirmation] = []
        self._spent: list[Confirmation] = []

    def _add(self, action: Literal["put", "delete"], kind: str, key: str, value: str | None) -> Confirmation:
        confirmation = Confirmation(f"{self.origin}#{next(self._numbers)}", action, kind, key, value)
        self._pending.append(confirmation)
        return confirmation

    def confirm_put(self, kind: str, key: str, value: str) -> Confirmation:
        """Allow one save of exactly this value under (kind, key)."""
        self.limits.check_kind(kind)
        self.limits.check_key(key)
        self.limits.check_value(value)
        return self._add("put", kind, key, value)

    def confirm_delete(self, kind: str, key: str) -> Confirmation:
        """Allow one delete of (kind, key)."""
        self.limits.check_kind(kind)
        self.limits.check_key(key)
        return self._add("delete", kind, key, None)

    def find_put(self, kind: str, key: str, value: str) -> Confirmation:
        """The waiting confirmation for this exact save, or ApprovalError saying what is missing."""
        return self._find(Confirmation("", "put", kind, key, value))

    def find_delete(self, kind: str, key: str) -> Confirmation:
        """The waiting confirmation for this delete, or ApprovalError saying what is missing."""
        return self._find(Confirmation("", "delete", kind, key, None))

    def waiting_put(self, kind: str, key: str, value: str) -> Confirmation | None:
        """The waiting confirmation for this exact save, or None (`find_put` says why there is none)."""
        return self._waiting(Confirmation("", "put", kind, key, value))

    def waiting_delete(self, kind: str, key: str) -> Confirmation | None:
        """The waiting confirmation for this delete, or None."""
        return self._waiting(Confirmation("", "delete", kind, key, None))

    def _waiting(self, wanted: Confirmation, among: list[Confirmation] | None = None) -> Confirmation | None:
        """The first of `among` (default: the waiting ones) that allows what `wanted` (its id "") does."""
        return next((c for c in (self._pending if among is None else among)
                     if dataclasses.replace(c, id="") == wanted), None)

    def spend(self, confirmation: Confirmation) -> None:
        """Mark a confirmation used; it will not allow anything again."""
        self._pending.remove(confirmation)
        self._spent.append(confirmation)

    def _find(self, wanted: Confirmation) -> Confirmation:
        confirmation = self._waiting(wanted)
        if confirmation is not None:
            return confirmation
        spent = self._waiting(wanted, self._spent)
        if spent is not None:
            raise ApprovalError(
                f"the confirmation to {wanted.describe()} ({spent.id}) was already used; "
                "a person must confirm again"
            )
        if wanted.action == "put" and any(
            (c.action, c.kind, c.key) == ("put", wanted.kind, wanted.key) for c in self._pending
        ):
            raise ApprovalError(
                f"no confirmation to {wanted.describe()}: the value confirmed for {wanted.kind} "
                f"{wanted.key!r} is a different one, and a confirmation covers one exact value"
            )
        raise ApprovalError(
            f"no confirmation to {wanted.describe()}; a person must confirm it outside the model "
            "(a CLI flag or the confirm widget)"
        )

    @property
    def pending(self) -> list[Confirmation]:
        """Confirmations not yet used."""
        return list(self._pending)

    @property
    def spent(self) -> list[Confirmation]:
        """Confirmations already used."""
        return list(self._spent)
