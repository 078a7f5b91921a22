"""The surfaces added last round, on a PostgreSQL store: the MCP server, MemkitSession, proposals.

Their own tests run them on SQLite; here the same behaviour is asked of the session's PostgreSQL
server (tests/conftest.py's `pg_url`): `memkit mcp --db postgresql://...` as a real process driven
by the MCP SDK's own client in both protocol eras, with what it stored read back by the `memkit`
command; `MemkitSession` used from several processes at once (adding and popping one session);
proposals proposed, rejected, expired, and approved by several processes racing for the same one.
Every test uses users of its own: a server at MEMKIT_PG_URL keeps earlier runs' data.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import pytest

from memkit.errors import ProposalError
from memkit.limits import Limits
from memkit.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def fresh(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:10]}"


def memkit(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, text=True, timeout=120)


def cli_json(*argv: str) -> Any:
    done = memkit(*argv)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def start_together(script: str, argument_lists: list[list[str]]) -> list[list[str]]:
    """Run `script` once per argument list, all released at one moment; the lines each printed."""
    processes = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *arguments],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for arguments in argument_lists]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n", process.communicate()[1]
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    printed = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-2000:]
        printed.append(out.splitlines())
    return printed


# -- the MCP server ------------------------------------------------------------------------------------

PUT = {"kind": "preference", "key": "drink", "value": "tea"}


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_memkit_mcp_on_postgresql_asks_stores_proposes_and_deletes_as_on_sqlite(pg_url, era):
    pytest.importorskip("mcp.server.mcpserver", reason="the `mcp` extra is not installed")
    import anyio
    from _mcp_client import Person, connect

    user, other = fresh("alice"), fresh("bob")
    where = ["--db", pg_url]

    async def body() -> None:
        async with connect(None, era, Person("accept"), user=user, db=pg_url) as conn:
            done = await conn.structured("memory_put", {**PUT, "value": "green tea"})
            assert done["stored"] is True and done["record"]["revision"] == 1
            found = await conn.structured("memory_search", {"query": "GREEN"})
            assert [record["key"] for record in found["records"]] == ["drink"]
        async with connect(None, era, Person("cancel"), user=user, db=pg_url) as conn:
            waiting = await conn.structured("memory_put", {**PUT, "key": "food", "value": "rice"})
            assert waiting["stored"] is False and waiting["reason"] == "cancel" and "proposal" in waiting
        async with connect(None, era, None, user=other, db=pg_url) as conn:  # a client that cannot ask
            refused = await conn.structured("memory_put", PUT)
            assert refused["stored"] is False and refused["reason"] == "cannot_ask"
            assert await conn.structured("memory_get", {"kind": "preference", "key": "drink"}) == {"record": None}

    anyio.run(body)
    assert cli_json("get", *where, "--user", user, "--key", "drink")["value"] == "green tea"
    events = cli_json("history", *where, "--user", user, "--key", "drink")
    assert [(e["action"], e["session"]) for e in events] == [("create", "mcp")]
    assert "approved via mcp-elicitation" in events[0]["confirmation"]
    # The cancelled question waits as the user's proposal, on PostgreSQL, for memkit approve.
    (proposal,) = cli_json("proposals", *where, "--user", user)
    assert (proposal["action"], proposal["key"], proposal["value"]) == ("put", "food", "rice")
    cli_json("approve", str(proposal["id"]), *where, "--user", user, "--confirm")
    assert cli_json("get", *where, "--user", user, "--key", "food")["value"] == "rice"
    # bob's unasked save waits too, and a rejection leaves nothing stored.
    (unasked,) = cli_json("proposals", *where, "--user", other)
    cli_json("reject", str(unasked["id"]), *where, "--user", other)
    assert cli_json("proposals", *where, "--user", other) == []
    assert cli_json("get", *where, "--user", other, "--key", "drink") is None

    async def delete() -> None:
        async with connect(None, era, Person("accept"), user=user, db=pg_url) as conn:
            gone = await conn.structured("memory_delete", {"kind": "preference", "key": "drink"})
            assert gone["deleted"] is True
            assert await conn.structured("memory_get", {"kind": "preference", "key": "drink"}) == {"record": None}

    anyio.run(delete)
    assert cli_json("get", *where, "--user", user, "--key", "drink") is None
    assert [e["action"] for e in cli_json("history", *where, "--user", user, "--key", "drink")] == ["create", "delete"]


# -- MemkitSession -------------------------------------------------------------------------------------


SESSION_WORKER = """
    import asyncio, json, sys
    from memkit.integrations.openai_agents import MemkitSession
    url, user, session_id, mode, name, count = sys.argv[1:7]
    print("ready", flush=True)
    sys.stdin.readline()

    async def main():
        with MemkitSession(session_id, url, user=user) as session:
            if mode == "add":  # batches of two items, each batch all or nothing
                for n in range(int(count)):
                    await session.add_items([{"role": "user", "content": f"{name}-{n}-q"},
                                             {"role": "assistant", "content": f"{name}-{n}-a"}])
            else:  # pop until the session is empty
                while (item := await session.pop_item()) is not None:
                    print(json.dumps(item), flush=True)

    asyncio.run(main())
