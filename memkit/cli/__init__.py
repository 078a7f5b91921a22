"""The `memkit` command: the store and the agent from a shell, JSON on stdout.

Every command that changes memory (put, delete, import, forget-user, approve, windows --drop) does
nothing without `--confirm`: the flag is the person's confirmation, made outside any model.

Exit codes (scripts can tell them apart):
  0  done, and the report was written;
  2  refused: bad input or a database that cannot be used, `error: ...` on stderr, nothing changed;
  3  the change WAS committed, but its report could not be written (stdout closed or full):
     `error: committed: ...` on stderr says what was changed. Do not simply retry a put or delete.
  4  changes WERE committed, then the command failed before it finished (in `chat`: the model's
     next call, the budget, the window): `error: committed: ...; then failed: ...` on stderr.
  130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from typing import Any
from collections.abc import Sequence

from ..errors import DISTRIBUTION, CommittedThenFailedError, MemkitError
from ..limits import KINDS
from .chat import cmd_chat
from .consolidate_command import add_command as add_consolidate_command
from .maintenance import cmd_limits, cmd_migrate
from .inspect_command import add_command as add_inspect_command
from .mcp import add_command as add_mcp_command
from .options import check_args
from .output import (EXIT_COMMITTED_THEN_FAILED, EXIT_COMMITTED_UNREPORTED, EXIT_REFUSED, ReportFailed, complain,
                     discard_stdout)
from .proposal_commands import add_commands as add_proposal_commands
from ..semantic import DEFAULT_MIN_SIMILARITY, DEFAULT_MODEL
from .semantic_commands import cmd_reindex
from .store_commands import (cmd_delete, cmd_export, cmd_forget_user, cmd_get, cmd_health, cmd_history,
                             cmd_import, cmd_put, cmd_search, cmd_windows)
from .usage import MemkitParser

__all__ = ["build_parser", "main"]


def _demo(args: argparse.Namespace) -> None:
    from .demo import run_demo  # the demo drives this command in other processes; it is not a library

    run_demo()


# -- argument parsing ---------------------------------------------------------------------------------


def version_text() -> str:
    """`memkit --version`: the installed distribution's version and name."""
    try:
        return f"memkit {metadata.version(DISTRIBUTION)} ({DISTRIBUTION})"
    except metadata.PackageNotFoundError:  # imported from a checkout that pip never installed
        return f"memkit (the {DISTRIBUTION} distribution is not installed: pip install -e . in the checkout)"


