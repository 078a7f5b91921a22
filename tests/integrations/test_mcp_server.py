"""`memkit mcp` as an MCP host sees it: the SDK's own client over stdio, against the real command.

Each test starts `python -m memkit mcp` as a subprocess and talks to it with `stdio_client` and
`ClientSession`, in both protocol eras: "legacy" (the initialize handshake, spec 2025-11-25: the
question is an `elicitation/create` request in the middle of the call) and "modern" (`server/discover`,
spec 2026-07-28: the call returns an input-required result and the client retries with the answer).
The person is an elicitation callback that accepts, declines or cancels, or is absent (a client that
declared no elicitation capability). What was stored is checked with the `memkit` command in another
process, on the same real SQLite file.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Awaitable, Callable

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the `mcp` extra is not installed: pip install -e '.[mcp]'")

import mcp_types as types
from mcp.shared.exceptions import MCPError

from _mcp_client import ERAS, Person, connect

PUT = {"kind": "preference", "key": "drink", "value": "tea"}

Answer = Callable[[str], Awaitable[str]]


def memkit(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, text=True, timeout=120)


def stored(workspace: Path, user: str = "alice", key: str = "drink") -> Any:
    """The record as another process reads it (None when there is none)."""
    got = memkit("get", "--workspace", str(workspace), "--user", user, "--key", key)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def history(workspace: Path, user: str = "alice", key: str = "drink") -> list[dict[str, Any]]:
    got = memkit("history", "--workspace", str(workspace), "--user", user, "--key", key)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def pending(workspace: Path, user: str = "alice") -> list[dict[str, Any]]:
    """The user's pending proposals, as `memkit proposals` lists them."""
    got = memkit("proposals", "--workspace", str(workspace), "--user", user)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def cli_put(workspace: Path, value: str, user: str = "alice", key: str = "drink") -> None:
    done = memkit("put", "--workspace", str(workspace), "--user", user, "--key", key, "--value", value, "--confirm")
    assert done.returncode == 0, done.stderr


def run(fn: Callable[[], Awaitable[None]]) -> None:
    anyio.run(fn)


# -- the four tools ----------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_lists_four_tools_with_closed_schemas_and_honest_annotations(tmp_path, era):
    async def body() -> None:
        async with connect(tmp_path, era, None) as conn:
            assert conn.session.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
            tools = {t.name: t for t in (await conn.session.list_tools()).tools}
            assert sorted(tools) == ["memory_delete", "memory_get", "memory_put", "memory_search"]
            for tool in tools.values():
                schema = tool.input_schema
                assert schema["additionalProperties"] is False
                assert not {"user", "user_id", "owner"} & set(schema["properties"])
            assert tools["memory_put"].input_schema["required"] == ["kind", "key", "value"]
            for name in ("memory_get", "memory_search"):
                assert tools[name].annotations.read_only_hint is True
            for name in ("memory_put", "memory_delete"):
                assert tools[name].annotations.read_only_hint is False
                assert tools[name].annotations.destructive_hint is True

    run(body)


@pytest.mark.parametrize("era", ERAS)
def test_an_accepted_write_is_stored_once_and_its_history_names_the_elicitation(tmp_path, era):
    person = Person("accept")
    value = 'tea, "strong"\nno sugar'

    async def body() -> None:
        async with connect(tmp_path, era, person) as conn:
            assert await conn.structured("memory_get", {"kind": "preference", "key": "drink"}) == {"record": None}
            done = await conn.structured("memory_put", {**PUT, "value": value})
            assert done["stored"] is True and done["record"]["value"] == value
            assert done["record"]["revision"] == 1
            again = await conn.structured("memory_put", {**PUT, "value": value})  # nothing new to confirm
            assert again["stored"] is False and again["reason"] == "unchanged"
            got = await conn.structured("memory_get", {"kind": "preference", "key": "drink"})
            assert got["record"]["value"] == value
            found = await conn.structured("memory_search", {"query": "STRONG"})
            assert [r["key"] for r in found["records"]] == ["drink"]

    run(body)
    # Asked once, showing the exact kind, key and value (as JSON text: the quote and line break show).
    assert len(person.asked) == 1
    lines = person.asked[0].splitlines()
    assert "kind: preference" in lines and "key: drink" in lines
    assert f"value: {json.dumps(value)}" in lines and "now: nothing saved" in lines
    assert stored(tmp_path)["value"] == value
    events = history(tmp_path)
    assert [(e["action"], e["session"]) for e in events] == [("create", "mcp")]
    assert events[0]["confirmation"] == done_confirmation(events)


