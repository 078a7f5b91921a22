"""The `memkit` command: the store and the agent from a shell, JSON on stdout.

Every command that changes memory (put, delete, import, forget-user) does nothing without
`--confirm`: the flag is the person's confirmation, made outside any model.

Exit codes (scripts can tell them apart):
  0  done, and the report was written;
  2  refused: bad input or a database that cannot be used, `error: ...` on stderr, nothing changed;
  3  the change WAS committed, but its report could not be written (stdout closed or full):
     `error: committed: ...` on stderr says what was changed. Do not simply retry a put or delete.
  130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from .agent import MemoryAgent
from .approvals import Approvals
from .clock import iso, utc_now
from .errors import MemkitError
from .limits import DEFAULT_LIMITS, KINDS, check_text
from .models import FixtureModel, OpenAIModel
from .request import History
from .store import MemoryStore, is_database_url, open_store
from .window import InProcessWindow, RedisWindow, ShortTermWindow, connect_redis
from .window.workspace import WorkspaceRedis, window_folder

DEFAULT_WORKSPACE = "memkit-workspace"
WRITE_COMMANDS = {"put", "delete", "import", "forget-user", "chat"}


EXIT_REFUSED = 2
EXIT_COMMITTED_UNREPORTED = 3


class CliError(MemkitError):
    """A command line that cannot be carried out as given."""


class ReportFailed(Exception):
    """A change was committed but writing its report failed; `committed` says what was changed."""

    def __init__(self, committed: str, cause: BaseException) -> None:
        super().__init__(committed)
        self.committed, self.cause = committed, cause


def _db_path(args: argparse.Namespace) -> tuple[Path, bool]:
    """`--db`, else `--workspace DIR` (DIR/state/memory.sqlite3), else $MEMKIT_DB, else ./memkit-workspace.

    Returns the path and whether its folder is the kit's to create (a workspace, never a --db folder).
    """
    for flag, value in (("--db", args.db), ("--workspace", args.workspace)):
        if value is not None and not value.strip():
            raise CliError(f"{flag} is empty (an unset shell variable?); give a path")
    if args.db and args.workspace is not None:
        raise CliError(f"--db {args.db} and --workspace {args.workspace} both name a SQLite file; give one of them "
                       "(--workspace goes with --db only when --db is a postgresql:// URL)")
    if args.db:
        return Path(args.db), False
    if args.workspace is None and os.environ.get("MEMKIT_DB"):
        return Path(os.environ["MEMKIT_DB"]), False
    return Path(args.workspace or DEFAULT_WORKSPACE) / "state" / "memory.sqlite3", True


def _database_url(args: argparse.Namespace) -> str | None:
    """`--db postgresql://...`, else $DATABASE_URL when neither --db, --workspace nor $MEMKIT_DB names a file."""
    if args.db and is_database_url(args.db):
        return str(args.db)
    if args.db or args.workspace is not None or os.environ.get("MEMKIT_DB"):
        return None
    url = os.environ.get("DATABASE_URL") or None
    if url is not None and not is_database_url(url):
        raise CliError("DATABASE_URL is set but is not a postgresql:// URL; unset it, or give --db or --workspace")
    return url


def _workspace_window(args: argparse.Namespace, store: MemoryStore) -> Path:
    """The folder of the workspace's own redis-server (the window when REDIS_URL is unset).

    Beside a SQLite file: `memory.sqlite3-window/`. For a PostgreSQL store, in the workspace
    (`--workspace DIR`, else ./memkit-workspace): `state/postgresql-<id>-window/`, `<id>` naming the
    server, database and schema (`PostgresStore.location`), so every process on this machine that
    uses that store shares one window, and two stores never share one (a window archives its turns
    into the store it was opened with).
    """
    location = getattr(store, "location", None)
    if location is None:
        return window_folder(store.path)
    digest = hashlib.sha256(location.encode("utf-8")).hexdigest()[:12]
    return Path(args.workspace or DEFAULT_WORKSPACE) / "state" / f"postgresql-{digest}-window"


def _open_store(args: argparse.Namespace) -> MemoryStore:
    url = _database_url(args)
    if url is not None:  # PostgreSQL; a read-only command never creates the store's tables
        return open_store(url, create=args.command in WRITE_COMMANDS)
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
            if not message.strip():
                raise CliError("--message is empty; ask something")
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


def _emit(value: Any, *, committed: str | None = None) -> None:
    """Print `value` as JSON. With `committed` (what the command changed), a failure to write the
    report is a `ReportFailed`, never a plain error: the change stands and the caller must know."""
    try:
        if sys.stdout is None:  # started with stdout closed (`>&-`)
            raise OSError("standard output is closed")
        print(json.dumps(value, ensure_ascii=False, indent=2), flush=True)
    except OSError as exc:
        if committed is None:
            raise
        raise ReportFailed(committed, exc) from None


def _emit_line(value: Any, *, committed: str) -> None:
    """One JSON line, flushed at once (a person or a script sees each reply when it is stored)."""
    try:
        sys.stdout.write(json.dumps(value, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    except OSError as exc:
        raise ReportFailed(committed, exc) from None


@contextlib.contextmanager
def _open_window(args: argparse.Namespace, store: MemoryStore) -> Iterator[ShortTermWindow]:
    """The short-term window of `chat`: Redis at `REDIS_URL`, else the workspace's own redis-server.

    The embedded server keeps its data (AOF, fsynced every second) in a folder beside the SQLite
    file, or in the workspace for a PostgreSQL store (`_workspace_window`), and is shared by every
    memkit process using that database, so a conversation continues in the next process with
    nothing but the workspace.
    """
    if getattr(args, "window", "workspace") == "process":
        with InProcessWindow(History(limits=store.limits).turns_needed, limits=store.limits) as goldfish:
            yield goldfish
        return
    url = os.environ.get("REDIS_URL")
    if not url:  # a PostgreSQL store's window lives in the workspace, which may not exist yet
        _workspace_window(args, store).parent.mkdir(parents=True, exist_ok=True)
    handle = connect_redis(url) if url else WorkspaceRedis(_workspace_window(args, store))
    try:
        window = RedisWindow(store, handle.client, size=History(limits=store.limits).turns_needed)
        with window:
            yield window
    finally:
        handle.close()


# -- commands ---------------------------------------------------------------------------------------


def cmd_put(args: argparse.Namespace) -> None:
    _require_confirm(args, "put")
    with _open_store(args) as store:
        confirmation = _cli_approvals(store).confirm_put(args.kind, args.key, args.value)
        record = store.put(args.user, args.session, args.kind, args.key, args.value, confirmation=confirmation.id)
        _emit(record, committed=f"{args.user}'s {args.kind} {args.key!r} saved at revision {record['revision']}")


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
        _emit({"deleted": deleted},
              committed=f"{args.user}'s {args.kind} {args.key!r} deleted" if deleted else None)


def cmd_history(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        _emit(store.history(args.user, args.kind, args.key))


def _store_files(store: MemoryStore) -> list[Path]:
    path = getattr(store, "path", None)  # a PostgreSQL store has no file
    if path is None:
        return []
    return [path, *(path.with_name(path.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def _check_export_target(out: Path, store: MemoryStore, force: bool) -> None:
    """Refuse an output path that is one of the store's own files, or an existing file without --force."""
    target = out.resolve()
    for own in _store_files(store):
        same_inode = own.exists() and out.exists() and os.path.samefile(own, out)
        if target == own.resolve() or same_inode:
            raise CliError(f"--out {out} is the database's own file {own.name}; writing the export there would "
                           "destroy every user's memory. Choose another path")
    if out.is_dir():
        raise CliError(f"--out {out} is a folder; give a file path")
    if (out.exists() or out.is_symlink()) and not force:
        raise CliError(f"--out {out} exists; pass --force to replace it")