def build_parser() -> MemkitParser:
    """The argument parser of the `memkit` command (its usage errors say what to do: cli/usage.py)."""
    parser = MemkitParser(prog="memkit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version_text())
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        sub.add_argument("--db", metavar="PATH|URL", help="the SQLite file, or a postgresql:// URL "
                         "(default: $MEMKIT_DB, $DATABASE_URL, or ./memkit-workspace)")
        sub.add_argument("--workspace", metavar="DIR", help="use DIR/state/memory.sqlite3 (made private if missing)")
        return sub

    def identity(sub: argparse.ArgumentParser, key: bool = True) -> None:
        sub.add_argument("--user", required=True, help="whose memory (chosen by you, not by a model)")
        sub.add_argument("--session", default="cli", help="the session recorded with a write (default: cli)")
        if key:
            sub.add_argument("--kind", default="preference", choices=KINDS)
            sub.add_argument("--key", required=True)

    commands.add_parser("demo", help="run the end-to-end demo in a temporary workspace").set_defaults(
        handler=_demo)
    sub = command("put", cmd_put, "save one memory (needs --confirm)")
    identity(sub)
    sub.add_argument("--value", required=True)
    sub.add_argument("--confirm", action="store_true", help="I confirm this exact value")
    identity(command("get", cmd_get, "read one memory"))
    sub = command("search", cmd_search, "search a user's memories (literal, case-insensitive)")
    identity(sub, key=False)
    sub.add_argument("--query", default="")
    sub.add_argument("--limit", type=int, default=5)
    sub.add_argument("--kind", dest="kind_filter", choices=KINDS, help="only this kind (default: both)")
    sub.add_argument("--by-meaning", action="store_true",
                     help="rank by similarity of meaning instead (the semantic extra): 'coffee' finds 'espresso'")
    sub.add_argument("--min-similarity", type=float, default=DEFAULT_MIN_SIMILARITY,
                     help="with --by-meaning: the least similarity of a hit, -1 to 1 "
                          f"(default {DEFAULT_MIN_SIMILARITY})")
    sub.add_argument("--model", help=f"with --by-meaning: the embedding model (default {DEFAULT_MODEL})")
    sub = command("delete", cmd_delete, "delete one memory (needs --confirm)")
    identity(sub)
    sub.add_argument("--confirm", action="store_true", help="I confirm this delete")
    identity(command("history", cmd_history, "how one memory changed, and on whose say-so"))
    sub = command("export", cmd_export, "write a user's memory as a JSON Lines bundle")
    identity(sub, key=False)
    sub.add_argument("--out", metavar="PATH", help="write the bundle here instead of stdout (atomically)")
    sub.add_argument("--force", action="store_true", help="replace an existing --out file")
    sub = command("import", cmd_import, "load a bundle made by export (needs --confirm)")
    sub.add_argument("--file", metavar="PATH", required=True)
    sub.add_argument("--as-user", help="import under this user id instead of the bundle's")
    sub.add_argument("--confirm", action="store_true")
    sub = command("forget-user", cmd_forget_user,
                  "remove a user from the store, the transcript archive and every window (needs --confirm)")
    identity(sub, key=False)
    sub.add_argument("--confirm", action="store_true")
    sub.add_argument("--window-gone", action="append", metavar="PLACE",
                     help="a recorded window gone for good (a retired Redis: its URL, with its password if "
                          "it needs one; an older memkit's removed workspace: its folder); skipped if nothing answers "
                          "there, then no longer recorded (repeatable; `memkit windows` lists them)")
    sub = command("windows", cmd_windows, "the window places the store recorded, and whether each answers; "
                  "--drop one gone for good (needs --confirm)")
    sub.add_argument("--drop", metavar="PLACE", help="stop recording this place (its Redis URL, workspace folder "
                     "or place text); refused while it answers")
    sub.add_argument("--confirm", action="store_true", help="I confirm this place is gone for good")
    command("health", cmd_health, "schema, journal mode, sizes and quotas of a database")
    sub = command("migrate", cmd_migrate, "bring a store to this memkit's schema version (needs --confirm)")
    sub.add_argument("--confirm", action="store_true", help="I confirm the migration (older programs then refuse it)")
    sub = command("limits", cmd_limits, "show the limits a store recorded; change them with --set (needs --confirm)")
    sub.add_argument("--set", action="append", metavar="NAME=VALUE", help="a new limit (repeatable)")
    sub.add_argument("--confirm", action="store_true", help="I confirm these new limits")
    add_proposal_commands(command)
    sub = command("reindex", cmd_reindex, "make the vectors retrieval by meaning needs: missing ones, or all "
                  "of them for a new --model (the semantic extra; needs --confirm)")
    sub.add_argument("--user", help="only this user's records (default: every user)")
    sub.add_argument("--model", help=f"the embedding model (default {DEFAULT_MODEL})")
    sub.add_argument("--confirm", action="store_true", help="I confirm rewriting the vectors")
    sub = command("chat", cmd_chat, "talk to the agent (fixture model, or --live)")
    identity(sub, key=False)
    sub.add_argument("--message", "--task", dest="message", action="append",
                     help="a message (repeatable); without it, each line of stdin is one, answered as a JSON line")
    sub.add_argument("--confirm-preference", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sub.add_argument("--confirm-episode", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sub.add_argument("--confirm-delete", nargs=2, action="append", metavar=("KIND", "KEY"))
    sub.add_argument("--live", action="store_true", help="use OPENAI_API_KEY / OPENAI_MODEL / OPENAI_BASE_URL")
    sub.add_argument("--budget", type=int, default=None, help="request budget in characters (default 16000)")
    sub.add_argument("--window", choices=("kept", "process"), default="kept",
                     help="where the conversation's recent turns live: kept (default) in the store's own file, or "
                          "in Redis with --redis-url or REDIS_URL; or this process only (the goldfish, for comparison)")
    sub.add_argument("--redis-url", metavar="URL", help="keep the window in the Redis at URL (default: $REDIS_URL)")
    sub.add_argument("--dump-requests", metavar="PATH", help="write every request the fixture received (JSON)")
    add_consolidate_command(command)
    add_mcp_command(command)
    add_inspect_command(command)
    parser.link_commands()
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `memkit` command; returns the exit code (the module docstring lists them)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # refused under the command's own usage, not the top-level one argparse would show
        parser.command_parser(args.command).refuse_extra(extra)
    if args.command is None:
        args = parser.parse_args(["demo"])
    try:
        check_args(args)
        args.handler(args)
    except ReportFailed as exc:
        complain(f"error: committed: {exc.committed}; only writing its report failed ({exc.cause})")
        discard_stdout()
        return EXIT_COMMITTED_UNREPORTED
    except CommittedThenFailedError as exc:  # before MemkitError: the changes stand, "refused" would lie
        complain(f"error: {exc}")
        return EXIT_COMMITTED_THEN_FAILED
    except (MemkitError, OSError) as exc:  # OSError: a path given on the command line that cannot be used
        complain(f"error: {exc}")
        discard_stdout()
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0