def done_confirmation(events: list[dict[str, Any]]) -> str:
    """The question's proposal, approved through MCP elicitation: `proposal#N approved via mcp-elicitation@<start>`."""
    confirmation = events[-1]["confirmation"]
    assert re.fullmatch(r"proposal#\d+ approved via mcp-elicitation@\S+", confirmation), confirmation
    return confirmation


def test_an_accept_without_content_is_an_accept(tmp_path):
    person = Person("accept, no content")

    async def body() -> None:
        async with connect(tmp_path, "legacy", person) as conn:
            assert (await conn.structured("memory_put", PUT))["stored"] is True

    run(body)
    assert stored(tmp_path)["value"] == "tea" and len(person.asked) == 1


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_a_declined_or_cancelled_write_stores_nothing_and_says_so(tmp_path, era, action):
    person = Person(action)

    async def body() -> None:
        async with connect(tmp_path, era, person) as conn:
            result = await conn.structured("memory_put", PUT)
            assert result["stored"] is False and result["reason"] == action
            assert result["message"].startswith("Nothing was stored: the person")
            assert await conn.structured("memory_get", {"kind": "preference", "key": "drink"}) == {"record": None}
            # A "no" leaves nothing; a question nobody answered waits as a proposal of alice.
            assert ("proposal" in result) == (action == "cancel")

    run(body)
    assert len(person.asked) == 1
    assert stored(tmp_path) is None and history(tmp_path) == []
    waiting = pending(tmp_path)
    assert [(p["action"], p["key"], p["value"]) for p in waiting] == (
        [("put", "drink", "tea")] if action == "cancel" else [])


@pytest.mark.parametrize(("era", "client"), [("legacy", "no elicitation"), ("modern", "no elicitation"),
                                             ("legacy", "fails to ask")])
def test_a_client_that_cannot_ask_stores_nothing(tmp_path, era, client):
    cli_put(tmp_path, "coffee")
    person = Person("error") if client == "fails to ask" else None

    async def body() -> None:
        async with connect(tmp_path, era, person) as conn:
            result = await conn.structured("memory_put", PUT)
            assert result["stored"] is False and result["reason"] == "cannot_ask"
            says = "no window to show it in" if person else "cannot ask the person"
            assert result["message"].startswith("Nothing was stored: ") and says in result["message"]
            deleted = await conn.structured("memory_delete", {"kind": "preference", "key": "drink"})
            assert deleted == {**deleted, "deleted": False, "reason": "cannot_ask"}
            # reading needs no one's confirmation
            got = await conn.structured("memory_get", {"kind": "preference", "key": "drink"})
            assert got["record"]["value"] == "coffee"

    run(body)
    assert stored(tmp_path)["value"] == "coffee" and len(history(tmp_path)) == 1
    # Both unasked changes wait as alice's proposals; the person approves the save later with memkit.
    waiting = pending(tmp_path)
    assert [(p["action"], p["value"]) for p in waiting] == [("put", "tea"), ("delete", None)]
    approved = memkit("approve", str(waiting[0]["id"]), "--workspace", str(tmp_path), "--user", "alice", "--confirm")
    assert approved.returncode == 0, approved.stderr
    assert stored(tmp_path)["value"] == "tea"
    assert f"proposal#{waiting[0]['id']}" in history(tmp_path)[-1]["confirmation"]
    assert pending(tmp_path, user="bob") == []


