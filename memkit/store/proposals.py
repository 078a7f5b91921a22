"""Proposals: a save or a delete the model proposed, kept until a person approves or rejects it.

A proposal is a question to a person, never a memory: it lives in its own table, and its approval
is refused once the key changed. `StoreProposals` holds `Store`'s methods; the functions below the
SQL and the rules, run inside the store's write transaction. The rules: docs/design/store.md.
"""

from __future__ import annotations

import datetime as _dt
import shlex
from typing import Any, Literal

from ..clock import iso
from ..errors import ApprovalError, ProposalError, QuotaError, ValidationError
from ..limits import Limits
from ..visible import quoted

from .backend import StorePart

Proposal = dict[str, Any]
"""A proposal as the kit hands it out (see `to_proposal` for the keys)."""

Action = Literal["put", "delete"]

_COLUMNS = ("p.id, p.user_id, p.session_id, p.action, p.kind, p.memory_key, p.value, p.base_value,"
            " p.base_revision, p.base_event, p.status, p.created_at, p.expires_at, p.decided_at, p.decided_by")

# The key's newest event now: compared with base_event to tell whether the record changed.
_NOW_EVENT = ("(SELECT max(e.id) FROM memory_events e WHERE e.user_id = p.user_id AND e.kind = p.kind"
              " AND e.memory_key = p.memory_key) AS now_event")

_SELECT = f"SELECT {_COLUMNS}, {_NOW_EVENT} FROM proposals p"


def check_id(proposal_id: object) -> int:
    """Check a proposal id: a positive integer (as `proposals()` lists them)."""
    if not isinstance(proposal_id, int) or isinstance(proposal_id, bool) or proposal_id < 1:
        raise ValidationError(
            f"proposal id {proposal_id!r} is not a proposal id; ids are positive integers, "
            "as proposals(user) lists them"
        )
    return proposal_id


def to_proposal(row: Any, now: _dt.datetime) -> Proposal:
    """A row of `_SELECT` as a `Proposal`.

    Keys: `id`; `action` (`put` or `delete`); `kind`; `key`; `value` (the proposed value, None for
    a delete); `against_value` and `against_revision` (the record when the proposal was made, None
    when there was none); `stale` (still waiting, and the record changed since: an approval would
    be refused);
    `session` (where it was proposed); `status` (`pending`, `approved`, `rejected`); `expired`;
    `created_at`, `expires_at`, `age_seconds`; `decided_at`, `decided_by` (None while pending).
    """
    created = row["created_at"]
    return {
        "id": int(row["id"]),
        "action": row["action"],
        "kind": row["kind"],
        "key": row["memory_key"],
        "value": row["value"],
        "against_value": row["base_value"],
        "against_revision": row["base_revision"],
        "stale": row["status"] == "pending" and row["now_event"] != row["base_event"],
        "session": row["session_id"],
        "status": row["status"],
        "expired": row["status"] == "pending" and row["expires_at"] <= iso(now),
        "created_at": created,
        "expires_at": row["expires_at"],
        "age_seconds": max(0, int((now - _dt.datetime.fromisoformat(created)).total_seconds())),
        "decided_at": row["decided_at"],
        "decided_by": row["decided_by"],
    }


def describe(proposal: Proposal) -> str:
    """A short human description, e.g. `save preference city = 'Porto'` or `delete episode 'trip'`;
    a person decides on it, so the value's hidden characters are shown as escapes (`quoted`)."""
    if proposal["action"] == "put":
        return f"save {proposal['kind']} {proposal['key']} = {quoted(proposal['value'])}"
    return f"delete {proposal['kind']} {proposal['key']!r}"


def approve_command(proposal_id: int | str, user: str) -> str:
    """The command a person runs to approve proposal `proposal_id` of `user`, ready to paste into a shell."""
    return f"memkit approve {proposal_id} --user {shlex.quote(user)} --confirm"


def fetch(conn: Any, user: str, proposal_id: int, now: _dt.datetime) -> Proposal | None:
    """The proposal `proposal_id` of `user`, or None (unknown, or another user's: the same answer)."""
    row = conn.execute(f"{_SELECT} WHERE p.id = ? AND p.user_id = ?", (proposal_id, user)).fetchone()
    return None if row is None else to_proposal(row, now)


