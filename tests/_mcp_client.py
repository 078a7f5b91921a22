"""An MCP host in a test: the SDK's own stdio client against `python -m memkit mcp`, and the person behind it.

Shared by the MCP server's tests on SQLite (integrations/test_mcp_server.py), on PostgreSQL
(postgres/test_postgres_integrations.py) and by the reliability lab's (test_reliability_shown_text.py,
test_reliability_replay.py). The caller skips first when the `mcp` extra is absent: importing this
module imports the SDK.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ERAS = ["legacy", "modern"]
"""The two protocol eras: "legacy" (initialize; the question is an `elicitation/create` request in the
middle of the call) and "modern" (`server/discover`; the call returns an input-required result and the
client retries with the answer)."""


class Person:
    """The person behind the client: answers every question with `action`, and remembers them."""

    def __init__(self, action: str = "accept", before: Callable[[], Awaitable[None]] | None = None) -> None:
        self.action, self.before = action, before
        self.asked: list[str] = []

    async def answer(self, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.asked.append(params.message)
        if self.before is not None:
            await self.before()
        if self.action == "error":  # a client that failed to show the question
            return types.ErrorData(code=types.INVALID_REQUEST, message="no window to show it in")
        if self.action == "accept, no content":  # the form has no fields; some clients send none
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action=self.action, content={} if self.action == "accept" else None)

    async def callback(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        return await self.answer(params)


class Connection:
    """One client session, with a `call` that answers input-required rounds as a host does."""

    def __init__(self, session: ClientSession, era: str, person: Person | None) -> None:
        self.session, self.era, self.person = session, era, person

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await self.session.call_tool(name, arguments, allow_input_required=True)
        for _ in range(5):
            if not isinstance(result, types.InputRequiredResult):
                break
            assert self.person is not None, "the server asked a client that cannot answer"
            answers = {key: await self.person.answer(request.params)
                       for key, request in (result.input_requests or {}).items()}
            result = await self.session.call_tool(name, arguments, input_responses=answers,
                                                  request_state=result.request_state, allow_input_required=True)
        assert isinstance(result, types.CallToolResult), result
        return result

    async def structured(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = await self.call(name, arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content


@contextlib.asynccontextmanager
async def connect(workspace: Path | None, era: str, person: Person | None, user: str = "alice",
                  db: str | None = None) -> AsyncIterator[Connection]:
    """`memkit mcp` for `user` in a subprocess, on the SQLite store in `workspace` or the store `db` names."""
    # A PostgreSQL store is named by --db alone: --workspace names a SQLite store's folder.
    where = ["--db", db] if db else ["--workspace", str(workspace)]
    params = StdioServerParameters(command=sys.executable, args=["-m", "memkit", "mcp", *where, "--user", user])
    callback = person.callback if person is not None else None
    async with (stdio_client(params) as (read, write),
                ClientSession(read, write, elicitation_callback=callback) as session):
        if era == "legacy":
            await session.initialize()
        else:
            await session.discover()
        yield Connection(session, era, person)