@pytest.mark.parametrize("era", ERAS)
def test_a_delete_asks_first_and_a_declined_one_keeps_the_record(tmp_path, era):
    cli_put(tmp_path, "coffee")
    no, yes = Person("decline"), Person("accept")

    async def body() -> None:
        async with connect(tmp_path, era, no) as conn:
            kept = await conn.structured("memory_delete", {"kind": "preference", "key": "drink"})
            assert kept["deleted"] is False and kept["reason"] == "decline"
        async with connect(tmp_path, era, yes) as conn:
            gone = await conn.structured("memory_delete", {"kind": "preference", "key": "drink"})
            assert gone["deleted"] is True
            absent = await conn.structured("memory_delete", {"kind": "preference", "key": "drink"})
            assert absent["deleted"] is False and absent["reason"] == "absent"

    run(body)
    for person in (no, yes):
        assert person.asked == [person.asked[0]] and 'value: "coffee" (revision 1)' in person.asked[0]
    assert stored(tmp_path) is None
    assert [e["action"] for e in history(tmp_path)] == ["create", "delete"]
    done_confirmation(history(tmp_path))


# -- whose memory ------------------------------------------------------------------------------------


def test_another_users_data_never_appears_whatever_the_arguments(tmp_path):
    cli_put(tmp_path, "bob's secret whisky", user="bob")
    cli_put(tmp_path, "bob's secret diary", user="bob", key="diary")
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, "legacy", person) as conn:
            assert await conn.structured("memory_get", {"kind": "preference", "key": "drink"}) == {"record": None}
            for query in ("", "bob", "secret"):
                assert await conn.structured("memory_search", {"query": query, "limit": 50}) == {"records": []}
            for arguments in ({"kind": "preference", "key": "drink", "user": "bob"},
                              {"kind": "preference", "key": "drink", "user_id": "bob"}):
                refused = await conn.call("memory_get", arguments)
                assert refused.is_error and "Extra inputs are not permitted" in refused.content[0].text
            refused = await conn.call("memory_put", {**PUT, "user": "bob"})
            assert refused.is_error
            done = await conn.structured("memory_put", PUT)
            assert done["stored"] is True

    run(body)
    assert len(person.asked) == 1 and "user 'alice'" in person.asked[0]
    assert stored(tmp_path, user="bob")["value"] == "bob's secret whisky"
    assert stored(tmp_path, user="alice")["value"] == "tea"


# -- an answer counts once, for one value, for the state it was given in ---------------------------


def test_an_answer_cannot_be_replayed_for_another_value(tmp_path):
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, "modern", person) as conn:
            first = await conn.session.call_tool("memory_put", PUT, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key, request), = first.input_requests.items()
            accepted = {key: await person.answer(request.params)}
            other = {**PUT, "value": "gin"}
            # The SDK seals the request state to the request it answered (its arguments included),
            # and memkit's question names the value: refused, or asked again, never stored.
            try:
                replayed = await conn.session.call_tool("memory_put", other, input_responses=accepted,
                                                        request_state=first.request_state, allow_input_required=True)
            except MCPError as exc:
                assert "requestState" in str(exc)
            else:
                assert isinstance(replayed, types.InputRequiredResult)
                (_, again), = replayed.input_requests.items()
                assert 'value: "gin"' in again.params.message
            assert await conn.structured("memory_get", {"kind": "preference", "key": "drink"}) == {"record": None}

    run(body)
    assert stored(tmp_path) is None and history(tmp_path) == []


def test_an_answer_does_not_outlive_a_change_of_the_record(tmp_path):
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, "modern", person) as conn:
            first = await conn.session.call_tool("memory_put", PUT, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult)
            (key, request), = first.input_requests.items()
            accepted = {key: await person.answer(request.params)}
            await anyio.to_thread.run_sync(cli_put, tmp_path, "coffee")  # while the person was asked
            retried = await conn.session.call_tool("memory_put", PUT, input_responses=accepted,
                                                   request_state=first.request_state, allow_input_required=True)
            assert isinstance(retried, types.InputRequiredResult)  # asked again, about the new state
            (_, again), = retried.input_requests.items()
            assert 'now: "coffee" (revision 1)' in again.params.message

    run(body)
    assert stored(tmp_path)["value"] == "coffee" and len(history(tmp_path)) == 1


