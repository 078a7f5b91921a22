"""What a command line names: its arguments checked, and the store and window it opens.

Every argument is checked before any file is opened, so a refused command creates nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..approvals import Approvals
from ..clock import iso, utc_now
from ..errors import MemkitError
from ..limits import DEFAULT_LIMITS, Limits, check_text
from ..semantic import DEFAULT_MIN_SIMILARITY
from ..store import MemoryStore, Store, is_database_url, open_store
from ..store.targets import postgres_conninfo
from ..servers.redis_client import check_redis_url
from ..window import InProcessWindow, RedisWindow, ShortTermWindow, StoreWindow, connect_redis

POSTGRES_NEEDS_REDIS = ("a PostgreSQL store keeps chat's window in Redis: give --redis-url URL or set REDIS_URL "
                        "(or --window process, for a conversation that ends with the process)")

DEFAULT_WORKSPACE = "memkit-workspace"
CREATES_STORE = frozenset({"put", "import", "chat", "mcp"})
"""The only commands that may create a store where none is: they save. Every other command (one
that removes, maintains, decides or reads) refuses a path where no memkit database is, so a
mistyped --db or --workspace is never taken for an empty store ("removed 0" from the wrong file)."""
READ_COMMANDS = {"get", "search", "history", "export", "proposals"}
"""Commands that only read: they open a SQLite file read-only, so they never migrate an older
schema (an older memkit would then refuse its own file) nor record limits in it."""


class CliError(MemkitError):
    """A command line that cannot be carried out as given."""


def db_path(args: argparse.Namespace) -> tuple[Path, bool]:
    """`--db`, else `--workspace DIR` (DIR/state/memory.sqlite3), else $MEMKIT_DB, else ./memkit-workspace.

    Returns the path and whether its folder is the kit's to create (a workspace, never a --db folder).
    """
    _refuse_empty(args)
    if args.db and args.workspace is not None:
        raise CliError(f"--db {args.db} and --workspace {args.workspace} both name a SQLite file; give one of them")
    if args.db:
        return Path(args.db), False
    if args.workspace is None and os.environ.get("MEMKIT_DB"):
        return Path(os.environ["MEMKIT_DB"]), False
    return Path(args.workspace or DEFAULT_WORKSPACE) / "state" / "memory.sqlite3", True


def _refuse_empty(args: argparse.Namespace) -> None:
    for flag, value in (("--db", args.db), ("--workspace", args.workspace)):
        if value is not None and not value.strip():
            raise CliError(f"{flag} is empty (an unset shell variable?); give a path")


def database_url(args: argparse.Namespace) -> str | None:
    """`--db postgresql://...`, else $DATABASE_URL when neither --db, --workspace nor $MEMKIT_DB names a file."""
    _refuse_empty(args)
    if args.db:
        # Any PostgreSQL spelling (postgresql+psycopg://, upper case, key=value) is one; another
        # scheme is refused here, its password masked, never taken for a file name.
        conninfo = postgres_conninfo(args.db)
        if conninfo is not None and args.workspace is not None:
            raise CliError(f"--workspace {args.workspace} names a SQLite store's folder, and --db names a PostgreSQL "
                           "store; give one of them")
        if conninfo is not None:
            return conninfo
    if args.db or args.workspace is not None or os.environ.get("MEMKIT_DB"):
        return None
    url = os.environ.get("DATABASE_URL") or None
    if url is not None and not is_database_url(url):
        raise CliError("DATABASE_URL is set but is not a postgresql:// URL; unset it, or give --db or --workspace")
    return url


KEEPS_VECTORS = frozenset({"put", "chat", "approve", "import", "mcp"})
"""The commands that write records: on a store that keeps vectors, each write keeps its record's."""


def store_for(args: argparse.Namespace, **options: Any) -> Store:
    """The store this command line names: a PostgreSQL URL, or a SQLite file (created only by a
    command in `CREATES_STORE`; any other is refused where there is none: `missing_database`).

    `options` go to the store (`embedder=` for the commands that search by meaning; `read_only=True`
    for a command that only reads in this use, as `windows` without `--drop`).
    """
    asked_read_only = bool(options.pop("read_only", False))
    read_only = asked_read_only or args.command in READ_COMMANDS
    url = database_url(args)
    if url is not None:  # PostgreSQL: a schema without memkit's tables is refused, never made, but by a save
        store = open_store(url, create=args.command in CREATES_STORE and not read_only,
                           **({"read_only": True} if asked_read_only else {}), **options)
    else:
        path, is_workspace = db_path(args)
        if not path.exists() and not path.is_symlink():
            if args.command not in CREATES_STORE:
                raise missing_database(path)
            if is_workspace:
                private_folders(path.parent)
        store = MemoryStore(path, read_only=read_only, **options)
    if args.command in KEEPS_VECTORS and "embedder" not in options:
        keep_vectors(store)
    return store


def missing_database(path: Path) -> CliError:
    """The refusal of a command that needs an existing store at `path`, where none is."""
    folder = path.parent
    where = f"the folder {folder} does not exist" if not folder.is_dir() else "no such file"
    return CliError(f"no memkit database at {path} ({where}); nothing was changed or created. Check --db or "
                    "--workspace (a store is made only by a save: `memkit put ... --confirm`, import or chat)")


