"""memkit's memory as an MCP server: four tools, one user, and no write the person did not confirm.

`memkit mcp --workspace DIR --user NAME` runs `serve_stdio`. The tools are `memkit.tools`' four, with
their schemas, so no argument can name a user. Before a write or a delete the server asks the person
(MCP elicitation, in both protocol eras through the SDK's `Resolve`). Each question is a pending
proposal of the user, named in it: accepted, that proposal is approved, once; declined, rejected;
never answered, it waits. What is asked and its checked write are `mcp_changes`; this module is the
MCP side. The design and its reasons: docs/design/integrations.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from ..errors import MemkitError, install_hint

try:
    import anyio.to_thread
    from mcp.server.elicitation import render_elicitation_schema
    from mcp.server.mcpserver import (AcceptedElicitation, CancelledElicitation, Context, Elicit, ElicitationResult,
                                      MCPServer, Resolve)
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools.base import Tool
    from mcp.shared.exceptions import MCPError
    from mcp_types import ToolAnnotations
    from mcp_types.version import is_version_at_least
    from pydantic import BaseModel, ConfigDict
except ImportError:  # pragma: no cover - depends on the installation
    raise ImportError(f"memkit's MCP server needs the official MCP SDK: {install_hint('mcp')}") from None

from ..clock import iso, utc_now
from ..store import Store
from ..store.proposals import approve_command
from ..tools import tool_schemas
from .mcp_changes import Memory, Question, StaleAnswer, ask, decline, read_state, write_confirmed

__all__ = ["ORIGIN", "build_server", "serve_stdio"]

INPUT_REQUIRED_VERSION = "2026-07-28"
"""The first MCP revision in which a tool call asks by returning an input-required result."""

ORIGIN = "mcp-elicitation"
"""Where an answer given through MCP elicitation came from, as a key's history names it
(`proposal#N approved via ORIGIN@<server start>`)."""


class Confirm(BaseModel):
    """Accept to confirm exactly this change, once; decline and nothing changes."""

    # No fields: a field holding the value would let the form change what the person confirms.


_CONFIRM_SCHEMA = render_elicitation_schema(Confirm)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What a resolver found without the SDK's help: no question was needed or possible
    (`unchanged`, `absent`, `cannot_ask`), or the answer to a question it put itself."""

    reason: Literal["unchanged", "absent", "cannot_ask", "accept", "decline", "cancel"]
    detail: str | None = None


def _memory(ctx: Context) -> Memory:
    memory = ctx.request_context.lifespan_context
    assert isinstance(memory, Memory)
    return memory


async def _in_thread(fn: Any, *args: Any) -> Any:
    """Run one store operation on a worker thread (a busy database must not stall the protocol),
    turning memkit's refusals into tool errors."""
    try:
        return await anyio.to_thread.run_sync(fn, *args)
    except StaleAnswer:
        raise
    except MemkitError as exc:
        raise ToolError(str(exc)) from exc


def _can_ask(ctx: Context) -> bool:
    """Whether the client declared form elicitation (a bare `elicitation: {}` counts, as in the spec)."""
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


# -- resolvers: they run before a tool's body, in both protocol eras ---------------------------------


async def _plan(ctx: Context, action: Literal["put", "delete"], kind: str, key: str, value: str | None) -> Question:
    memory = _memory(ctx)
    limits = memory.store.limits
    try:
        limits.check_kind(kind), limits.check_key(key)
        if value is not None:
            limits.check_value(value)
    except MemkitError as exc:  # refused before anyone is asked to confirm it
        raise ToolError(str(exc)) from exc
    state = await _in_thread(read_state, memory, kind, key)
    return Question(action, memory.user, kind, key, value, state)


async def _plan_put(kind: str, key: str, value: str, ctx: Context) -> Question:
    return await _plan(ctx, "put", kind, key, value)


async def _plan_delete(kind: str, key: str, ctx: Context) -> Question:
    return await _plan(ctx, "delete", kind, key, None)


def _nothing_to_ask(question: Question) -> Outcome | None:
    """`unchanged` (a save of the value stored) or `absent` (a delete of nothing): no question, no ticket."""
    if question.needed:
        return None
    return Outcome("unchanged" if question.action == "put" else "absent")


async def _ticket(question: Question, ctx: Context) -> Question:
    """The question with its ticket, the pending proposal that records it (`mcp_changes.ask`). Run
    again on a client's retry, it finds the same proposal, so the question renders the same; after
    the answer was used or the user forgotten, it makes a new one, and the old answer fits nothing."""
    return await _in_thread(ask, _memory(ctx), question) if question.needed else question


async def _ticket_put(question: Annotated[Question, Resolve(_plan_put)], ctx: Context) -> Question:
    return await _ticket(question, ctx)


