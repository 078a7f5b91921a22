"""The proposals panel: a person approves or rejects what the model proposed (`Store.propose_put`).

Every button calls `decide`, a plain function that a notebook's next cell (or a test) calls too, so
what a click did can be checked headless. The panel keeps nothing but the store and the user: it
reads the store again after every decision, so it shows the truth even after another process decided.
"""

from __future__ import annotations

import html
from typing import Any
from collections.abc import Callable

from ..errors import MemkitError, ProposalError, QuotaError, ValidationError
from ..store import Store
from ..store.proposals import Proposal, confirmation_of, describe
from ..visible import quoted
from ._support import View, status_html
from ._support import widgets as _widgets
from .tables import MAX_ROWS

DECISIONS = ("approve", "reject")


def decide(store: Store, user: str, proposal_id: int, decision: str,
           origin: str = "notebook") -> dict[str, Any]:
    """Approve or reject one pending proposal of `user`; what the panel's buttons call.

    Args:
        store: the store that keeps the proposal.
        user: whose proposal (another user's id is refused as unknown: ids cannot be probed).
        proposal_id: as `store.proposals(user)` lists it.
        decision: `approve` or `reject`.
        origin: where the person decided; the event history keeps `proposal#ID approved via ORIGIN`.

    Returns:
        `{"ok": True, "decision": "approved"|"rejected", "proposal": id, "what": ..., ...}`: for an
        approved save also `revision` and `confirmation` (what the history records); or
        `{"ok": False, "proposal": id, "reason": ..., "error": ...}` when it was refused
        (`reason`: `unknown`, `decided`, `expired`, `stale`, `invalid`, `quota`, `store`), and then
        nothing was changed.
    """
    if decision not in DECISIONS:
        return refusal(proposal_id, "invalid", f"decision {decision!r} is unknown; use 'approve' or 'reject'")
    try:
        if decision == "reject":
            rejected = store.reject(user, proposal_id, origin=origin)
            return {"ok": True, "decision": "rejected", "proposal": rejected["id"], "what": describe(rejected)}
        outcome = store.approve(user, proposal_id, origin=origin)
    except ProposalError as exc:
        return refusal(proposal_id, exc.reason, str(exc))
    except ValidationError as exc:
        return refusal(proposal_id, "invalid", str(exc))
    except QuotaError as exc:  # a quota or the size cap: the proposal still waits
        return refusal(proposal_id, "quota", str(exc))
    except MemkitError as exc:  # a locked or closed store
        return refusal(proposal_id, "store", str(exc))
    approved: Proposal = outcome["proposal"]
    result: dict[str, Any] = {"ok": True, "decision": "approved", "proposal": approved["id"],
                              "what": describe(approved)}
    if "record" in outcome:
        result["revision"] = outcome["record"]["revision"]
    result["confirmation"] = confirmation_of(approved, origin)  # what the history now holds
    return result


def refusal(proposal_id: Any, reason: str, error: str) -> dict[str, Any]:
    """What `decide` returns for a refused decision (the error on one line); nothing was changed."""
    return {"ok": False, "proposal": proposal_id, "reason": reason, "error": " ".join(error.split())}


def outcome_line(result: dict[str, Any]) -> str:
    """One line saying what `decide` did, or why it refused."""
    if result["ok"]:
        revision = f" (revision {result['revision']})" if "revision" in result else ""
        return f"proposal {result['proposal']} {result['decision']}: {result['what']}{revision}"
    return f"proposal {result['proposal']} refused ({result['reason']}): {result['error']}"


def against(proposal: Proposal) -> str:
    """The record a proposal was made against: `rev 1: 'Lisbon'`, or `no record`."""
    if proposal["against_revision"] is None:
        return "no record"
    return f"rev {proposal['against_revision']}: {quoted(proposal['against_value'])}"


def note(proposal: Proposal) -> str:
    """`stale` (the record changed since: an approval is refused), `expired`, or empty."""
    return "expired" if proposal["expired"] else "stale" if proposal["stale"] else ""


def _status_html(message: str, ok: bool) -> str:
    return status_html(message, ok, "memkit-proposals-status")


