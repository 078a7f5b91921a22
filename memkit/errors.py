"""The kit's errors: one base class and a few subclasses a caller can act on.

Every message names the value that was wrong and, where there is one, the remedy.
"""

from __future__ import annotations

DISTRIBUTION = "memkit-course"
"""The kit's name on the package index (`memkit` there is an unrelated project). It installs the
`memkit` package and the `memkit` command."""


def install_hint(extra: str) -> str:
    """The command that installs an optional extra, for an error message to end with."""
    # The checkout form first: the distribution is not on the package index, whose `memkit` is another project.
    return f"pip install -e '.[{extra}]' in the kit's checkout (the distribution {DISTRIBUTION}[{extra}])"


class MemkitError(Exception):
    """Base class of every error memkit raises on purpose."""


class ValidationError(MemkitError, ValueError):
    """An argument broke a documented rule (pattern, length, type). Nothing was changed."""


class QuotaError(MemkitError):
    """A write would exceed a quota or the database size cap. Nothing was changed."""


class StoreError(MemkitError):
    """The database cannot be used as asked (not a memkit file, corrupt, locked or read-only); the
    file is left exactly as it was found."""


class LockedError(StoreError):
    """Another connection holds the database's write lock past the busy timeout; nothing was written,
    and running the write again is safe. Told by the error's code or class (SQLite's `SQLITE_BUSY`
    or `SQLITE_LOCKED`, PostgreSQL's lock timeout, deadlock or shard rebalance), never by its text."""


class ReadOnlyError(LockedError):
    """A write asked of a store opened read-only (the inspector's default); nothing was written. A
    `LockedError` (a lock that never frees), so what a store skips when the lock is taken (keeping
    its search index up to date) it skips here too, and goes on reading."""


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
    (a model call, the budget, the window or the timeout) raises this: the writes stand. `committed`
    says what was changed, one sentence per change, in order; `cause` is the failure that came after.
    """

    def __init__(self, committed: list[str], cause: BaseException) -> None:
        self.committed, self.cause = list(committed), cause
        super().__init__(f"committed: {'; '.join(self.committed)}; then failed: {cause}")