def test_a_completed_round_replayed_later_stores_nothing(tmp_path):
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, "modern", person) as conn:
            first = await conn.session.call_tool("memory_put", PUT, allow_input_required=True)
            (key, request), = first.input_requests.items()
            accepted = {key: await person.answer(request.params)}
            done = await conn.session.call_tool("memory_put", PUT, input_responses=accepted,
                                                request_state=first.request_state, allow_input_required=True)
            assert done.structured_content["stored"] is True
            await anyio.to_thread.run_sync(cli_put, tmp_path, "coffee")
            replay = await conn.session.call_tool("memory_put", PUT, input_responses=accepted,
                                                  request_state=first.request_state, allow_input_required=True)
            assert isinstance(replay, types.InputRequiredResult)  # the confirmation was used: ask again

    run(body)
    assert stored(tmp_path)["value"] == "coffee"
    assert [e["new_value"] for e in history(tmp_path)] == ["tea", "coffee"]


def test_a_record_changed_while_the_person_was_asked_is_not_overwritten(tmp_path):
    async def someone_else_writes() -> None:
        await anyio.to_thread.run_sync(cli_put, tmp_path, "coffee")

    person = Person("accept", before=someone_else_writes)

    async def body() -> None:
        async with connect(tmp_path, "legacy", person) as conn:
            result = await conn.structured("memory_put", PUT)
            assert result["stored"] is False and result["reason"] == "changed"
            assert 'it is now "coffee" (revision 1)' in result["message"]

    run(body)
    assert stored(tmp_path)["value"] == "coffee"
    assert [e["confirmation"].split("@")[0] for e in history(tmp_path)] == ["cli"]


@pytest.mark.parametrize("tool", ["memory_delete", "memory_put"])
def test_an_answer_never_reaches_a_record_rewritten_at_the_same_revision(tmp_path, tool):
    """The person is asked about "coffee" (revision 1); meanwhile the user is forgotten and "lisbon"
    is saved, again at revision 1. Their answer was about a value that is gone: nothing changes."""
    cli_put(tmp_path, "coffee")

    async def forget_and_rewrite() -> None:
        def rewrite() -> None:
            gone = memkit("forget-user", "--workspace", str(tmp_path), "--user", "alice", "--confirm")
            assert gone.returncode == 0, gone.stderr
            cli_put(tmp_path, "lisbon")
        await anyio.to_thread.run_sync(rewrite)

    person = Person("accept", before=forget_and_rewrite)

    async def body() -> None:
        async with connect(tmp_path, "legacy", person) as conn:
            arguments = {"kind": "preference", "key": "drink", **({"value": "tea"} if tool == "memory_put" else {})}
            result = await conn.structured(tool, arguments)
            assert result["reason"] == "changed", result

    run(body)
    assert stored(tmp_path)["value"] == "lisbon"
    assert [e["confirmation"].split("@")[0] for e in history(tmp_path)] == ["cli"]


# -- restarts and errors --------------------------------------------------------------------------------


def test_memory_survives_a_restart_of_the_server(tmp_path):
    async def body() -> None:
        async with connect(tmp_path, "legacy", Person("accept")) as conn:
            assert (await conn.structured("memory_put", PUT))["stored"] is True
        async with connect(tmp_path, "modern", None) as conn:  # a new server process
            got = await conn.structured("memory_get", {"kind": "preference", "key": "drink"})
            assert got["record"]["value"] == "tea"

    run(body)
    assert stored(tmp_path)["value"] == "tea"  # and for a third process, the plain command


BAD_CALLS = [
    ("memory_put", {"kind": "preference", "key": "Drink", "value": "tea"}, "key 'Drink' is not allowed"),
    ("memory_put", {"kind": "preference", "key": "drink", "value": "x" * 600}, "at most 512"),
    ("memory_put", {"kind": "secret", "key": "drink", "value": "tea"}, "kind 'secret' is unknown"),
    ("memory_put", {"kind": "preference", "key": "drink", "value": "   "}, "blank"),
    ("memory_put", {"kind": "preference", "key": "drink", "value": 7}, "value"),
    ("memory_delete", {"kind": "preference", "key": "a" * 70}, "at most 64"),
    ("memory_search", {"query": "tea", "limit": 0}, "limit is 0"),
    ("memory_search", {"query": "tea", "limit": "many"}, "limit"),
    ("memory_search", {"query": "x" * 300}, "at most 256"),
    ("memory_get", {"kind": "preference"}, "key"),
    ("memory_forget", {}, "Unknown tool"),
]