async def _ticket_delete(question: Annotated[Question, Resolve(_plan_delete)], ctx: Context) -> Question:
    return await _ticket(question, ctx)


async def _ask(question: Question, ctx: Context) -> Elicit[Confirm] | Outcome:
    nothing = _nothing_to_ask(question)
    if nothing is not None:
        return nothing
    if not _can_ask(ctx):
        return Outcome("cannot_ask")
    if ctx.protocol_version is not None and is_version_at_least(ctx.protocol_version, INPUT_REQUIRED_VERSION):
        # The SDK returns the question in an input-required result and matches the retry's
        # answer to the exact question it asked (its digest rides the sealed request state).
        return Elicit(question.message, Confirm)
    # Before 2026-07-28 the question is a request in the middle of the call. Asked here, not by
    # the SDK, so that a client that fails to put it to the person (answers with an error instead
    # of accept, decline or cancel) gets "nothing stored" rather than a failed call.
    try:
        answer = await ctx.session.elicit_form(message=question.message, requested_schema=_CONFIRM_SCHEMA,
                                               related_request_id=ctx.request_id)
    except MCPError as exc:
        return Outcome("cannot_ask", f"the client could not ask the person ({exc.error.message})")
    # The form has no fields, so an accept is an accept with or without (empty) content.
    return Outcome(answer.action)


async def _ask_put(question: Annotated[Question, Resolve(_ticket_put)],
                   ctx: Context) -> Elicit[Confirm] | Outcome:
    return await _ask(question, ctx)


async def _ask_delete(question: Annotated[Question, Resolve(_ticket_delete)],
                      ctx: Context) -> Elicit[Confirm] | Outcome:
    return await _ask(question, ctx)


# -- the tools ------------------------------------------------------------------------------------------


async def memory_get(kind: str, key: str, ctx: Context) -> dict[str, Any]:
    """Read one memory of the user this server serves; `record` is null when there is none."""
    memory = _memory(ctx)
    return {"record": await _in_thread(memory.store.get, memory.user, kind, key)}


async def memory_search(query: str, ctx: Context, kind: str | None = None,
                        limit: int = 5) -> dict[str, Any]:
    """Search the user's memories by a literal, case-insensitive substring, newest first."""
    memory = _memory(ctx)
    limits = memory.store.limits
    try:  # the store checks these too; checked here so a bad limit is refused before any read
        limits.check_query(query), limits.check_limit(limit)
    except MemkitError as exc:
        raise ToolError(str(exc)) from exc
    records = await _in_thread(lambda: memory.store.search(memory.user, query, limit=limit, kind=kind))
    return {"records": records}


async def memory_put(kind: str, key: str, value: str, ctx: Context,
                     question: Annotated[Question, Resolve(_ticket_put)],
                     answer: Annotated[ElicitationResult[Confirm], Resolve(_ask_put)]) -> dict[str, Any]:
    """Save a memory once the person accepts the exact kind, key and value in your MCP client."""
    memory = _memory(ctx)
    outcome, detail = _outcome(answer)
    if outcome == "unchanged":
        record = await _in_thread(memory.store.get, memory.user, kind, key)
        return {"stored": False, "reason": "unchanged", "record": record,
                "message": f"{kind} {key!r} already holds this value; nothing needed saving"}
    if outcome != "accept":
        return await _not_stored(memory, question, outcome, detail)
    try:
        record, confirmation = await _in_thread(write_confirmed, memory, question)
    except StaleAnswer as exc:
        return await _not_stored(memory, question, exc.reason, str(exc))
    return {"stored": True, "record": record, "confirmation": confirmation}


async def memory_delete(kind: str, key: str, ctx: Context,
                        question: Annotated[Question, Resolve(_ticket_delete)],
                        answer: Annotated[ElicitationResult[Confirm], Resolve(_ask_delete)]) -> dict[str, Any]:
    """Delete a memory once the person accepts it in your MCP client."""
    memory = _memory(ctx)
    outcome, detail = _outcome(answer)
    if outcome == "absent":
        return {"deleted": False, "reason": "absent", "message": f"there is no {kind} {key!r}; nothing to delete"}
    if outcome != "accept":
        return await _not_stored(memory, question, outcome, detail)
    try:
        _, confirmation = await _in_thread(write_confirmed, memory, question)
    except StaleAnswer as exc:
        return await _not_stored(memory, question, exc.reason, str(exc))
    return {"deleted": True, "confirmation": confirmation}


def _outcome(answer: Any) -> tuple[str, str | None]:
    """accept, decline, cancel, or why nothing was asked; and a detail to report, if any (the SDK
    hands a resolver's own value over as an accepted outcome holding it)."""
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        return (data.reason, data.detail) if isinstance(data, Outcome) else ("accept", None)
    return ("cancel" if isinstance(answer, CancelledElicitation) else "decline"), None


