"""`memkit mcp`: serve one user's memory to an MCP host over stdin/stdout (the `mcp` extra).

Standard output carries the protocol, so this command prints no JSON report: a refusal before the
server starts (bad arguments, a database that cannot be used, the extra not installed) is
`error: ...` on stderr with exit code 2, like every other command's.
"""

from __future__ import annotations

import argparse
from typing import Any

from .options import CliError, store_for


def add_command(command: Any) -> None:
    """Add `memkit mcp` to the parser (`command` makes a subcommand with --db and --workspace)."""
    sub = command("mcp", cmd_mcp, "serve one user's memory to an MCP host over stdio; writes ask the person "
                  "(the mcp extra)")
    sub.add_argument("--user", required=True, help="whose memory (chosen by you, not by the MCP client)")
    sub.add_argument("--session", default="mcp", help="the session recorded with a write (default: mcp)")


def cmd_mcp(args: argparse.Namespace) -> None:
    try:
        from ..integrations.mcp_server import serve_stdio
    except ImportError as exc:  # the message names the extra to install
        raise CliError(str(exc)) from None
    with store_for(args) as store:
        serve_stdio(store, args.user, session=args.session)
