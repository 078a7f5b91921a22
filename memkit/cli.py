"""The `memkit` command: the store and the agent from a shell, JSON on stdout.

Every command that changes memory (put, delete, import, forget-user) does nothing without
`--confirm`: the flag is the person's confirmation, made outside any model. Bad input prints
`error: ...` on stderr, exits with 2 and changes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from .agent import MemoryAgent
from .approvals import Approvals
from .errors import MemkitError
from .clock import iso, utc_now
from .limits import DEFAULT_LIMITS, KINDS, check_text
from .models import FixtureModel, OpenAIModel
from .store import MemoryStore

DEFAULT_WORKSPACE = "memkit-workspace"
WRITE_COMMANDS = {"put", "delete", "import", "forget-user", "chat"}


class CliError(MemkitError):
    """A command line that cannot be carried out as given."""


def _db_path(args: argparse.Namespace) -> tuple[Path, bool]:
    """`--db`, else `--workspace DIR` (DIR/state/memory.sqlite3), else $MEMKIT_DB, else ./memkit-workspace.

    Returns the path and whether its folder is the kit's to create (a workspace, never a --db folder).
    """
    if args.db:
        return Path(args.db), False
    if args.workspace is None and os.environ.get("MEMKIT_DB"):
        return Path(os.environ["MEMKIT_DB"]), False
    return Path(args.workspace or DEFAULT_WORKSPACE) / "state" / "memory.sqlite3", True


def _open_store(args: argparse.Namespace) -> MemoryStore:
    path, is_workspace = _db_path(args)
    if not path.exists() and not path.is_symlink():
        if args.command not in WRITE_COMMANDS:
            raise CliError(f"there is no database at {path}; create one with `memkit put ... --confirm` or `memkit chat`")
        if is_workspace:
            path.parent.mkdir(parents=True, exist_ok=True)
    return MemoryStore(path)


def _check_args(args: argparse.Namespace) -> None:
    """Check every argument before any file is opened, so a refused command creates nothing."""
    limits = DEFAULT_LIMITS
    required = {"put": ("key", "value"), "delete": ("key",), "get": ("key",), "history": ("key",),
                "import": ("file",)}.get(args.command, ())
    for name in required:
        _need(args, name)
    if getattr(args, "user", None) is not None:
        limits.check_id("user", args.user)
    if getattr(args, "session", None) is not None:
        limits.check_id("session", args.session)
    if getattr(args, "as_user", None) is not None:
        limits.check_id("user", args.as_user)
    if getattr(args, "key", None) is not None:
        limits.check_key(args.key)
    if getattr(args, "value", None) is not None:
        limits.check_value(args.value)
    if args.command == "search":
        limits.check_query(args.query)
        limits.check_limit(args.limit)
    if args.command == "chat":
        for key, value in (args.confirm_preference or []) + (args.confirm_episode or []):
            limits.check_key(key)
            limits.check_value(value)
        for kind, key in args.confirm_delete or []:
            limits.check_kind(kind)
            limits.check_key(key)
        for message in args.message or []:
            check_text("message", message)
        if args.budget is not None and args.budget < 1:
            raise CliError(f"--budget is {args.budget}; it must be a positive number of characters")


def _cli_approvals(store: MemoryStore) -> Approvals:
    """The confirmations of one command line, named after the moment it ran.

    Each `memkit` command is its own confirmation ("cli@<time>#1"), so a key's history tells two
    confirmed changes apart instead of showing "cli#1" for every one of them.
    """
    return Approvals(f"cli@{iso(utc_now())}", store.limits)


def _require_confirm(args: argparse.Namespace, what: str) -> None:
    if not args.confirm:
        raise CliError(f"nothing changed: {what} needs --confirm (a person confirming this exact change)")


def _emit(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))


# -- commands ---------------------------------------------------------------------------------------


def cmd_put(args: argparse.Namespace) -> None:
    _require_confirm(args, "put")
    with _open_store(args) as store:
        confirmation = _cli_approvals(store).confirm_put(args.kind, args.key, args.value)
        _emit(store.put(args.user, args.session, args.kind, args.key, args.value, confirmation=confirmation.id))


def cmd_get(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        _emit(store.get(args.user, args.kind, args.key))


def cmd_search(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        _emit(store.search(args.user, args.query, limit=args.limit, kind=args.kind_filter))


def cmd_delete(args: argparse.Namespace) -> None:
    _require_confirm(args, "delete")
    with _open_store(args) as store:
        confirmation = _cli_approvals(store).confirm_delete(args.kind, args.key)
        deleted = store.delete(args.user, args.kind, args.key, session=args.session, confirmation=confirmation.id)
        _emit({"deleted": deleted})


def cmd_history(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        _emit(store.history(args.user, args.kind, args.key))


def cmd_export(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        if args.out:
            header = json.loads(store.export_user(args.user, args.out).split("\n", 1)[0])
            _emit({"user": args.user, "written": args.out, "records": header["records"]})
        else:
            sys.stdout.write(store.export_user(args.user))


def cmd_import(args: argparse.Namespace) -> None:
    _require_confirm(args, "import")
    bundle = Path(args.file)
    if not bundle.is_file():
        raise CliError(f"there is no bundle file at {bundle}")
    with _open_store(args) as store:
        _emit(store.import_records(bundle, user=args.as_user))


def cmd_forget_user(args: argparse.Namespace) -> None:
    _require_confirm(args, "forget-user")
    with _open_store(args) as store:
        _emit(store.forget_user(args.user))


def cmd_health(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        _emit(store.health())


def cmd_chat(args: argparse.Namespace) -> None:
    messages = args.message or [line.strip() for line in sys.stdin if line.strip()]
    if not messages:
        raise CliError("chat needs --message TEXT (repeatable) or lines on standard input")
    for message in messages:
        check_text("message", message)
    # The model first: live mode without credentials fails before a database is created, and it
    # never falls back to the fixture.
    model = OpenAIModel() if args.live else FixtureModel()
    turns: list[dict[str, Any]] = []
    try:
        store = _open_store(args)
    except BaseException:
        asyncio.run(model.aclose())
        raise
    with store:
        approvals = _cli_approvals(store)
        for key, value in args.confirm_preference or []:
            approvals.confirm_put("preference", key, value)
        for key, value in args.confirm_episode or []:
            approvals.confirm_put("episode", key, value)
        for kind, key in args.confirm_delete or []:
            approvals.confirm_delete(kind, key)
        agent = MemoryAgent(store, args.user, args.session, model, approvals=approvals, budget_chars=args.budget)
        summary = {"user": args.user, "session": args.session, "model": "live" if args.live else "fixture",
                   "turns": turns}
        try:
            # One event loop for the whole conversation: the live client's pooled connections
            # belong to the loop that opened them.
            asyncio.run(_converse(agent, model, messages, turns))
        except MemkitError as exc:
            if turns:  # earlier turns may have changed memory: say what was done before failing
                _emit({**summary, "error": str(exc)})
            raise
        finally:
            if args.dump_requests and isinstance(model, FixtureModel):
                Path(args.dump_requests).write_text(json.dumps(model.requests, ensure_ascii=False), encoding="utf-8")
    _emit({**summary, "requests": len(agent.model.measurements),
           "largest_request_chars": agent.model.largest_request,
           "unused_confirmations": [c.describe() for c in approvals.pending]})


async def _converse(agent: MemoryAgent, model: Any, messages: list[str], turns: list[dict[str, Any]]) -> None:
    try:
        for message in messages:
            reply = await agent.ask(message)
            turns.append({"message": message, "reply": reply.text, "stop_reason": reply.stop_reason,
                          "tool_results": reply.tool_results})
    finally:
        await model.aclose()


def _need(args: argparse.Namespace, name: str) -> Any:
    value = getattr(args, name)
    if value is None:
        raise CliError(f"{args.command} needs --{name.replace('_', '-')}")
    return value


# -- the demo ---------------------------------------------------------------------------------------


def _run_session(db: Path, *argv: str) -> dict[str, Any]:
    """One chat session in a new Python process, as a restart would start it."""
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--db", str(db), *argv],
                          capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise CliError(f"a demo session failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def cmd_demo(args: argparse.Namespace) -> None:
    workspace = Path(tempfile.mkdtemp(prefix="memkit-demo-"))
    try:
        db = workspace / "state" / "memory.sqlite3"
        db.parent.mkdir()
        dumps = {name: workspace / f"{name}.json" for name in ("alice-1", "bob-1", "alice-2")}
        print("memkit demo: a fresh workspace, the fixture model, real processes\n")
        first = _run_session(
            db, "--user", "alice", "--session", "s1", "--dump-requests", str(dumps["alice-1"]),
            "--confirm-preference", "drink", "green tea",
            "--confirm-episode", "trip.kyoto", "Visited Kyoto in May and loved the tea houses",
            "--message", "Remember my drink is green tea",
            "--message", "Note episode trip.kyoto: Visited Kyoto in May and loved the tea houses",
        )
        for turn in first["turns"]:
            print(f"[process 1, alice/s1] {turn['message']!r}\n    -> {turn['reply']}")
        second = _run_session(
            db, "--user", "bob", "--session", "s1", "--dump-requests", str(dumps["bob-1"]),
            "--confirm-preference", "drink", "espresso", "--message", "Remember my drink is espresso",
        )
        print(f"[process 2, bob/s1]   {second['turns'][0]['message']!r}\n    -> {second['turns'][0]['reply']}")
        third = _run_session(
            db, "--user", "alice", "--session", "s2", "--dump-requests", str(dumps["alice-2"]),
            "--message", "What drink do I like, and how was Kyoto?",
        )
        recall = third["turns"][0]["reply"]
        print(f"[process 3, alice/s2] {third['turns'][0]['message']!r}\n    -> {recall}\n")
        alice_seen = dumps["alice-1"].read_text(encoding="utf-8") + dumps["alice-2"].read_text(encoding="utf-8")
        bob_seen = dumps["bob-1"].read_text(encoding="utf-8")
        checks = {
            "alice's new process recalled her preference": "green tea" in recall,
            "alice's new process recalled her episode": "Kyoto" in recall,
            "no request for alice held bob's value": "espresso" not in alice_seen,
            "no request for bob held alice's values": "green tea" not in bob_seen and "Kyoto" not in bob_seen,
        }
        for label, ok in checks.items():
            print(f"  {'ok  ' if ok else 'FAIL'} {label}")
        largest = max(run["largest_request_chars"] for run in (first, second, third))
        print(f"\nlargest measured request: {largest} characters (budget 16000)")
        print("workspace removed; run `make lab` for the notebooks")
        if not all(checks.values()):
            raise CliError("the demo's checks failed")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


# -- argument parsing ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `memkit` command."""
    parser = argparse.ArgumentParser(prog="memkit", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        where = sub.add_mutually_exclusive_group()
        where.add_argument("--db", metavar="PATH", help="the SQLite file (default: $MEMKIT_DB or ./memkit-workspace)")
        where.add_argument("--workspace", metavar="DIR", help="use DIR/state/memory.sqlite3")
        return sub

    def identity(sub: argparse.ArgumentParser, key: bool = True, user_required: bool = True) -> None:
        sub.add_argument("--user", required=user_required, help="whose memory (chosen by you, not by a model)")
        sub.add_argument("--session", default="cli", help="the session recorded with a write (default: cli)")
        if key:
            sub.add_argument("--kind", default="preference", choices=KINDS)
            sub.add_argument("--key")

    commands.add_parser("demo", help="run the end-to-end demo in a temporary workspace").set_defaults(handler=cmd_demo)
    sub = command("put", cmd_put, "save one memory (needs --confirm)")
    identity(sub)
    sub.add_argument("--value")
    sub.add_argument("--confirm", action="store_true", help="I confirm this exact value")
    identity(command("get", cmd_get, "read one memory"))
    sub = command("search", cmd_search, "search a user's memories (literal, case-insensitive)")
    identity(sub, key=False)
    sub.add_argument("--query", default="")
    sub.add_argument("--limit", type=int, default=5)
    sub.add_argument("--kind", dest="kind_filter", choices=KINDS, help="only this kind (default: both)")
    sub = command("delete", cmd_delete, "delete one memory (needs --confirm)")
    identity(sub)
    sub.add_argument("--confirm", action="store_true", help="I confirm this delete")
    identity(command("history", cmd_history, "how one memory changed, and on whose say-so"))
    sub = command("export", cmd_export, "write a user's memory as a JSON Lines bundle")
    identity(sub, key=False)
    sub.add_argument("--out", metavar="PATH", help="write the bundle here instead of stdout")
    sub = command("import", cmd_import, "load a bundle made by export (needs --confirm)")
    sub.add_argument("--file", metavar="PATH")
    sub.add_argument("--as-user", help="import under this user id instead of the bundle's")
    sub.add_argument("--confirm", action="store_true")
    sub = command("forget-user", cmd_forget_user, "remove a user's records, history and transcript (needs --confirm)")
    identity(sub, key=False)
    sub.add_argument("--confirm", action="store_true")
    command("health", cmd_health, "schema, journal mode, sizes and quotas of a database")
    sub = command("chat", cmd_chat, "talk to the agent (fixture model, or --live)")
    identity(sub, key=False)
    sub.add_argument("--message", action="append", help="a message (repeatable; default: lines on stdin)")
    sub.add_argument("--confirm-preference", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sub.add_argument("--confirm-episode", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sub.add_argument("--confirm-delete", nargs=2, action="append", metavar=("KIND", "KEY"))
    sub.add_argument("--live", action="store_true", help="use OPENAI_API_KEY / OPENAI_MODEL / OPENAI_BASE_URL")
    sub.add_argument("--budget", type=int, default=None, help="request budget in characters (default 16000)")
    sub.add_argument("--dump-requests", metavar="PATH", help="write every request the fixture received (JSON)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `memkit` command; returns the exit code (0 ok, 2 refused)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["demo"])
    try:
        _check_args(args)
        args.handler(args)
    except MemkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a path given on the command line that cannot be read or written
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
