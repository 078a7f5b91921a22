"""`memkit mcp` as a host starts it: from the JSON `--print-config` prints, in a working directory of `/`.

A GUI host (Claude Desktop, VS Code, Cursor) starts a stdio server with its own working directory
and PATH, not the shell's. Each test runs the real command: the printed entry is launched as a host
does (`cwd="/"`, a PATH without the kit's venv) and driven with the MCP SDK's own stdio client; the
one line the server writes to stderr at start is read from the file its stderr went to.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp.server.mcpserver", reason="the `mcp` extra is not installed: pip install -e '.[mcp]'")

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memkit.store import SCHEMA_VERSION

SCRIPT = Path(sys.executable).with_name("memkit.exe" if os.name == "nt" else "memkit")
"""This install's console script, beside the Python that runs the tests (a venv's bin/)."""

HOST_PATH = {"PATH": os.pathsep.join(["/usr/bin", "/bin"])}
"""A GUI host's PATH: the kit's venv is not on it, so a bare `memkit` would not be found."""


def memkit(*argv: str, cwd: Path | str | None = None, env: dict[str, str] | None = None,
           via_script: bool = True) -> subprocess.CompletedProcess[str]:
    """The real command: the console script (as a person types it), or `python -m memkit`."""
    command = [str(SCRIPT)] if via_script else [sys.executable, "-m", "memkit"]
    return subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120, cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL)


def entry(printed: dict[str, Any], host: str) -> dict[str, Any]:
    """The one server entry in a host's config, checked to have that host's documented shape."""
    top = "servers" if host == "vscode" else "mcpServers"
    assert list(printed) == [top]
    [(name, server)] = printed[top].items()
    assert name == "memkit"
    if host == "vscode":  # VS Code names the transport; the other two take a command as stdio
        assert server.pop("type") == "stdio"
    assert set(server) == {"command", "args"}
    return server


async def get_drink(server: dict[str, Any], errlog: Path) -> Any:
    """Start the server as a host does (working directory `/`, the host's PATH) and read one memory."""
    params = StdioServerParameters(command=server["command"], args=server["args"], cwd="/", env=HOST_PATH)
    with errlog.open("w") as log:
        async with (stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session):
            await session.initialize()
            result = await session.call_tool("memory_get", {"kind": "preference", "key": "drink"})
    assert not result.is_error, result.content
    return result.structured_content


needs_script = pytest.mark.skipif(not SCRIPT.is_file(), reason=f"no console script at {SCRIPT} (pip install -e .)")


@needs_script
@pytest.mark.parametrize("host", ["claude-desktop", "vscode", "cursor"])
def test_the_printed_config_starts_the_server_from_root_and_serves_the_memory(tmp_path, host):
    workspace = tmp_path / "ws"
    put = memkit("put", "--workspace", str(workspace), "--user", "alice", "--key", "drink", "--value", "tea",
                 "--confirm")
    assert put.returncode == 0, put.stderr
    elsewhere = tmp_path / "a-shell-somewhere"
    elsewhere.mkdir()
    printed = memkit("mcp", "--print-config", host, "--workspace", str(workspace), "--user", "alice", cwd=elsewhere)
    assert printed.returncode == 0, printed.stderr
    server = entry(json.loads(printed.stdout), host)
    assert server == {"command": str(SCRIPT), "args": ["mcp", "--workspace", str(workspace), "--user", "alice"]}

    errlog = tmp_path / "server-stderr.log"
    got = anyio.run(get_drink, server, errlog)
    assert got["record"]["value"] == "tea"  # the memory written before, from the same database
    db = workspace / "state" / "memory.sqlite3"
    assert errlog.read_text().splitlines() == [
        f'memkit mcp: serving user "alice" from "{db}" (schema version {SCHEMA_VERSION}); each write asks the '
        "person, or waits as a proposal when the client cannot ask"]
    assert sorted(p.name for p in elsewhere.iterdir()) == []  # printing made nothing


@needs_script
def test_python_dash_m_prints_the_same_absolute_command(tmp_path):
    printed = memkit("mcp", "--print-config", "--workspace", str(tmp_path), "--user", "alice", via_script=False)
    assert printed.returncode == 0, printed.stderr
    assert entry(json.loads(printed.stdout), "claude-desktop")["command"] == str(SCRIPT)
    assert "claude_desktop_config.json" in printed.stderr  # where to put it


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MEMKIT_DB", "DATABASE_URL")}
    return {**env, **extra}


@pytest.mark.parametrize("print_config", [False, True])
@pytest.mark.parametrize(("argv", "env", "says"), [
    (["--workspace", "memkit-ws"], {}, "--workspace memkit-ws is a relative path"),
    (["--db", "memory.sqlite3"], {}, "--db memory.sqlite3 is a relative path"),
    ([], {"MEMKIT_DB": "memory.sqlite3"}, "MEMKIT_DB=memory.sqlite3 is a relative path"),
    ([], {}, "memkit mcp needs --workspace DIR or --db PATH as an absolute path"),
])
def test_a_relative_store_is_refused_with_its_absolute_form_and_nothing_is_made(tmp_path, argv, env, says,
                                                                                 print_config):
    flags = ["--print-config"] if print_config else []
    done = memkit("mcp", *argv, "--user", "alice", *flags, cwd=tmp_path, env=clean_env(**env), via_script=False)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and says in line
    name = (argv[1:] or [env.get("MEMKIT_DB", "memkit-workspace")])[0]
    flag = "--workspace" if argv[:1] == ["--workspace"] or not (argv or env) else "--db"
    assert line.endswith(f"{flag} {tmp_path / name}")  # the absolute form to give instead
    assert list(tmp_path.iterdir()) == []


@pytest.mark.postgres
def test_the_start_line_names_a_postgresql_database_with_its_password_masked(tmp_path, pg_url):
    import psycopg

    secret, user = f"s3cret-{uuid.uuid4().hex[:8]}", f"mcp-{uuid.uuid4().hex[:12]}"
    conninfo = psycopg.conninfo.make_conninfo(pg_url, password=secret)  # a local server ignores it (trust)
    printed = memkit("mcp", "--print-config", "--db", conninfo, "--user", user)
    assert printed.returncode == 0, printed.stderr
    server = entry(json.loads(printed.stdout), "claude-desktop")
    assert server["args"] == ["mcp", "--db", conninfo, "--user", user]  # the host needs it as given

    errlog = tmp_path / "server-stderr.log"
    assert anyio.run(get_drink, server, errlog) == {"record": None}
    [line] = errlog.read_text().splitlines()
    assert line.startswith(f'memkit mcp: serving user "{user}" from "') and "password=***" in line
    assert secret not in line and re.search(r"\(schema version \d+\)", line)
