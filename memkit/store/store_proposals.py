"""The façade's proposals: saves and deletes the model proposed, waiting for a person.

Part of `Store`, the façade (see store_core.py); the rules live in proposals.py. Approving applies the
change through `put` or `delete` (store_records.py) in the same transaction as the check.
"""

from __future__ import annotations

from typing import Any

from ..errors import ApprovalError
from . import proposals
from .proposals import Proposal
from .records import StoreRecords


class StoreProposals(StoreRecords):
    """`Store`'s proposals: propose_put, propose_delete, proposals, approve, reject."""

    # -- proposals: what the model proposed, waiting for a person (see memkit.store.proposals) ----

    def propose_put(self, user: str, session: str, kind: str, key: str, value: str) -> Proposal:
        """Keep a save the model proposed until a person approves or rejects it. Nothing is saved.

        The proposal is made against the record as it is now (its value and revision); approving
        it later is refused if the record changed meanwhile. The same proposal made again while the
        first still waits returns that first one.

        Returns:
            The proposal (see `memkit.store.proposals.to_proposal` for its keys), `new` added: False
            when the same one was already waiting.

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

    def _propose(self, user: str, session: str, action: proposals.Action, kind: str, key: str,
                 value: str | None) -> Proposal:
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            proposal, new = proposals.make(conn, self.limits, user, session, action, kind, key, value,
                                           self._clock())
            if new:
                self._db.check_size(conn)
        return {**proposal, "new": new}

    def proposals(self, user: str, *, pending_only: bool = True) -> list[Proposal]:
        """`user`'s proposals, oldest first: those waiting for a person (expired and stale ones
        included and marked, since a person may want to reject them), or with `pending_only=False`
        also the decided ones the store still keeps. Their keys: `memkit.store.proposals.to_proposal`.
        """
        self.limits.check_id("user", user)
        with self._db.reading() as conn:
            return proposals.listing(conn, user, self._clock(), pending_only)

    def approve(self, user: str, proposal_id: int, *, origin: str) -> dict[str, Any]:
        """Apply one waiting proposal of `user`, exactly as proposed, and mark it approved.

        The change runs as `put` or `delete` would, inside the same transaction as the check (the
        quotas and the size cap included); its event records `proposal#ID approved via ORIGIN` as
        its confirmation. Two approvals of one proposal, from any processes, apply it once.

        Args:
            user: whose proposal (a proposal of another user is refused as unknown).
            proposal_id: as `proposals(user)` lists it.
            origin: where the person approved it (`cli`, `chat-terminal`, `inspector`, ...): an id
                of 1-64 letters, digits, `_`, `.`, `-`.

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
        proposals.check_id(proposal_id)
        self.limits.check_id("origin", origin)
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            self._db.lock_user(conn, user, creating=True)
            now = self._clock()
            proposal = proposals.waiting(conn, user, proposal_id, now, "approve")
            confirmation = proposals.confirmation_of(proposal, origin)
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
            proposals.decide(conn, proposal_id, "approved", now, origin)
            decided = proposals.fetch(conn, user, proposal_id, now)
        return {"proposal": decided, **outcome}

    def reject(self, user: str, proposal_id: int, *, origin: str) -> Proposal:
        """Mark one waiting proposal of `user` rejected; memory is not touched.

        An expired or stale proposal may be rejected (it clears the list); a decided one may not.

        Returns:
            The proposal, now rejected.

        Raises:
            ProposalError: unknown or another user's id, or already approved or rejected.
            ValidationError: a bad argument. Nothing was changed.
        """
        self.limits.check_id("user", user)
        proposals.check_id(proposal_id)
        self.limits.check_id("origin", origin)
        with self.transaction() as conn:
            self._db.lock_proposals(conn, user)
            now = self._clock()
            proposals.waiting(conn, user, proposal_id, now, "reject")
            proposals.decide(conn, proposal_id, "rejected", now, origin)
            decided = proposals.fetch(conn, user, proposal_id, now)
        assert decided is not None
        return decided

