"""`memkit mcp`: serve one user's memory to an MCP host over stdin/stdout (the `mcp` extra).

Standard output carries the protocol, so this command prints no JSON report: a refusal before the
server starts (bad arguments, a relative path, a database that cannot be used, the extra not
installed) is `error: ...` on stderr with exit code 2, like every other command's. Once the store
is open, one line on stderr names the user, the database and its schema version: a host shows its
servers' stderr in its MCP log. `--print-config HOST` prints the JSON a host's config file needs to
start this server, with absolute paths, and starts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from ..store import Store
from ..store.targets import masked
from .options import CliError, database_url, db_path, store_for

HOSTS: dict[str, tuple[str, str]] = {
    # Each host's documented format for a local (stdio) server, checked December 2026:
    # Claude Desktop: https://modelcontextprotocol.io/quickstart/user ("mcpServers": command, args);
    # VS Code: https://code.visualstudio.com/docs/agents/reference/mcp-configuration ("servers": type
    # "stdio", command, args); Cursor: https://cursor.com/docs/mcp ("mcpServers": command, args).
    "claude-desktop": ("mcpServers", "Claude Desktop's claude_desktop_config.json (Settings, Developer, Edit Config)"),
    "vscode": ("servers", "VS Code's .vscode/mcp.json in a workspace, or your profile's mcp.json "
                          "(MCP: Open User Configuration)"),
    "cursor": ("mcpServers", "Cursor's ~/.cursor/mcp.json, or .cursor/mcp.json in a project"),
}
SERVER_NAME = "memkit"


def add_command(command: Any) -> None:
    """Add `memkit mcp` to the parser (`command` makes a subcommand with --db and --workspace)."""
    sub = command("mcp", cmd_mcp, "serve one user's memory to an MCP host over stdio; writes ask the person "
                  "(the mcp extra)")
    sub.add_argument("--user", required=True, help="whose memory (chosen by you, not by the MCP client)")
    sub.add_argument("--session", default="mcp", help="the session recorded with a write (default: mcp)")
    sub.add_argument("--print-config", nargs="?", const="claude-desktop", choices=list(HOSTS), metavar="HOST",
                     help="print the JSON entry that starts this server from HOST's config file, with this "
                          "install's absolute memkit path, and exit; HOST is claude-desktop (default), vscode "
                          "or cursor")


def cmd_mcp(args: argparse.Namespace) -> None:
    where = _absolute_store_args(args)
    if args.print_config:
        print(json.dumps(host_config(args.print_config, [*where, "--user", args.user, *_session(args)]),
                         indent=2, ensure_ascii=False))
        print(f"note: put this in {HOSTS[args.print_config][1]}", file=sys.stderr)
        return
    try:
        from ..integrations.mcp_server import serve_stdio
    except ImportError as exc:  # the message names the extra to install
        raise CliError(str(exc)) from None
    with store_for(args) as store:
        print(start_line(store, args.user, database_url(args)), file=sys.stderr, flush=True)
        serve_stdio(store, args.user, session=args.session)


def start_line(store: Store, user: str, url: str | None) -> str:
    """The one line the server writes to stderr at start (a host's MCP log shows it): whose memory, which
    database (a URL with its password masked) and its schema version. JSON quoting keeps it one line
    whatever the user id or path holds."""
    where = masked(url) if url else store.location
    version = store.health()["schema_version"]
    return (f"memkit mcp: serving user {json.dumps(user, ensure_ascii=False)} from "
            f"{json.dumps(where, ensure_ascii=False)} (schema version {version}); each write asks the person, "
            "or waits as a proposal when the client cannot ask")


def host_config(host: str, args: list[str]) -> dict[str, Any]:
    """The entry HOST's config file takes for a server started as `memkit ARGS` by this install."""
    command, *prefix = memkit_command()
    entry: dict[str, Any] = {"command": command, "args": [*prefix, "mcp", *args]}
    if host == "vscode":
        entry = {"type": "stdio", **entry}
    return {HOSTS[host][0]: {SERVER_NAME: entry}}


def memkit_command() -> list[str]:
    """An absolute command that starts this install's `memkit`, whatever the PATH of whoever runs it.

    The console script being run, else the one installed beside this Python (a venv's bin/, also
    when it was never activated), else this Python with `-m memkit`. Not `shutil.which`: a GUI
    host's PATH differs from this shell's, and the first `memkit` on it may be another install.
    """
    running = Path(sys.argv[0])
    if running.stem == "memkit" and running.is_file():
        return [os.path.abspath(running)]  # abspath, not resolve: a symlinked script stays the one run
    python = Path(os.path.abspath(sys.executable))  # a venv's python is a symlink: resolving leaves the venv
    beside = python.with_name("memkit" + (".exe" if os.name == "nt" else ""))
    if beside.is_file():
        return [str(beside)]
    return [str(python), "-m", "memkit"]


def _session(args: argparse.Namespace) -> list[str]:
    return [] if args.session == "mcp" else ["--session", args.session]


def _absolute_store_args(args: argparse.Namespace) -> list[str]:
    """The store's options as a host must pass them: a PostgreSQL URL as given, a path absolute.

    Raises:
        CliError: a relative path (a host starts the server in a working directory of its own:
            started from /, `--workspace ws` would make /ws), naming the absolute form to give.
    """
    url = database_url(args)
    if url is not None:
        return ["--db", args.db or url]
    db_path(args)  # refuses --db with --workspace, as serving would
    for flag, value in (("--db", args.db), ("--workspace", args.workspace),
                        ("MEMKIT_DB", None if args.workspace else os.environ.get("MEMKIT_DB"))):
        if value:
            if not Path(value).is_absolute():
                raise _relative(flag, value)
            return ["--db" if flag == "MEMKIT_DB" else flag, value]
    raise CliError("memkit mcp needs --workspace DIR or --db PATH as an absolute path: an MCP host starts it in a "
                   "working directory of its own; e.g. --workspace "
                   f"{shlex.quote(os.path.abspath('memkit-workspace'))}")


def _relative(flag: str, value: str) -> CliError:
    absolute = os.path.abspath(os.path.expanduser(value))
    given = f"{flag}={value}" if flag == "MEMKIT_DB" else f"{flag} {value}"
    return CliError(f"{given} is a relative path, and an MCP host starts memkit mcp in a working directory of "
                    f"its own (started from /, it would use {os.path.join('/', value)}); give the absolute path: "
                    f"{'--db' if flag == 'MEMKIT_DB' else flag} {shlex.quote(absolute)}")