def make(conn: Any, limits: Limits, user: str, session: str, action: Action, kind: str, key: str,
         value: str | None, now: _dt.datetime) -> tuple[Proposal, bool]:
    """Keep one proposal of `user` (inside the caller's write transaction, holding the user's
    proposal lock); return it and whether it is new (False: the same one was already waiting).

    Raises:
        ValidationError: nothing to propose (the key already holds exactly this value; a delete
            of a key that has no record). QuotaError: the user has the most proposals waiting.
    """
    stamp = iso(now)
    base = conn.execute(
        "SELECT (SELECT value FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?),"
        " (SELECT revision FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ?),"
        " (SELECT max(id) FROM memory_events WHERE user_id = ? AND kind = ? AND memory_key = ?)",
        (user, kind, key) * 3,
    ).fetchone()
    base_value, base_revision, base_event = base[0], base[1], base[2]
    if action == "put" and base_value == value:
        raise ValidationError(f"{kind} {key!r} already holds exactly this value (revision {base_revision}); "
                              "there is nothing to save or to propose")
    if action == "delete" and base_value is None:
        raise ValidationError(f"there is no {kind} {key!r} of this user; there is nothing to delete or to propose")
    same = conn.execute(
        f"{_SELECT} WHERE p.user_id = ? AND p.status = 'pending' AND p.expires_at > ? AND p.action = ?"
        " AND p.kind = ? AND p.memory_key = ? AND coalesce(p.value, '') = ? AND coalesce(p.base_event, 0) = ?"
        " ORDER BY p.id LIMIT 1",
        (user, stamp, action, kind, key, value or "", base_event or 0),
    ).fetchone()
    if same is not None:
        return to_proposal(same, now), False
    waiting = conn.execute(
        "SELECT count(*) FROM proposals WHERE user_id = ? AND status = 'pending' AND expires_at > ?",
        (user, stamp),
    ).fetchone()[0]
    bound = limits.max_pending_proposals_per_user
    if waiting >= bound:
        raise QuotaError(
            f"user {user!r} has {waiting} proposals waiting for a person; at most {bound} may wait. "
            "A person must approve or reject some first"
        )
    # Decided and expired proposals: keep the newest `bound` of them, so a recent id is still
    # answered "already approved" rather than "unknown", and the table stays bounded per user.
    done = "user_id = ? AND (status <> 'pending' OR expires_at <= ?)"
    conn.execute(
        f"DELETE FROM proposals WHERE {done} AND id <= (SELECT id FROM proposals WHERE {done}"
        " ORDER BY id DESC LIMIT 1 OFFSET ?)",
        (user, stamp, user, stamp, bound),
    )
    expires = iso(now + _dt.timedelta(seconds=limits.proposal_ttl_seconds))
    new_id = conn.execute(
        "INSERT INTO proposals (user_id, session_id, action, kind, memory_key, value, base_value,"
        " base_revision, base_event, status, created_at, expires_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?) RETURNING id",
        (user, session, action, kind, key, value, base_value, base_revision, base_event, stamp, expires),
    ).fetchone()[0]
    made = fetch(conn, user, int(new_id), now)
    assert made is not None
    return made, True


def waiting(conn: Any, user: str, proposal_id: int, now: _dt.datetime, deciding: str) -> Proposal:
    """The proposal `proposal_id` of `user` if it may still be decided (`deciding`: approve or reject).

    Raises:
        ProposalError: unknown or another user's (the same message, so ids of other users cannot be
            probed), already decided, or (for an approval) expired or stale; `reason` says which.
    """
    proposal = fetch(conn, user, proposal_id, now)
    if proposal is None:
        raise ProposalError(
            f"user {user!r} has no proposal {proposal_id} (unknown, another user's, or removed long "
            "after it was decided); nothing was changed. Their proposals are listed by proposals(user) "
            f"(`memkit proposals --user {shlex.quote(user)}`)", "unknown"
        )
    if proposal["status"] != "pending":
        raise ProposalError(
            f"proposal {proposal_id} ({describe(proposal)}) was already {proposal['status']} at "
            f"{proposal['decided_at']} (by {proposal['decided_by']}); nothing was changed", "decided"
        )
    if deciding == "approve" and proposal["expired"]:
        raise ProposalError(
            f"proposal {proposal_id} ({describe(proposal)}) expired at {proposal['expires_at']}; "
            "nothing was changed. Reject it, or let the model propose it again", "expired"
        )
    if deciding == "approve" and proposal["stale"]:
        was = (f"revision {proposal['against_revision']} ({proposal['against_value']!r})"
               if proposal["against_revision"] is not None else "no record")
        raise ProposalError(
            f"proposal {proposal_id} ({describe(proposal)}) was made against {was}, and "
            f"{proposal['kind']} {proposal['key']!r} has changed since; nothing was changed. "
            "Reject it, or let the model propose again from the current value", "stale"
        )
    return proposal


def decide(conn: Any, proposal_id: int, status: Literal["approved", "rejected"], now: _dt.datetime,
           origin: str) -> None:
    """Mark a waiting proposal decided (inside the transaction that checked it with `waiting`)."""
    changed = conn.execute(
        "UPDATE proposals SET status = ?, decided_at = ?, decided_by = ? WHERE id = ? AND status = 'pending'",
        (status, iso(now), origin, proposal_id),
    ).rowcount
    if changed != 1:  # the caller holds the user's proposal lock: no one else can have decided it
        raise ProposalError(f"proposal {proposal_id} was decided by someone else meanwhile; nothing was changed",
                            "decided")


def confirmation_of(proposal: Proposal, origin: str) -> str:
    """What the event history keeps for an approved proposal: which one, and where the approval came from."""
    return f"proposal#{proposal['id']} approved via {origin}"