def keep_vectors(store: Store) -> None:
    """Give a store that keeps vectors (it was searched by meaning) the model that made most of them,
    so a write keeps its record's vector current. Without the `semantic` extra the write goes on
    without one (literal search is unaffected) and `memkit reindex` makes it later; a note says so.
    """
    models = store.embedding_models()
    if not models:
        return
    from ..semantic import SemanticUnavailableError, load_embedder

    try:
        store.embedder = load_embedder(next(iter(models)))
    except (SemanticUnavailableError, MemkitError) as exc:
        print(f"note: this write keeps no vector for retrieval by meaning ({exc}); "
              "`memkit reindex --confirm` makes the missing ones", file=sys.stderr)


_SIZES_CHECKED_BY_THE_STORE = DEFAULT_LIMITS.replace(
    max_value_chars=1 << 30, max_key_chars=1 << 30, max_id_chars=1 << 30, max_query_chars=1 << 30,
    max_search_limit=1 << 30)
"""For an existing SQLite store: its own recorded limits bound the sizes (the store checks them
before it writes anything); the shapes (allowed characters, not blank, no NUL) are checked here."""


def _argument_limits(args: argparse.Namespace) -> Limits:
    """The limits to check the arguments against before anything is opened: the defaults a new store
    is made with, or, for an existing SQLite file, only what no store's limits can allow."""
    if not hasattr(args, "db"):  # a command without a store (demo)
        return DEFAULT_LIMITS
    try:
        if database_url(args) is None and db_path(args)[0].is_file():
            return _SIZES_CHECKED_BY_THE_STORE
    except MemkitError:
        pass  # the same question is asked again when the store is opened, and refused there by name
    return DEFAULT_LIMITS


def check_args(args: argparse.Namespace) -> None:
    """Check every argument before any file is opened, so a refused command creates nothing."""
    limits = _argument_limits(args)
    required = {"put": ("key", "value"), "delete": ("key",), "get": ("key",), "history": ("key",),
                "import": ("file",)}.get(args.command, ())
    for name in required:
        need(args, name)
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
        if args.by_meaning:
            if not args.query.strip():
                raise CliError("search --by-meaning needs --query with some text")
            if not -1.0 <= args.min_similarity <= 1.0:
                raise CliError(f"--min-similarity is {args.min_similarity}; use a number from -1 to 1")
        elif args.model is not None or args.min_similarity != DEFAULT_MIN_SIMILARITY:
            raise CliError("--model and --min-similarity go with --by-meaning; add it, or drop them")
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
        _check_chat_window(args)


def redis_url(args: argparse.Namespace) -> str | None:
    """The Redis of chat's window: `--redis-url`, else this shell's REDIS_URL, else None."""
    return args.redis_url or os.environ.get("REDIS_URL") or None


def _check_chat_window(args: argparse.Namespace) -> None:
    """Refuse a window `chat` cannot use before the store is opened (opening may create it)."""
    url = redis_url(args)
    if args.window == "process":
        if args.redis_url:
            raise CliError("--window process keeps the conversation in this process: drop --redis-url, or the option")
        return
    if url is not None:
        check_redis_url(url)
    elif database_url(args) is not None:
        raise CliError(POSTGRES_NEEDS_REDIS)


def cli_approvals(store: Store) -> Approvals:
    """The confirmations of one command line, named after the moment it ran.

    Each `memkit` command is its own confirmation ("cli@<time>#1"), so a key's history tells two
    confirmed changes apart instead of showing "cli#1" for every one of them.
    """
    return Approvals(f"cli@{iso(utc_now())}", store.limits)


def require_confirm(args: argparse.Namespace, what: str) -> None:
    if not args.confirm:
        raise CliError(f"nothing changed: {what} needs --confirm (a person confirming this exact change)")


@contextlib.contextmanager
def window_for(store: Store, url: str | None, *, process_only: bool = False) -> Iterator[ShortTermWindow]:
    """The short-term window `chat` keeps: Redis at `url` (`--redis-url` or `REDIS_URL`), else the
    store's own file (`StoreWindow`), so the conversation continues in the next process with nothing
    running between commands; `process_only` (`--window process`) keeps it in this process only (the goldfish)."""
    size = store.limits.window_turns
    if process_only:
        with InProcessWindow(size, limits=store.limits) as goldfish:
            yield goldfish
        return
    if url is None:
        if store.path is None:  # checked before opening too (_check_chat_window): a MEMKIT_DB read late
            raise CliError(POSTGRES_NEEDS_REDIS)
        with StoreWindow(store, size) as window:
            yield window
        return
    handle = connect_redis(url)
    try:
        with RedisWindow(store, handle.client, size=size) as redis_window:
            yield redis_window
    finally:
        handle.close()


def private_folders(folder: Path) -> None:
    """Make `folder` and its missing parents 0700 (whatever the umask): the workspace is one user's."""
    missing = []
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=0o700)
        if path.stat().st_uid == os.getuid():
            os.chmod(path, 0o700)


def need(args: argparse.Namespace, name: str) -> None:
    if getattr(args, name) is None:
        raise CliError(f"{args.command} needs --{name.replace('_', '-')}")
