"""The kit's errors: one base class and a few subclasses a caller can act on.

Every message names the value that was wrong and, where there is one, the remedy.
"""

from __future__ import annotations


class MemkitError(Exception):
    """Base class of every error memkit raises on purpose."""


class ValidationError(MemkitError, ValueError):
    """An argument broke a documented rule (pattern, length, type). Nothing was changed."""


class QuotaError(MemkitError):
    """A write would exceed a quota or the database size cap. Nothing was changed."""


class StoreError(MemkitError):
    """The database cannot be used as asked: not a memkit file, corrupt, locked or read-only.

    The file is left exactly as it was found.
    """


class LockedError(StoreError):
    """Another connection holds the database's write lock past the busy timeout; nothing was written.

    Chosen by SQLite's error code (`SQLITE_BUSY` or `SQLITE_LOCKED`), never by the message text. On
    PostgreSQL by the error's class (a lock timeout), and also raised, rolled back whole, for a
    deadlock PostgreSQL broke and for a block of writes that met a rebalance of the counter shards:
    each message says which; running the write again is safe.
    """


class ReadOnlyError(LockedError):
    """A write asked of a store opened read-only (the inspector's default); nothing was written.

    A `LockedError` (a lock that never frees): what a store does on its own when the lock is taken
    (keeping the search index up to date) it skips here as well, and goes on reading.
    """


class ApprovalError(MemkitError):
    """A write or delete had no matching, unspent confirmation. Nothing was changed."""


class ProposalError(ApprovalError):
    """A proposal cannot be approved or rejected as asked. Nothing was changed.

    `reason` says why, for a program (a widget, the lab) to act on: `unknown` (no such proposal of
    this user: unknown, another user's, or long decided), `decided` (already approved or rejected),
    `expired`, or `stale` (the record changed since the proposal was made).
    """

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class BudgetError(MemkitError):
    """A model request cannot fit its character budget even after trimming; the model was not called."""


class ModelError(MemkitError):
    """The model could not be used: missing credentials, a failed call, or a script that ran out."""


class WindowError(MemkitError):
    """The short-term window (for example Redis) is unavailable or refused a command."""


class CommittedThenFailedError(MemkitError):
    """Changes were committed, then the operation failed before it finished: not "nothing changed".

    An agent's ask that saved or deleted a memory (a confirmed tool call) and then could not go on
    (the model's next call failed, the budget refused the next request, the window refused the
    exchange, the ask timed out) raises this: the writes stand, and the caller must know.

    Attributes:
        committed: what was changed, one sentence per change, in order.
        cause: the failure that came after.
    """

    def __init__(self, committed: list[str], cause: BaseException) -> None:
        self.committed, self.cause = list(committed), cause
        super().__init__(f"committed: {'; '.join(self.committed)}; then failed: {cause}")