"""


def test_memkit_session_on_postgresql_from_several_processes_keeps_and_pops_every_item_once(pg_url):
    pytest.importorskip("agents", reason="the `agents` extra is not installed")
    from memkit.integrations.openai_agents import MemkitSession

    alice, bob, trip = fresh("alice"), fresh("bob"), "trip"
    writers, batches = 4, 15
    start_together(SESSION_WORKER, [[pg_url, alice, trip, "add", f"w{w}", str(batches)] for w in range(writers)]
                   + [[pg_url, bob, trip, "add", "bob", "3"]])  # another user, the same session id

    with MemkitSession(trip, pg_url, user=alice) as session:
        items = asyncio.run(session.get_items())
    texts = [item["content"] for item in items]
    assert sorted(texts) == sorted(f"w{w}-{n}-{half}" for w in range(writers) for n in range(batches)
                                   for half in "qa")
    for index in range(0, len(texts), 2):  # a batch is never split nor interleaved with another
        assert texts[index].endswith("-q") and texts[index + 1] == texts[index][:-1] + "a"
    for w in range(writers):  # each writer's batches in the order it added them
        mine = [text for text in texts if text.startswith(f"w{w}-") and text.endswith("-q")]
        assert mine == [f"w{w}-{n}-q" for n in range(batches)]

    popped = start_together(SESSION_WORKER, [[pg_url, alice, trip, "pop", f"p{p}", "0"] for p in range(3)])
    every = [json.loads(line)["content"] for lines in popped for line in lines]
    assert sorted(every) == sorted(texts)  # each item popped by exactly one process
    for lines in popped:  # and each process popped newest first
        mine = [texts.index(json.loads(line)["content"]) for line in lines]
        assert mine == sorted(mine, reverse=True)

    with MemkitSession(trip, pg_url, user=alice) as session:
        assert asyncio.run(session.get_items()) == []
    with MemkitSession(trip, pg_url, user=bob) as session:
        assert [item["content"] for item in asyncio.run(session.get_items())] == [
            f"bob-{n}-{half}" for n in range(3) for half in "qa"]
        asyncio.run(session.clear_session())
        assert asyncio.run(session.get_items()) == [] and asyncio.run(session.pop_item()) is None


# -- proposals ---------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = _dt.datetime(2026, 7, 1, 12, 0, tzinfo=_dt.UTC)

    def __call__(self) -> _dt.datetime:
        return self.now


def test_proposals_on_postgresql_expire_are_rejected_and_are_stale_after_a_change(pg_url):
    user = fresh("alice")
    clock = Clock()
    limits = Limits(proposal_ttl_seconds=3600)
    with PostgresStore(pg_url, clock=clock, limits=limits) as store:
        late = store.propose_put(user, "chat", "preference", "drink", "tea")
        clock.now += _dt.timedelta(seconds=3601)
        assert store.proposals(user)[0]["expired"] is True
        with pytest.raises(ProposalError, match="expired"):
            store.approve(user, late["id"], origin="cli")
        assert store.get(user, "preference", "drink") is None
        assert store.reject(user, late["id"], origin="cli")["status"] == "rejected"  # an expired one clears

        stale = store.propose_put(user, "chat", "preference", "drink", "coffee")
        store.put(user, "s1", "preference", "drink", "water")  # the record changes after the proposal
        assert store.proposals(user)[0]["stale"] is True
        with pytest.raises(ProposalError):
            store.approve(user, stale["id"], origin="cli")
        assert store.get(user, "preference", "drink")["value"] == "water"

        deleting = store.propose_delete(user, "chat", "preference", "drink")
        assert store.approve(user, deleting["id"], origin="cli")["deleted"] is True
        with pytest.raises(ProposalError):
            store.approve(user, deleting["id"], origin="cli")  # decided: never applied twice
        assert store.get(user, "preference", "drink") is None
        assert store.proposals(user) == [p for p in store.proposals(user) if p["id"] == stale["id"]]


APPROVER = """
    import sys
    from memkit.errors import ProposalError
    from memkit.store.postgres import PostgresStore
    url, user, ids, name = sys.argv[1:5]
    with PostgresStore(url) as store:
        print("ready", flush=True)
        sys.stdin.readline()
        for proposal_id in map(int, ids.split(",")):
            try:
                store.approve(user, proposal_id, origin=name)
                print("approved", proposal_id, flush=True)
            except ProposalError as exc:
                print("refused", proposal_id, exc.reason if hasattr(exc, "reason") else "", flush=True)
"""


def test_racing_approvers_on_postgresql_apply_each_proposal_exactly_once(pg_url):
    user = fresh("alice")
    with PostgresStore(pg_url) as store:
        ids = [store.propose_put(user, "chat", "preference", f"k{n}", f"v{n}")["id"] for n in range(12)]
    every = ",".join(map(str, ids))
    backwards = ",".join(map(str, reversed(ids)))
    printed = start_together(APPROVER, [[pg_url, user, every if a % 2 else backwards, f"approver{a}"]
                                        for a in range(4)])
    approved = [int(line.split()[1]) for lines in printed for line in lines if line.startswith("approved")]
    assert sorted(approved) == sorted(ids)  # each approved by exactly one process
    with PostgresStore(pg_url) as store:
        for n, proposal_id in enumerate(ids):
            history = store.history(user, "preference", f"k{n}")
            assert [e["action"] for e in history] == ["create"]
            assert history[0]["confirmation"].startswith(f"proposal#{proposal_id} approved via approver")
        assert store.proposals(user) == []
        assert all(p["status"] == "approved" for p in store.proposals(user, pending_only=False))