def _write_atomically(out: Path, text: str) -> None:
    """Write `text` to a temporary file beside `out`, fsync it, then rename it into place."""
    handle, scratch = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent or ".")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(scratch, out)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise


def cmd_export(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        if args.out is not None:
            out = Path(args.out)
            _check_export_target(out, store, args.force)
            bundle = store.export_user(args.user)
            _write_atomically(out, bundle)
            header = json.loads(bundle.split("\n", 1)[0])
            _emit({"user": args.user, "written": args.out, "records": header["records"]})
        else:
            sys.stdout.write(store.export_user(args.user))


def cmd_import(args: argparse.Namespace) -> None:
    _require_confirm(args, "import")
    bundle = Path(args.file)
    if not bundle.is_file():
        raise CliError(f"there is no bundle file at {bundle}")
    with _open_store(args) as store:
        result = store.import_records(bundle, user=args.as_user)
        _emit(result, committed=f"a bundle imported: {json.dumps(result)}")


def cmd_forget_user(args: argparse.Namespace) -> None:
    _require_confirm(args, "forget-user")
    with _open_store(args) as store:
        url = os.environ.get("REDIS_URL")
        if url or _workspace_window(args, store).exists():
            with _open_window(args, store) as window:
                report = forget_everywhere(store, args.user, window)
        else:  # no window was ever kept for this database: nothing to start a server for
            report = forget_everywhere(store, args.user, None)
        _emit(report, committed=f"user {args.user!r} forgotten: {json.dumps(report['removed'])}")


def forget_everywhere(store: MemoryStore, user: str, window: ShortTermWindow | None) -> dict[str, Any]:
    """Remove `user` from the window (recent and pending turns) and the store, then check both.

    `ShortTermWindow.forget_user` clears the window first and then the store, so no archiver moves
    the user's turns into the store after it was cleared. `left` is read again afterwards: all zero,
    or an error.
    """
    removed = window.forget_user(user) if window is not None else store.forget_user(user)
    left = dict(store.traces(user))
    if window is not None:
        left["window_turns"] = window.user_turns(user)
    if any(left.values()):
        raise CliError(f"user {user!r} is not fully forgotten: {json.dumps(left)} remain")
    return {"user": user, "removed": removed, "left": left}


def cmd_health(args: argparse.Namespace) -> None:
    with _open_store(args) as store:
        _emit(store.health())


def _messages(args: argparse.Namespace) -> Iterator[str]:
    """`--message`/`--task` values, else the non-blank lines of standard input as they arrive."""
    if args.message:
        yield from args.message
        return
    if sys.stdin is None or sys.stdin.closed:
        raise CliError("chat needs --message TEXT (repeatable) or lines on standard input, and standard input is closed")
    try:
        for line in sys.stdin:
            if line.strip():
                check_text("message", line.strip())
                yield line.strip()
    except (OSError, ValueError) as exc:  # a closed or unreadable stdin; UnicodeDecodeError is a ValueError
        raise CliError(f"standard input cannot be read as UTF-8 text ({exc}); nothing more was asked") from None


def cmd_chat(args: argparse.Namespace) -> None:
    streaming = not args.message
    if streaming and (sys.stdin is None or sys.stdin.closed):
        raise CliError("chat needs --message TEXT (repeatable) or lines on standard input, and standard input is closed")
    # The model first: live mode without credentials fails before a database is created, and it
    # never falls back to the fixture.
    model = OpenAIModel() if args.live else FixtureModel()
    try:
        store = _open_store(args)
    except BaseException:
        asyncio.run(model.aclose())
        raise
    turns: list[dict[str, Any]] = []
    with store, _open_window(args, store) as window:
        approvals = _cli_approvals(store)
        for key, value in args.confirm_preference or []:
            approvals.confirm_put("preference", key, value)
        for key, value in args.confirm_episode or []:
            approvals.confirm_put("episode", key, value)
        for kind, key in args.confirm_delete or []:
            approvals.confirm_delete(kind, key)
        agent = MemoryAgent(store, args.user, args.session, model, approvals=approvals, window=window,
                            budget_chars=args.budget)
        summary = {"user": args.user, "session": args.session, "model": "live" if args.live else "fixture"}
        try:
            # One event loop for the whole conversation: the live client's pooled connections
            # belong to the loop that opened them.
            asyncio.run(_converse(agent, model, _messages(args), turns, streaming))
        except MemkitError as exc:
            if turns and not streaming:  # earlier turns were answered and stored: say so before failing
                _emit({**summary, "turns": turns, "error": str(exc)})
            raise
        finally:
            if args.dump_requests and isinstance(model, FixtureModel):
                Path(args.dump_requests).write_text(json.dumps(model.requests, ensure_ascii=False), encoding="utf-8")
    totals = {"requests": len(agent.model.measurements), "largest_request_chars": agent.model.largest_request,
              "unused_confirmations": [c.describe() for c in approvals.pending]}
    answered = f"{len(turns)} message(s) answered and stored in session {args.session!r}"
    if streaming:
        _emit_line({"done": True, **summary, "answered": len(turns), **totals}, committed=answered)
    else:
        _emit({**summary, "turns": turns, **totals}, committed=answered if turns else None)


async def _converse(agent: MemoryAgent, model: Any, messages: Iterator[str], turns: list[dict[str, Any]],
                    streaming: bool) -> None:
    try:
        for message in messages:
            reply = await agent.ask(message)
            turn = {"message": message, "reply": reply.text, "stop_reason": reply.stop_reason,
                    "tool_results": reply.tool_results}
            turns.append(turn)
            if streaming:
                _emit_line(turn, committed=f"{len(turns)} message(s) answered and stored")
    finally:
        await model.aclose()


def _demo(args: argparse.Namespace) -> None:
    from .demo import run_demo  # the demo drives this command in other processes; it is not a library

    run_demo()


def _need(args: argparse.Namespace, name: str) -> Any:
    value = getattr(args, name)
    if value is None:
        raise CliError(f"{args.command} needs --{name.replace('_', '-')}")
    return value


# -- argument parsing ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `memkit` command."""
    parser = argparse.ArgumentParser(prog="memkit", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, handler: Any, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        sub.add_argument("--db", metavar="PATH|URL", help="the SQLite file, or a postgresql:// URL "
                         "(default: $MEMKIT_DB, $DATABASE_URL, or ./memkit-workspace)")
        sub.add_argument("--workspace", metavar="DIR", help="use DIR/state/memory.sqlite3; with --db postgresql://..., "
                         "the folder for this machine's state (chat's window) instead of ./memkit-workspace")
        return sub

    def identity(sub: argparse.ArgumentParser, key: bool = True, user_required: bool = True) -> None:
        sub.add_argument("--user", required=user_required, help="whose memory (chosen by you, not by a model)")
        sub.add_argument("--session", default="cli", help="the session recorded with a write (default: cli)")
        if key:
            sub.add_argument("--kind", default="preference", choices=KINDS)
            sub.add_argument("--key")

    commands.add_parser("demo", help="run the end-to-end demo in a temporary workspace").set_defaults(
        handler=_demo)
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
    sub.add_argument("--out", metavar="PATH", help="write the bundle here instead of stdout (atomically)")
    sub.add_argument("--force", action="store_true", help="replace an existing --out file")
    sub = command("import", cmd_import, "load a bundle made by export (needs --confirm)")
    sub.add_argument("--file", metavar="PATH")
    sub.add_argument("--as-user", help="import under this user id instead of the bundle's")
    sub.add_argument("--confirm", action="store_true")
    sub = command("forget-user", cmd_forget_user,
                  "remove a user from the store, the transcript archive and every window (needs --confirm)")
    identity(sub, key=False)
    sub.add_argument("--confirm", action="store_true")
    command("health", cmd_health, "schema, journal mode, sizes and quotas of a database")
    sub = command("chat", cmd_chat, "talk to the agent (fixture model, or --live)")
    identity(sub, key=False)
    sub.add_argument("--message", "--task", dest="message", action="append",
                     help="a message (repeatable); without it, each line of stdin is one, answered as a JSON line")
    sub.add_argument("--confirm-preference", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sub.add_argument("--confirm-episode", nargs=2, action="append", metavar=("KEY", "VALUE"))
    sub.add_argument("--confirm-delete", nargs=2, action="append", metavar=("KIND", "KEY"))
    sub.add_argument("--live", action="store_true", help="use OPENAI_API_KEY / OPENAI_MODEL / OPENAI_BASE_URL")
    sub.add_argument("--budget", type=int, default=None, help="request budget in characters (default 16000)")
    sub.add_argument("--window", choices=("workspace", "process"), default="workspace",
                     help="where the conversation's recent turns live: REDIS_URL or the workspace's redis-server "
                          "(default), or this process only (the goldfish, for comparison)")
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
    except ReportFailed as exc:
        _complain(f"error: committed: {exc.committed}; only writing its report failed ({exc.cause})")
        _discard_stdout()
        return EXIT_COMMITTED_UNREPORTED
    except (MemkitError, OSError) as exc:  # OSError: a path given on the command line that cannot be used
        _complain(f"error: {exc}")
        _discard_stdout()
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return 0


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so the unwritten report cannot fail again at exit (which would
    make Python exit with 120 instead of the code chosen here)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _complain(text: str) -> None:
    """Write to stderr; a closed stderr cannot change the exit code, which is the answer that counts."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
