"""The reliability lab: an answer to a confirmation question is spent when used, and never outlives
the record or the user it was given about, in both MCP protocol eras, on SQLite and on PostgreSQL.

Issue 33, failure 1: alice accepted `drink = tea`; `memkit forget-user alice` ran while the server
stayed up; the client replayed the same round (request state + accept) and `tea` was stored again,
nobody asked: forgetting made the key "nothing saved, revision 0" again, so the old question looked
identical. Each question is now a pending proposal of the user, named in it; proposal ids never
repeat in a store and go with a forgotten user, and an accept approves the proposal in the write's
transaction. Rounds here, against a real `memkit mcp` process driven by the SDK's own client:
- 2026-07-28 (the call returns the question; the client retries with request state + answer):
  accept, forget, replay; accept, change, replay; accept, delete, replay; one accepted round retried
  twice at once (double use);
- 2025-11-25 (the question is a request in the middle of the call): the person answers after the user
  was forgotten, or after the record changed; one question asked twice at once, both accepted.
Another process (this one, through its own store) forgets and changes, as `memkit` would.
"""

from __future__ import annotations

import contextlib
import functools
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from _reliability import scale
from memkit.store import MemoryStore, Store, open_store

pytest.importorskip("mcp.server.mcpserver", reason="the `mcp` extra is not installed: pip install -e '.[mcp]'")

import mcp_types as types
from mcp import ClientSession

from _mcp_client import Person, connect


class Where:
    """A store as the server is given it, and as another process opens it."""

    def __init__(self, workspace: Path, url: str | None) -> None:
        self.workspace, self.url = workspace, url
        self.user = f"alice-{uuid.uuid4().hex[:8]}" if url else "alice"

    @contextlib.contextmanager
    def store(self) -> Iterator[Store]:
        with (open_store(self.url) if self.url else MemoryStore(self.workspace / "state" / "memory.sqlite3")) as store:
            yield store

    def forget(self) -> None:
        with self.store() as store:
            store.forget_user(self.user)

    def put(self, key: str, value: str) -> None:
        with self.store() as store:
            store.put(self.user, "cli", "preference", key, value, confirmation="cli#1")

    def delete(self, key: str) -> None:
        with self.store() as store:
            assert store.delete(self.user, "preference", key, confirmation="cli#1")

    def writes(self, key: str) -> list[str | None]:
        """The key's history as the values each event left (None: a delete)."""
        with self.store() as store:
            return [event["new_value"] for event in store.history(self.user, "preference", key)]


Hook = Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def serve(where: Where, era: str, person: Person) -> AsyncIterator[ClientSession]:
    """A `memkit mcp` process and the SDK's client on it, a client that can ask a person (so the server
    asks); `person` answers legacy questions, the modern rounds answer by hand."""
    async with connect(where.workspace, era, person, user=where.user, db=where.url) as client:
        yield client.session


class Rounds:
    """Replays tried, refused (nothing written), and stored by a replay (what must stay 0)."""

    def __init__(self) -> None:
        self.tried = self.refused = self.stored = 0
        self.kinds: set[str] = set()

    def count(self, kind: str, wrote: bool) -> None:
        self.kinds.add(kind)
        self.tried += 1
        self.stored += wrote
        self.refused += not wrote


async def accepted_round(session: ClientSession, arguments: dict[str, Any]) -> tuple[Any, types.CallToolResult]:
    """One 2026-07-28 round, accepted: the client's answer and request state, and the stored result."""
    first = await session.call_tool("memory_put", arguments, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult), first
    (key, _request), = first.input_requests.items()
    replay = ({key: types.ElicitResult(action="accept", content={})}, first.request_state)
    done = await session.call_tool("memory_put", arguments, input_responses=replay[0], request_state=replay[1],
                                   allow_input_required=True)
    assert done.structured_content["stored"] is True, done
    return replay, done


async def replayed(session: ClientSession, arguments: dict[str, Any], replay: Any) -> Any:
    return await session.call_tool("memory_put", arguments, input_responses=replay[0], request_state=replay[1],
                                   allow_input_required=True)


async def twice(call: Callable[[], Awaitable[Any]]) -> list[Any]:
    """`call()` run twice at once; both results."""
    results: list[Any] = []

    async def one() -> None:
        results.append(await call())

    async with anyio.create_task_group() as group:
        group.start_soon(one)
        group.start_soon(one)
    return results