@pytest.mark.parametrize("era", ERAS)
def test_bad_arguments_are_tool_errors_and_the_server_keeps_serving(tmp_path, era):
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, era, person) as conn:
            for name, arguments, says in BAD_CALLS:
                result = await conn.call(name, arguments)
                assert result.is_error and says in result.content[0].text, (name, arguments, result.content)
            assert (await conn.structured("memory_put", PUT))["stored"] is True

    run(body)
    assert len(person.asked) == 1  # nobody is asked to confirm what would be refused anyway


def test_a_locked_database_is_a_tool_error_and_nothing_is_stored(tmp_path):
    cli_put(tmp_path, "coffee")
    holder = sqlite3.connect(tmp_path / "state" / "memory.sqlite3", isolation_level=None)

    async def body() -> None:
        async with connect(tmp_path, "legacy", Person("accept")) as conn:
            holder.execute("BEGIN IMMEDIATE")  # another writer holds the lock past the busy timeout
            try:
                result = await conn.call("memory_put", PUT)
            finally:
                holder.execute("ROLLBACK")
            assert result.is_error and "locked" in result.content[0].text
            assert (await conn.structured("memory_put", PUT))["stored"] is True  # still serving

    try:
        run(body)
    finally:
        holder.close()
    assert [e["new_value"] for e in history(tmp_path)] == ["coffee", "tea"]