class StoreProposals(StorePart):
    """`Store`'s proposals: propose_put, propose_delete, proposals, approve, reject."""

    def propose_put(self, user: str, session: str, kind: str, key: str, value: str) -> Proposal:
        """Keep a save the model proposed until a person approves or rejects it. Nothing is saved.

        Made against the record as it is now: approving it is refused once the record changed. The
        same proposal made again while the first waits returns that first one, with `new` False.

        Raises:
            ValidationError: an argument broke a rule, or the key already holds exactly this value.
            QuotaError: the user has `Limits.max_pending_proposals_per_user` proposals waiting, or
                the size cap. StoreError: the database is locked or failed. Nothing was kept.
        """
        self._check_identity(user, kind, key)
        self.limits.check_id("session", session)
        self.limits.check_value(value)
        return self._propose(user, session, "put", kind, key, value)

    def propose_delete(self, user: str, session: str, kind: str, key: str) -> Proposal:
        """Keep a delete the model proposed until a person approves or rejects it. Nothing is deleted.

        Raises:
            ValidationError: an argument broke a rule, or there is no such record to delete.
            QuotaError, StoreError: as `propose_put`. Nothing was kept.
        """
        self._check_identity(user, kind, key)
        self.limits.check_id("session", session)
        return self._propose(user, session, "delete", kind, key, None)

    def _propose(self, user: str, session: str, action: Action, kind: str, key: str,
                 value: str | None) -> Proposal:
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            proposal, new = make(conn, self.limits, user, session, action, kind, key, value, self._clock())
            if new:
                self._db.check_size(conn)
        return {**proposal, "new": new}

    def proposals(self, user: str, *, pending_only: bool = True) -> list[Proposal]:
        """`user`'s proposals, oldest first: those waiting for a person (expired and stale ones
        included and marked, since a person may want to reject them), or with `pending_only=False`
        also the decided ones the store still keeps. Their keys: `to_proposal`.
        """
        self.limits.check_id("user", user)
        now = self._clock()
        rows = self._db.fetch(f"{_SELECT} WHERE p.user_id = ? AND (? = 0 OR p.status = 'pending') ORDER BY p.id",
                              (user, 1 if pending_only else 0))
        return [to_proposal(row, now) for row in rows]

    def approve(self, user: str, proposal_id: int, *, origin: str) -> dict[str, Any]:
        """Apply one waiting proposal of `user`, exactly as proposed, and mark it approved.

        The change runs as `put` or `delete` would, in the same transaction as the check; its event's
        confirmation is `proposal#ID approved via ORIGIN`. Two approvals, from any processes, apply it once.

        Args:
            origin: where the person approved it (`cli`, `chat-terminal`, `inspector`, ...), an id.

        Returns:
            `{"proposal": the proposal now approved, "record": the record saved}` for a save,
            `{"proposal": ..., "deleted": True}` for a delete.

        Raises:
            ProposalError: (an ApprovalError) unknown or another user's id, already approved or
                rejected, expired, or the record changed since the proposal was made; its `reason`
                says which. ValidationError: a bad argument.
            QuotaError: the save would pass a quota or the size cap. StoreError: locked or failed.
            In every case nothing was changed and the proposal still waits (unless decided before).
        """
        self.limits.check_id("user", user)
        check_id(proposal_id)
        self.limits.check_id("origin", origin)
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            self._db.lock_user(conn, user, creating=True)
            now = self._clock()
            proposal = waiting(conn, user, proposal_id, now, "approve")
            confirmation = confirmation_of(proposal, origin)
            outcome: dict[str, Any]
            if proposal["action"] == "put":
                record = self.put(user, proposal["session"], proposal["kind"], proposal["key"], proposal["value"],
                                  confirmation=confirmation)
                outcome = {"record": record}
            else:
                deleted = self.delete(user, proposal["kind"], proposal["key"], session=proposal["session"],
                                      confirmation=confirmation)
                if not deleted:  # cannot happen: the delete would have added an event, and stale says so
                    raise ApprovalError(f"proposal {proposal_id}: nothing to delete; nothing was changed")
                outcome = {"deleted": True}
            decide(conn, proposal_id, "approved", now, origin)
            decided = fetch(conn, user, proposal_id, now)
        return {"proposal": decided, **outcome}

    def reject(self, user: str, proposal_id: int, *, origin: str) -> Proposal:
        """Mark one waiting proposal of `user` rejected; memory is not touched.

        An expired or stale proposal may be rejected (it clears the list); a decided one may not.

        Raises:
            ProposalError: unknown or another user's id, or already approved or rejected.
            ValidationError: a bad argument. Nothing was changed.
        """
        self.limits.check_id("user", user)
        check_id(proposal_id)
        self.limits.check_id("origin", origin)
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            now = self._clock()
            waiting(conn, user, proposal_id, now, "reject")
            decide(conn, proposal_id, "rejected", now, origin)
            decided = fetch(conn, user, proposal_id, now)
        assert decided is not None
        return decided