def no_write(result: Any) -> bool:
    """A replay that wrote nothing: asked again (a new question) or a result saying nothing was stored."""
    if isinstance(result, types.InputRequiredResult):
        return True
    return not result.is_error and result.structured_content.get("stored") is False


async def modern_rounds(where: Where, rounds: Rounds, count: int) -> None:
    async with serve(where, "modern", Person()) as session:
        for n in range(count):
            for what in ("forget", "change", "delete"):
                key = f"{what}{n}"
                arguments = {"kind": "preference", "key": key, "value": "tea"}
                replay, _ = await accepted_round(session, arguments)
                before = await anyio.to_thread.run_sync(where.writes, key)
                if what == "forget":
                    await anyio.to_thread.run_sync(where.forget)
                elif what == "change":
                    await anyio.to_thread.run_sync(where.put, key, "coffee")
                else:
                    await anyio.to_thread.run_sync(where.delete, key)
                after = await anyio.to_thread.run_sync(where.writes, key)
                result = await replayed(session, arguments, replay)
                wrote = await anyio.to_thread.run_sync(where.writes, key) != after
                assert len(before) == 1
                rounds.count(f"accept, {what}, replay", wrote or not no_write(result))
            # Double use: one accepted answer sent twice at once; the record is written once.
            key = f"twice{n}"
            arguments = {"kind": "preference", "key": key, "value": "tea"}
            first = await session.call_tool("memory_put", arguments, allow_input_required=True)
            (wire, _request), = first.input_requests.items()
            answer = {wire: types.ElicitResult(action="accept", content={})}
            results = await twice(functools.partial(replayed, session, arguments, (answer, first.request_state)))
            writes = await anyio.to_thread.run_sync(where.writes, key)
            assert writes == ["tea"], writes
            stored = [r for r in results if not no_write(r)]
            assert len(stored) == 1, results
            rounds.count("one accepted answer sent twice at once", False)


async def legacy_rounds(where: Where, rounds: Rounds, count: int) -> None:
    hooks: list[Hook] = []

    async def before() -> None:  # the person is slow: meanwhile, the store changes
        if hooks:
            await hooks.pop(0)()

    async with serve(where, "legacy", Person("accept", before=before)) as session:
        for n in range(count):
            for what in ("forget", "change"):
                key = f"late-{what}{n}"
                await anyio.to_thread.run_sync(where.put, "food", "rice")  # something to forget
                change: Callable[[], None] = (where.forget if what == "forget"
                                              else lambda k=key: where.put(k, "coffee"))

                async def meanwhile(change: Callable[[], None] = change) -> None:
                    await anyio.to_thread.run_sync(change)

                hooks.append(meanwhile)
                result = await session.call_tool("memory_put", {"kind": "preference", "key": key, "value": "tea"})
                writes = await anyio.to_thread.run_sync(where.writes, key)
                assert "tea" not in writes and result.structured_content["reason"] == (
                    "forgotten" if what == "forget" else "changed"), result
                rounds.count(f"answer given after a {what}", "tea" in writes)
            # One question asked twice at once (the same proposal), both accepted: one write.
            key = f"asked-twice{n}"
            arguments = {"kind": "preference", "key": key, "value": "tea"}
            results = await twice(functools.partial(session.call_tool, "memory_put", arguments))
            writes = await anyio.to_thread.run_sync(where.writes, key)
            assert writes == ["tea"], (writes, results)
            assert sorted(r.structured_content["stored"] for r in results) == [False, True], results
            rounds.count("one question answered twice", False)


@pytest.mark.parametrize("store_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_no_answer_is_used_twice_or_after_a_forget_in_either_era(tmp_path, request, store_kind, figures):
    url = request.getfixturevalue("pg_url") if store_kind == "postgres" else None
    count = scale(1, 10)
    rounds = Rounds()
    for era, run in (("modern", modern_rounds), ("legacy", legacy_rounds)):
        where = Where(tmp_path / era, url)

        async def body(where: Where = where, run: Callable[..., Awaitable[None]] = run) -> None:
            await run(where, rounds, count)

        anyio.run(body)
    figures(f"Replayed confirmations ({store_kind})",
            **{"kinds of replay": len(rounds.kinds), "replays tried": rounds.tried,
               "refused": rounds.refused, "stored by a replay": rounds.stored})
    assert rounds.stored == 0 and rounds.refused == rounds.tried