class ProposalsPanel(View):
    """A user's pending proposals, each with Approve and Reject buttons that call `decide`.

    Args:
        store: the store that keeps the proposals.
        user: whose proposals (the panel never lists or decides another user's).
        origin: where the decisions come from; recorded in the history as `approved via ORIGIN`.

    Attributes:
        last: what the newest click (or `approve`/`reject` call) returned, None before one.
        buttons: proposal id -> (Approve button, Reject button), for the proposals listed now.

    Example:
        >>> panel = ProposalsPanel(store, "alice")          # doctest: +SKIP
        >>> panel                                            # doctest: +SKIP
        >>> panel.buttons[1][0].click()  # Approve proposal 1, as a person would   # doctest: +SKIP
    """

    def __init__(self, store: Store, user: str, origin: str = "notebook",
                 on_decide: Callable[[dict[str, Any]], None] | None = None) -> None:
        store.limits.check_id("user", user)
        store.limits.check_id("origin", origin)
        w = _widgets()
        self.store, self.user, self.origin = store, user, origin
        self.on_decide = on_decide
        """Called with every decision's result (a view that embeds the panel refreshes itself)."""
        self.last: dict[str, Any] | None = None
        self.buttons: dict[int, tuple[Any, Any]] = {}
        self.title = w.HTML()
        self.rows = w.VBox()
        self.status = w.HTML()
        self.refresh_button = w.Button(description="Refresh", tooltip="read the store again")
        self.refresh_button.on_click(lambda _button: self.refresh())
        self._widget = w.VBox([w.HBox([self.title, self.refresh_button]), self.rows, self.status])
        self._widget.add_class("memkit-proposals")  # so a page (or a browser test) can find it
        self.show_user(user)

    def refresh(self) -> None:
        """List the pending proposals again, from the store (one line instead, if it cannot be read)."""
        w = _widgets()
        try:
            pending = self.store.proposals(self.user)
        except Exception as exc:  # a closed or broken store: one line, the panel stays usable
            self.buttons, self.rows.children = {}, ()
            self.status.value = _status_html(f"cannot read the proposals: {_one_line(exc)}", ok=False)
            return
        self.buttons = {}
        rows = []
        for proposal in pending[:MAX_ROWS]:
            approve = w.Button(description="Approve", button_style="success",
                               tooltip=f"approve proposal {proposal['id']}")
            reject = w.Button(description="Reject", button_style="danger",
                              tooltip=f"reject proposal {proposal['id']}")
            approve.on_click(self._handler(proposal["id"], "approve"))
            reject.on_click(self._handler(proposal["id"], "reject"))
            self.buttons[proposal["id"]] = (approve, reject)
            noted = f" <i>({note(proposal)})</i>" if note(proposal) else ""
            label = w.HTML(f"#{proposal['id']} {html.escape(describe(proposal))}, against "
                           f"{html.escape(against(proposal))}{noted}",
                           layout=w.Layout(width="460px"))
            rows.append(w.HBox([label, approve, reject]))
        if not pending:
            rows.append(w.HTML("<p><i>nothing is waiting</i></p>"))
        elif len(pending) > MAX_ROWS:
            rows.append(w.HTML(f"<p><i>and {len(pending) - MAX_ROWS} more</i></p>"))
        self.rows.children = tuple(rows)

    def show_user(self, user: str) -> None:
        """List another user's proposals (what an embedding view calls when its user changes).

        Raises:
            ValidationError: `user` is not a user id; the panel keeps the user it had.
        """
        self.store.limits.check_id("user", user)
        self.user, self.last = user, None
        self.title.value = f"<b>Proposals of {html.escape(user)} waiting for a person</b>"
        self.status.value = ""
        self.refresh()

    def approve(self, proposal_id: int) -> dict[str, Any]:
        """Approve a proposal (the Approve button's action); returns `decide`'s result."""
        return self._decide(proposal_id, "approve")

    def reject(self, proposal_id: int) -> dict[str, Any]:
        """Reject a proposal (the Reject button's action); returns `decide`'s result."""
        return self._decide(proposal_id, "reject")

    def _decide(self, proposal_id: int, decision: str) -> dict[str, Any]:
        self.last = decide(self.store, self.user, proposal_id, decision, self.origin)
        self.refresh()  # first: what the decision says matters more than a failed re-read
        self.status.value = _status_html(outcome_line(self.last), ok=self.last["ok"])
        if self.on_decide is not None:
            self.on_decide(self.last)
        return self.last

    def _handler(self, proposal_id: int, decision: str) -> Any:
        def on_click(_button: Any) -> None:
            try:
                self._decide(proposal_id, decision)
            except Exception as exc:  # a button shows one line, never a traceback
                self.status.value = _status_html(f"proposal {proposal_id}: {_one_line(exc)}", ok=False)
        return on_click

    def __repr__(self) -> str:
        return f"ProposalsPanel(user={self.user!r}, origin={self.origin!r})"


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
