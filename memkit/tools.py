"""The memory tools a model may call, bound to one user and session chosen by the trusted caller.

The model can never choose the user: `MemoryTools` is made for one user, and the arguments a model
writes are checked against a JSON Schema with `additionalProperties: false` (no `user` field can
slip in), then by the store's own rules. A write or delete runs only when a person's confirmation
for exactly it is waiting (`Approvals`); without one it is refused, or kept as a proposal for a
person to approve. Every outcome goes back to the model as JSON: `{"ok": true, "result": ...}` or
`{"ok": false, "error": ...}`; a model's mistake never raises.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Literal
from collections.abc import Callable

from .approvals import Approvals
from .errors import MemkitError, ValidationError
from .limits import KEY_PATTERN, KINDS, shorten
from .store import Store
from .store.proposals import Proposal, describe
from .validators import first_error, validator

Unconfirmed = Literal["refuse", "propose"]
"""What the tools do with a write or delete no confirmation allows: refuse it, or keep it as a proposal."""


class MemoryTools:
    """The memory tools of one session: the user and session are fixed here, never by the model.

    Args:
        store: the long-term store.
        user: the user every call is bound to.
        session: recorded as the source of saved values.
        approvals: the session's confirmations; writes and deletes need one each.
        on_delete: called after a confirmed delete (the agent retires the user's recent turns then).
        unconfirmed: a write or delete with no waiting confirmation is refused (`"refuse"`), or kept
            as a proposal for a person to approve (`"propose"`); either way nothing is written yet.

    Example:
        >>> tools = MemoryTools(store, "alice", "s1", Approvals("cli"))       # doctest: +SKIP
        >>> tools.call("memory_get", '{"kind": "preference", "key": "drink"}')  # doctest: +SKIP
        {'ok': True, 'result': None}
    """

    def __init__(self, store: Store, user: str, session: str, approvals: Approvals,
                 on_delete: Callable[[str, str], None] | None = None,
                 unconfirmed: Unconfirmed = "refuse") -> None:
        self.store = store
        self.user = store.limits.check_id("user", user)
        self.session = store.limits.check_id("session", session)
        self.approvals = approvals
        self.on_delete = on_delete
        if unconfirmed not in ("refuse", "propose"):
            raise ValidationError(f"unconfirmed is {unconfirmed!r}; use 'refuse' or 'propose'")
        self.unconfirmed = unconfirmed
        self.schemas = tool_schemas(store, unconfirmed)
        self._handlers: dict[str, Callable[..., Any]] = {
            "memory_get": self._get, "memory_search": self._search,
            "memory_put": self._put, "memory_delete": self._delete,
        }

    def call(self, name: str, arguments: str | dict[str, Any]) -> dict[str, Any]:
        """Run one tool call; never raises for the model's mistakes, returns `{"ok": false, ...}`."""
        if name not in self._handlers:
            return {"ok": False, "error": f"unknown tool {name!r}; the tools are {', '.join(self._handlers)}"}
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return {"ok": False,
                        "error": f"arguments of {name} are not valid JSON: {exc.msg} at position {exc.pos}"}
            except (ValueError, RecursionError) as exc:
                # Valid JSON that Python will not decode: a number of over 4300 digits, or nesting deeper
                # than the interpreter's recursion limit. A model can write either; it must not crash the loop.
                return {"ok": False, "error": f"arguments of {name} cannot be decoded: {str(exc)[:120]}"}
        if not isinstance(arguments, dict):
            return {"ok": False, "error": f"arguments of {name} must be a JSON object"}
        error = first_error(self.validators[name], arguments)
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            return {"ok": False, "error": f"invalid arguments for {name}{' at ' + where if where else ''}: "
                                          f"{_short_message(error)}"}
        try:
            return {"ok": True, "result": self._handlers[name](**arguments)}
        except MemkitError as exc:
            return {"ok": False, "error": str(exc)}

    @functools.cached_property
    def validators(self) -> dict[str, Any]:
        """Each tool's JSON-Schema validator (compiled once per process: see `memkit.validators`)."""
        return {s["function"]["name"]: validator(s["function"]["parameters"]) for s in self.schemas}

    def _get(self, kind: str, key: str) -> Any:
        return self.store.get(self.user, kind, key)

    def _search(self, query: str, kind: str | None = None, limit: int = 5) -> Any:
        return self.store.search(self.user, query, limit=limit, kind=kind)

    def _put(self, kind: str, key: str, value: str) -> Any:
        if self.unconfirmed == "propose" and self.approvals.waiting_put(kind, key, value) is None:
            return _waiting_for_approval(self.store.propose_put(self.user, self.session, kind, key, value))
        confirmation = self.approvals.find_put(kind, key, value)
        record = self.store.put(self.user, self.session, kind, key, value, confirmation=confirmation.id)
        self.approvals.spend(confirmation)
        return record

    def _delete(self, kind: str, key: str) -> Any:
        if self.unconfirmed == "propose" and self.approvals.waiting_delete(kind, key) is None:
            return _waiting_for_approval(self.store.propose_delete(self.user, self.session, kind, key))
        confirmation = self.approvals.find_delete(kind, key)
        deleted = self.store.delete(self.user, kind, key, session=self.session, confirmation=confirmation.id)
        if deleted:
            self.approvals.spend(confirmation)
            if self.on_delete is not None:
                self.on_delete(kind, key)
        return {"deleted": deleted}


PUT_WHEN = (
    "Propose saving a lasting fact or preference the user stated about themselves (where they live, "
    "what to call them, their diet, a standing preference) as a preference, or something that "
    "happened to them as an episode; not a one-off instruction for this conversation. Unless the "
    "user confirmed this exact value outside the chat, nothing is saved: it waits for the person to "
    "approve it, as the result says. Never say it was saved unless the result shows a revision."
)
DELETE_WHEN = (
    "Propose deleting a memory of the user when they ask you to forget it or it no longer holds. "
    "Unless they confirmed the delete outside the chat, nothing is deleted: it waits for the person "
    "to approve it, as the result says."
)


def tool_schemas(store: Store, unconfirmed: Unconfirmed = "refuse") -> list[dict[str, Any]]:
    """The four memory tools in chat-completions form, with the store's limits in their schemas. No
    schema has a `user` property, and none allows another. With `unconfirmed="propose"` the
    descriptions of `memory_put` and `memory_delete` tell a model what is worth proposing."""
    limits = store.limits
    kind = {"type": "string", "enum": list(KINDS)}
    key = {"type": "string", "minLength": 1, "maxLength": limits.max_key_chars, "pattern": f"^{KEY_PATTERN}$"}
    value = {"type": "string", "minLength": 1, "maxLength": limits.max_value_chars}

    def tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required,
                           "additionalProperties": False},
        }}

    return [
        tool("memory_get", "Read one memory of the current user.", {"kind": kind, "key": key}, ["kind", "key"]),
        tool("memory_search", "Search the current user's memories by a literal, case-insensitive substring.",
             {"query": {"type": "string", "maxLength": limits.max_query_chars}, "kind": kind,
              "limit": {"type": "integer", "minimum": 1, "maximum": limits.max_search_limit}}, ["query"]),
        tool("memory_put", PUT_WHEN if unconfirmed == "propose" else
             "Save a memory. Works only if the user confirmed exactly this value outside the chat.",
             {"kind": kind, "key": key, "value": value}, ["kind", "key", "value"]),
        tool("memory_delete", DELETE_WHEN if unconfirmed == "propose" else
             "Delete a memory. Works only if the user confirmed the delete outside the chat.",
             {"kind": kind, "key": key}, ["kind", "key"]),
    ]


def _waiting_for_approval(proposal: Proposal) -> dict[str, Any]:
    """The result the model sees for a proposal: nothing was saved or deleted; a person decides. It
    has no `revision` (a saved record has) and no `deleted` (a delete that ran has), so neither a
    model nor the agent loop can read it as done."""
    action = "saved" if proposal["action"] == "put" else "deleted"
    again = "" if proposal["new"] else " (you had already proposed this; it is the same proposal)"
    return {
        "status": "waiting_for_approval",
        "proposal": proposal["id"],
        "proposed": describe(proposal),
        "message": f"NOT {action}: proposal {proposal['id']} ({describe(proposal)}) is waiting for the "
                   f"person to approve it{again}. Tell them it waits for their approval; do not say it "
                   f"was {action}.",
    }


def _short_message(error: Any) -> str:
    """A schema error in a few words: jsonschema's own message quotes the whole offending value,
    which for a 5000-character value would make the tool result too big to send back."""
    if error.validator in ("maxLength", "minLength") and isinstance(error.instance, str):
        bound = "at most" if error.validator == "maxLength" else "at least"
        return f"the text is {len(error.instance)} characters; it must be {bound} {error.validator_value}"
    return shorten(error.message, 200)
