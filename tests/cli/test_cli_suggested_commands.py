"""Commands memkit suggests to a person run as suggested in a real shell, whatever the user id.

Ids may be any visible text (`auth0|123`, `alice@example.com`, `o'brien`); a suggested command that
named one unquoted ran `memkit approve 3 --user auth0` piped into a program called `123`. Each
suggestion is pasted into bash as it is (with `--workspace`/`--db` added after it) and must
approve the very proposal it names, for the user it names.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from _cli_helpers import memkit

USERS = ["auth0|123", "o'brien; echo run", "thread $HOME `id`"]


def shell(suggested: str, *where: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`suggested` pasted into bash, with this interpreter's memkit and the store's place added."""
    assert suggested.startswith("memkit ")
    line = f"{shlex.quote(sys.executable)} -m {suggested} {shlex.join(where)}"
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.mark.parametrize("user", USERS)
def test_chats_approve_with_runs_in_a_shell_for_any_user_id(tmp_path, user):
    db = tmp_path / "memory.sqlite3"
    done = memkit("chat", "--db", str(db), "--window", "process", "--user", user, "--session", "s1",
                  "--message", "Remember my city is Porto", stdin="")
    assert done.returncode == 0, done.stderr
    [waiting] = json.loads(done.stdout)["proposals_waiting"]
    approved = shell(waiting["approve_with"], "--db", str(db), cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    got = memkit("get", "--db", str(db), "--user", user, "--key", "city")
    assert json.loads(got.stdout)["value"] == "Porto"


@pytest.mark.parametrize("user", USERS[:2])
def test_the_mcp_servers_approve_suggestion_runs_in_a_shell_for_any_user_id(tmp_path: Path, user):
    pytest.importorskip("mcp.server.mcpserver", reason="the `mcp` extra is not installed: pip install -e '.[mcp]'")
    import anyio
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "memkit", "mcp", "--workspace", str(tmp_path), "--user", user])
    said: list[str] = []

    async def body() -> None:  # a client that cannot ask the person: the change waits as a proposal
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("memory_put", {"kind": "preference", "key": "drink", "value": "tea"})
            said.append(result.structured_content["message"])

    anyio.run(body)
    suggested = re.search(r"\((memkit approve \d+ --user .+ --confirm)\); tell them", said[0])
    assert suggested, said[0]
    approved = shell(suggested.group(1), "--workspace", str(tmp_path), cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    got = memkit("get", "--workspace", str(tmp_path), "--user", user, "--key", "drink")
    assert json.loads(got.stdout)["value"] == "tea"
