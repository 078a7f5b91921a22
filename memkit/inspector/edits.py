"""The inspector's corrections as plain functions: stage a change, then make exactly it, once.

`make` writes the way an agent's change is written: a one-time confirmation in an `Approvals`, then
the `memory_put` or `memory_delete` tool of `MemoryTools`, which finds it, writes with its id in the
event history, and spends it; and only if the record is still exactly the one shown when staging.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Mapping

from ..approvals import Approvals
from ..errors import ApprovalError, MemkitError, StoreError
from ..store import Record, Store
from ..tools import MemoryTools

SHOWN_FIELDS = ("value", "revision", "created_at", "updated_at", "source_session")
"""What of a record a staged change keeps, with the store's write number: all must still hold."""


def stage(store: Store, user: str, action: str, record: Record, new_value: str | None,
          describe: str) -> dict[str, Any]:
    """A staged change of `record` (`edit` to `new_value`, or `delete`); nothing is written.

    The store's number of the record's last write is kept too, so `make` refuses the key forgotten
    and written again (revision 1 again, perhaps the same value).
    """
    shown = {field: record[field] for field in SHOWN_FIELDS}  # type: ignore[literal-required]
    shown["write"] = store.write_number(user, record["kind"], record["key"])
    return {"action": action, "user": user, "kind": record["kind"], "key": record["key"],
            "old_value": record["value"], "new_value": new_value, "revision": record["revision"],
            "shown": shown, "describe": describe}


def staged_view(staged: Mapping[str, Any]) -> dict[str, Any]:
    """What staging returns to the person: the change, the revision seen, and what to do next."""
    return {"staged": staged["describe"], "revision seen": staged["revision"],
            "written": False, "next": "press Confirm to do exactly this, or Cancel"}


def differences(store: Store, staged: Mapping[str, Any], current: Record | None) -> list[str]:
    """How `current` differs from the record shown when `staged` was made (empty: not at all)."""
    if current is None:
        return ["deleted"]
    now = {field: current[field] for field in SHOWN_FIELDS}  # type: ignore[literal-required]
    now["write"] = store.write_number(staged["user"], staged["kind"], staged["key"])
    changed = [field for field in (*SHOWN_FIELDS, "write") if now[field] != staged["shown"][field]]
    if changed == ["write"]:
        return ["written again since (the same value: forgotten and rewritten, or restored)"]
    return [f"{field} {staged['shown'][field]!r} -> {now[field]!r}" for field in changed if field != "write"]


def make(store: Store, approvals: Approvals, tools: MemoryTools, staged: Mapping[str, Any]) -> dict[str, Any]:
    """Do exactly the staged change under a new one-time confirmation from `approvals`.

    The record is checked before the confirmation is made, and again inside the write's
    transaction, holding the write lock, so nothing can slip in between.

    Returns:
        action (`done`), kind, key, the confirmation id the event history recorded, the revision.

    Raises:
        ApprovalError: the record changed since it was staged (nothing was written).
        StoreError: the store refused the write (locked, a quota); nothing was written.
    """
    user, kind, key = staged["user"], staged["kind"], staged["key"]

    def refuse_if_changed() -> None:
        changed = differences(store, staged, store.get(user, kind, key))
        if changed:
            raise ApprovalError(
                f"{kind} {key!r} changed since it was staged ({'; '.join(changed)}); nothing was "
                "written. Look again and stage a new change")

    refuse_if_changed()  # a first look, before any confirmation is made for it
    if staged["action"] == "edit":
        confirmation = approvals.confirm_put(kind, key, staged["new_value"])
    else:
        confirmation = approvals.confirm_delete(kind, key)
    try:
        with store.transaction():
            refuse_if_changed()  # again holding the write lock: nothing can slip in between
            if staged["action"] == "edit":
                outcome = tools.call("memory_put", {"kind": kind, "key": key, "value": staged["new_value"]})
            else:
                outcome = tools.call("memory_delete", {"kind": kind, "key": key})
    except MemkitError as exc:
        if isinstance(exc, ApprovalError):
            raise
        outcome = {"ok": False, "error": str(exc)}  # the lock or the commit failed: nothing was written
    finally:
        if confirmation in approvals.pending:
            # Not spent (the write failed): a click confirms one attempt, never a later replay.
            approvals.spend(confirmation)
    if not outcome["ok"]:
        raise StoreError(f"{staged['describe']}: not done, nothing was written ({outcome['error']})")
    if staged["action"] == "delete" and not outcome["result"]["deleted"]:
        raise ApprovalError(f"{kind} {key!r} was deleted by someone else meanwhile; nothing was written")
    revision = outcome["result"]["revision"] if staged["action"] == "edit" else staged["revision"]
    # The id the event history recorded: the tool spends the first waiting confirmation of
    # exactly this change, which is an older one if a person had already confirmed it.
    recorded = store.history(user, kind, key)[-1]["confirmation"]
    return {"done": staged["action"], "kind": kind, "key": key, "confirmation": recorded, "revision": revision}
