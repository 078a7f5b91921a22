"""memkit's four memory tools as openai-agents function tools, writes approved in the SDK's own flow.

openai-agents pauses a run on a tool made with `needs_approval=True`: the call comes back as an
interruption (`result.interruptions`), the application shows it to a person, who approves or
rejects it (`state.approve(item)`, `state.reject(item)`), and `Runner.run(agent, state)` resumes,
in this process or in another one from `RunState.to_string()`. `memory_tools` makes `memory_put`
and `memory_delete` such tools: the person's approval of one call becomes memkit's one-time
confirmation of exactly that change, named in the key's history as `openai-agents-approval@<call
id>#1`; a rejected call never runs, so nothing is stored. The call id makes the confirmation spent
for good: a state resumed twice (two processes, a retried request) finds its change already in the
history and writes nothing again. The design and its reasons: docs/design/integrations.md.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..errors import MemkitError, install_hint

try:
    from agents import FunctionTool
    from agents.tool_context import ToolContext
except ImportError:  # pragma: no cover - depends on the installation
    raise ImportError(f"memkit's openai-agents tools need openai-agents: {install_hint('agents')}") from None

from ..approvals import Approvals, Confirmation
from ..store import Store
from ..tools import MemoryTools
from ..validators import first_error

__all__ = ["ORIGIN", "memory_tools"]

ORIGIN = "openai-agents-approval"
"""How a confirmation made by a person's approval in openai-agents is named in a key's history
(`ORIGIN@<tool call id>#1`): the call id says which approved call made the change."""

_DESCRIPTIONS = {
    "memory_get": "Read one memory of the current user.",
    "memory_search": "Search the current user's memories by a literal, case-insensitive substring, newest first.",
    "memory_put": "Save a memory of the current user. The person is asked to approve this exact kind, key and "
                  "value first; nothing is saved unless they approve. Never say it was saved unless the result "
                  "shows a revision.",
    "memory_delete": "Delete a memory of the current user. The person is asked to approve the delete first; "
                     "nothing is deleted unless they approve.",
}
_CHANGES = frozenset({"memory_put", "memory_delete"})


class _Memory:
    """What every tool of one `memory_tools` call works with: the store and the fixed user and session."""

    def __init__(self, store: Store, user: str, session: str) -> None:
        self.store = store
        self.user = store.limits.check_id("user", user)
        self.session = store.limits.check_id("session", session)

    def tools(self, approvals: Approvals) -> MemoryTools:
        return MemoryTools(self.store, self.user, self.session, approvals)

    def read(self, name: str, arguments: str) -> dict[str, Any]:
        """A get or a search: no approval needed, so no confirmation is ever made."""
        return self.tools(Approvals(ORIGIN, self.store.limits)).call(name, arguments)

    def change(self, name: str, arguments: str, call_id: str) -> dict[str, Any]:
        """An approved put or delete: made once under the confirmation its call id names, or found made."""
        try:
            approvals = Approvals(f"{ORIGIN}@{call_id}", self.store.limits)
        except MemkitError as exc:
            return {"ok": False, "error": f"this tool call's id cannot name a confirmation: {exc}"}
        tools = self.tools(approvals)
        parsed = _object(arguments)
        if parsed is None or first_error(tools.validators[name], parsed) is not None:
            return tools.call(name, arguments)  # says what is wrong with the arguments; nothing is written
        try:
            confirmation = (approvals.confirm_put(parsed["kind"], parsed["key"], parsed["value"])
                            if name == "memory_put" else approvals.confirm_delete(parsed["kind"], parsed["key"]))
            # One transaction for the look and the write: two resumes of one state, in two processes
            # at once, cannot both find the change missing.
            with self.store.transaction():
                if self._made(confirmation):
                    return self._already_made(confirmation)
                return tools.call(name, parsed)
        except MemkitError as exc:  # a locked database, a value the store's rules refuse
            return {"ok": False, "error": str(exc)}

    def _made(self, confirmation: Confirmation) -> bool:
        history = self.store.history(self.user, confirmation.kind, confirmation.key)
        return any(event["confirmation"] == confirmation.id for event in history)

    def _already_made(self, confirmation: Confirmation) -> dict[str, Any]:
        now = self.store.get(self.user, confirmation.kind, confirmation.key)
        result = {"deleted": True} if confirmation.action == "delete" else now
        return {"ok": True, "result": result, "note": f"this approved call was already carried out "
                f"({confirmation.id}: {confirmation.describe()}); nothing was changed again"}


def _object(arguments: str) -> dict[str, Any] | None:
    """The arguments as a JSON object, or None (then `MemoryTools.call` says what is wrong)."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def _not_approved_once(ctx: ToolContext[Any], name: str) -> str | None:
    """Why this call may not change anything, or None when a person approved exactly this call.

    The SDK runs an approval-gated tool only once approved; this also refuses a run whose approval
    was `always_approve=True` (a standing yes to every future call, which a call id never seen
    answers too): memkit's confirmation covers one exact change.
    """
    if ctx.is_tool_approved(name, ctx.tool_call_id) is not True:
        return f"{name} runs only once a person approves the call; nothing was changed"
    if ctx.is_tool_approved(name, f"{ctx.tool_call_id} (never called)") is True:
        return (f"{name} was approved for every call (always_approve=True), and memkit changes a memory only "
                "on a person's approval of that one call; nothing was changed. Approve each call on its own")
    return None


def memory_tools(store: Store, user: str, *, session: str = "openai-agents") -> list[FunctionTool]:
    """`memory_get`, `memory_search`, `memory_put` and `memory_delete` of `user`, as openai-agents tools.

    The schemas are `memkit.tools`' (closed: no argument can name a user). `memory_put` and
    `memory_delete` have `needs_approval=True`: each call waits for a person's approval in the run's
    interruptions, and an approved one is made once, under a confirmation named for its call id.

    Args:
        store: the long-term store; the caller opens and closes it.
        user: whose memory every call reads and writes; chosen by the application, never by the model.
        session: recorded as the source session of every saved value.

    Example:
        >>> agent = Agent("helper", tools=memory_tools(store, "alice@example.com"))  # doctest: +SKIP
    """
    memory = _Memory(store, user, session)
    return [_tool(memory, schema["function"]) for schema in memory.tools(Approvals(ORIGIN)).schemas]


def _tool(memory: _Memory, function: dict[str, Any]) -> FunctionTool:
    name = function["name"]

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:  # ToolContext: the SDK passes the call id
        if name not in _CHANGES:
            result = await asyncio.to_thread(memory.read, name, arguments)
        elif (refusal := _not_approved_once(ctx, name)) is not None:
            result = {"ok": False, "error": refusal}
        else:
            result = await asyncio.to_thread(memory.change, name, arguments, ctx.tool_call_id)
        return json.dumps(result, ensure_ascii=False)

    # Not strict: OpenAI's strict mode wants every property required, and memory_search's kind and
    # limit are optional; memkit checks every call against the closed schema itself.
    return FunctionTool(name=name, description=_DESCRIPTIONS[name], params_json_schema=function["parameters"],
                        on_invoke_tool=invoke, strict_json_schema=False, needs_approval=name in _CHANGES)