@pytest.mark.parametrize(("argv", "says"), [
    (["mcp", "--user", "al\u202eice"], "user 'al\\u202eice'"),
    (["mcp", "--user", "alice", "--session", ""], "session is empty"),
])
def test_the_command_refuses_bad_arguments_before_serving(tmp_path, argv, says):
    done = subprocess.run([sys.executable, "-m", "memkit", *argv, "--workspace", str(tmp_path / "ws")],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and says in done.stderr and done.stdout == ""
    assert not (tmp_path / "ws").exists()


def test_the_command_refuses_a_file_that_is_not_a_memkit_database(tmp_path):
    bogus = tmp_path / "notes.txt"
    bogus.write_text("my notes\n")
    done = subprocess.run([sys.executable, "-m", "memkit", "mcp", "--db", str(bogus), "--user", "alice"],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and done.stderr.startswith("error:") and done.stdout == ""
    assert bogus.read_text() == "my notes\n"


@pytest.mark.postgres
def test_a_postgresql_store_serves_and_survives_a_restart(tmp_path, pg_url):
    user = f"mcp-{uuid.uuid4().hex[:12]}"  # a server at MEMKIT_PG_URL keeps earlier runs' users

    async def body() -> None:
        async with connect(tmp_path, "modern", Person("accept"), db=pg_url, user=user) as conn:
            assert (await conn.structured("memory_put", PUT))["stored"] is True
        async with connect(tmp_path, "legacy", Person("decline"), db=pg_url, user=user) as conn:
            got = await conn.structured("memory_get", {"kind": "preference", "key": "drink"})
            assert got["record"]["value"] == "tea"
            kept = await conn.structured("memory_delete", {"kind": "preference", "key": "drink"})
            assert kept["deleted"] is False

    run(body)


# -- an answer is spent when used, and never outlives a forget ------------------------------------------


def where_args(workspace: Path, db: str | None) -> list[str]:
    return ["--db", db] if db else ["--workspace", str(workspace)]


def forget(workspace: Path, user: str = "alice", db: str | None = None) -> None:
    gone = memkit("forget-user", *where_args(workspace, db), "--user", user, "--confirm")
    assert gone.returncode == 0, gone.stderr


def record_of(workspace: Path, user: str, db: str | None) -> Any:
    got = memkit("get", *where_args(workspace, db), "--user", user, "--key", "drink")
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def backend_url(request: pytest.FixtureRequest, store_kind: str) -> str | None:
    return request.getfixturevalue("pg_url") if store_kind == "postgres" else None


STORE_KINDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.mark.parametrize("store_kind", STORE_KINDS)
def test_an_accepted_round_replayed_after_forget_user_stores_nothing(tmp_path, request, store_kind):
    """The attack of issue 33: alice accepts `drink = tea`; `memkit forget-user alice` runs while the
    server stays up; the client replays the same round (request state + accept). Forgetting made the
    key "nothing saved" again, but the question it answered was spent: nothing is stored."""
    db = backend_url(request, store_kind)
    user = f"alice-{uuid.uuid4().hex[:8]}" if db else "alice"
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, "modern", person, user=user, db=db) as conn:
            first = await conn.session.call_tool("memory_put", PUT, allow_input_required=True)
            (key, request_), = first.input_requests.items()
            accepted = {key: await person.answer(request_.params)}
            done = await conn.session.call_tool("memory_put", PUT, input_responses=accepted,
                                                request_state=first.request_state, allow_input_required=True)
            assert done.structured_content["stored"] is True
            await anyio.to_thread.run_sync(lambda: forget(tmp_path, user, db))
            for _ in range(2):  # replayed, and replayed again
                replay = await conn.session.call_tool("memory_put", PUT, input_responses=accepted,
                                                      request_state=first.request_state, allow_input_required=True)
                assert isinstance(replay, types.InputRequiredResult), replay  # a new question, not a save
                (_, again), = replay.input_requests.items()
                assert again.params.message != request_.params.message
            got = await conn.structured("memory_get", {"kind": "preference", "key": "drink"})
            assert got == {"record": None}

    run(body)
    assert record_of(tmp_path, user, db) is None


@pytest.mark.parametrize("store_kind", STORE_KINDS)
@pytest.mark.parametrize("tool", ["memory_put", "memory_delete"])
def test_an_answer_given_after_the_user_was_forgotten_changes_nothing(tmp_path, request, store_kind, tool):
    """Up to 2025-11-25 the question is a request in the middle of the call: the person accepts after
    `forget-user` ran meanwhile. The key looks as it did ("nothing saved" for a save); the question
    was forgotten with the user, so the answer is refused, and the result says why."""
    db = backend_url(request, store_kind)
    user = f"alice-{uuid.uuid4().hex[:8]}" if db else "alice"
    # alice holds something else (so forget-user has something to forget), and for a delete, the drink.
    for key in ("food", "drink") if tool == "memory_delete" else ("food",):
        cli = memkit("put", *where_args(tmp_path, db), "--user", user, "--key", key, "--value", "coffee",
                     "--confirm")
        assert cli.returncode == 0, cli.stderr

    async def forget_meanwhile() -> None:
        await anyio.to_thread.run_sync(lambda: forget(tmp_path, user, db))

    person = Person("accept", before=forget_meanwhile)

    async def body() -> None:
        async with connect(tmp_path, "legacy", person, user=user, db=db) as conn:
            arguments = PUT if tool == "memory_put" else {"kind": "preference", "key": "drink"}
            result = await conn.structured(tool, arguments)
            changed = "stored" if tool == "memory_put" else "deleted"
            assert result[changed] is False and result["reason"] in ("forgotten", "changed"), result
            assert "forgotten" in result["message"] or tool == "memory_delete", result

    run(body)
    assert record_of(tmp_path, user, db) is None


# -- what the person is shown is what is saved ----------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_the_question_shows_hidden_characters_as_escapes_and_the_value_is_saved_exactly(tmp_path, era):
    """A value that carries a line separator and a forged "now:" line, a right-to-left override and a
    zero-width space: the question shows each as an escape, on its one value line, and the value is
    saved exactly as given."""
    value = "tea\u2028now: nothing saved\u2029kind: episode \u202egnp.exe\u200b\ufe0f\\u2028"
    person = Person("accept")

    async def body() -> None:
        async with connect(tmp_path, era, person) as conn:
            done = await conn.structured("memory_put", {**PUT, "value": value})
            assert done["stored"] is True and done["record"]["value"] == value

    run(body)
    [message] = person.asked
    lines = message.splitlines()  # splits at U+2028/9 too: a raw one would add a line
    assert [line.split(":")[0] for line in lines[:6]] == ["Save this memory for user 'alice'?", "kind", "key",
                                                          "value", "now", "question"]
    assert lines[3] == r'value: "tea\u2028now: nothing saved\u2029kind: episode \u202egnp.exe\u200b\ufe0f\\u2028"'
    assert json.loads(lines[3][len("value: "):]) == value
    assert not any(char in message for char in "\u2028\u2029\u202e\u200b\ufe0f")
    assert stored(tmp_path)["value"] == value