async def _not_stored(memory: Memory, question: Question, outcome: str,
                      detail: str | None = None) -> dict[str, Any]:
    """The result of a change the person did not confirm: nothing was stored, said plainly. A question
    never answered waits as its pending proposal; a "no" rejects it, and an answer that no longer fits
    (the record changed, the question was forgotten or its answer used) leaves none waiting."""
    why = {
        "decline": "the person declined",
        "cancel": "the person dismissed the question without answering",
        "cannot_ask": (detail or "this MCP client cannot ask the person (it did not declare the elicitation "
                                 "capability)") + ", and memkit changes nothing without their confirmation",
    }.get(outcome) or detail or "the record changed while the person was being asked"
    changed = "deleted" if question.action == "delete" else "stored"
    result: dict[str, Any] = {changed: False, "reason": outcome,
                              "message": f"Nothing was {changed}: {why}. Not done: {question.describe()}."}
    if outcome not in ("cancel", "cannot_ask"):
        await _in_thread(decline, memory, question)  # declined, or its answer no longer fits: it waits no more
    elif question.ticket is not None:
        result["proposal"] = question.ticket
        result["message"] += (f" It waits as proposal {question.ticket} for the person to approve later "
                              f"({approve_command(question.ticket, memory.user)}); "
                              "tell them it waits, do not say it was done.")
    return result


# -- the server -------------------------------------------------------------------------------------------


_TOOLS: list[tuple[Any, str, ToolAnnotations]] = [
    (memory_get, "Read one memory of the current user.",
     ToolAnnotations(title="Read a memory", read_only_hint=True, destructive_hint=False, open_world_hint=False)),
    (memory_search, "Search the current user's memories by a literal, case-insensitive substring, newest first.",
     ToolAnnotations(title="Search memories", read_only_hint=True, destructive_hint=False,
                     open_world_hint=False)),
    (memory_put, "Save a memory of the current user. The person is asked to confirm the exact kind, key "
                 "and value in the MCP client; nothing is saved unless they accept.",
     ToolAnnotations(title="Save a memory (asks the person)", read_only_hint=False, destructive_hint=True,
                     idempotent_hint=True, open_world_hint=False)),
    (memory_delete, "Delete a memory of the current user. The person is asked to confirm in the MCP client; "
                    "nothing is deleted unless they accept.",
     ToolAnnotations(title="Delete a memory (asks the person)", read_only_hint=False, destructive_hint=True,
                     idempotent_hint=True, open_world_hint=False)),
]


def _tool(fn: Any, description: str, annotations: ToolAnnotations, schema: dict[str, Any]) -> Tool:
    """An SDK tool that publishes memkit's schema and, like it, refuses any argument it does not name
    (the SDK's own schema would silently drop an extra `user`)."""
    tool = Tool.from_function(fn, name=fn.__name__, description=description, annotations=annotations)
    loose = tool.fn_metadata.arg_model
    strict = type(loose.__name__, (loose,), {"model_config": ConfigDict(arbitrary_types_allowed=True,
                                                                          extra="forbid")})
    tool.fn_metadata.arg_model = strict
    tool.parameters = schema
    return tool


def build_server(store: Store, user: str, *, session: str = "mcp") -> MCPServer[Memory]:
    """An MCP server whose four tools read and change `user`'s memory in `store`, and nobody else's.

    Args:
        store: the long-term store; the caller opens and closes it.
        user: whose memory every call reads and writes (no tool argument can change it).
        session: recorded as the source session of every saved value.

    Returns:
        The server; `run_stdio_async()` serves it on stdin/stdout.
    """
    user = store.limits.check_id("user", user)
    session = store.limits.check_id("session", session)
    memory = Memory(store, user, session, store.limits.check_id("origin", f"{ORIGIN}@{iso(utc_now())}"))
    schemas = {s["function"]["name"]: s["function"]["parameters"] for s in tool_schemas(store)}

    @contextlib.asynccontextmanager
    async def lifespan(_: MCPServer[Memory]) -> AsyncIterator[Memory]:
        yield memory

    tools = [_tool(fn, description, annotations, schemas[fn.__name__]) for fn, description, annotations in _TOOLS]
    return MCPServer("memkit", instructions=(
        f"The long-term memory of user {user!r}. Read freely with memory_get and memory_search; "
        "memory_put and memory_delete ask the person to confirm each change."),
        tools=tools, lifespan=lifespan, log_level="WARNING")


def serve_stdio(store: Store, user: str, *, session: str = "mcp") -> None:
    """Serve `build_server(store, user)` over stdin/stdout until the client closes the connection."""
    anyio.run(build_server(store, user, session=session).run_stdio_async)
