"""`memkit consolidate`: after a session, propose what its archived turns told worth keeping.

The background path to memory (memkit.consolidation): one pass over a finished session proposes
the facts it told and an episode summarising it. Nothing is approved: the proposals wait for a
person (`memkit proposals`, then `memkit approve ID --confirm` or `memkit reject ID`), so this
command needs no `--confirm`. It reads the whole session where `memkit chat` kept it: the archived
turns and those still in chat's window (the store's own file, or the Redis at `--redis-url` or
REDIS_URL). A PostgreSQL store keeps chat's window in Redis; without a Redis URL only its archive is
read, and the report's `note` says so. A session with no turns is refused, and nothing is proposed.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from ..consolidation import consolidate
from ..errors import ValidationError
from ..servers.redis_client import check_redis_url
from ..store import Store
from ..transcript import Turn
from .options import redis_url, store_for, window_for
from .output import emit

ARCHIVE_ONLY = ("read the archive only: a PostgreSQL store keeps chat's recent turns in Redis, and turns of "
                "this session still there were not read; give --redis-url URL or set REDIS_URL to read them too")
"""The report's note when a window may hold turns this command did not read."""


def add_command(command: Any) -> None:
    """Add `memkit consolidate` to the parser (`command` makes a subcommand with --db and --workspace)."""
    sub = command("consolidate", cmd_consolidate, "propose what a finished session's archived turns told worth "
                  "keeping (facts, and an episode summarising it); approves nothing")
    sub.add_argument("--user", required=True, help="whose session (chosen by you, not by a model)")
    sub.add_argument("--session", required=True, help="the finished session to read")
    sub.add_argument("--no-summary", action="store_true", help="propose the facts only, no episode")
    sub.add_argument("--redis-url", metavar="URL",
                     help="also read the turns chat's window keeps in the Redis at URL (default: $REDIS_URL)")


def cmd_consolidate(args: argparse.Namespace) -> None:
    url = redis_url(args)
    if url is not None:
        check_redis_url(url)  # before the store opens: a bad URL changes nothing
    with store_for(args) as store:
        turns, note = session_turns(args, store, url)
        try:
            done = consolidate(store, args.user, args.session, summary=not args.no_summary, turns=turns)
        except ValidationError as exc:
            if note is None:
                raise
            raise ValidationError(f"{str(exc).rstrip('.')}; {note}") from None  # where the turns may be
    user = shlex.quote(args.user)  # the suggested commands paste into a shell as they are
    report = {
        "user": done.user, "session": done.session, "turns_read": done.turns_read,
        "policy_calls": done.policy_calls, "proposed": done.proposed,
        "already_waiting": [p["id"] for p in done.already_waiting], "unchanged": done.unchanged,
        "approved": 0, **({"note": note} if note else {}),
        "next": f"a person decides: memkit proposals --user {user}, then "
                f"memkit approve ID --user {user} --confirm, or memkit reject ID --user {user}",
    }
    kept = ", ".join(str(p["id"]) for p in done.proposed)
    # The values are shown to a person who will approve them: emit escapes every hidden character.
    emit(report, committed=f"proposals {kept} of {args.user!r} kept, waiting for a person" if kept else None)


def session_turns(args: argparse.Namespace, store: Store, url: str | None) -> tuple[list[Turn] | None, str | None]:
    """The session's turns where `memkit chat` kept them (archive and window), and a note when
    turns may remain unread: None for the turns means the archive alone (`consolidate`'s default)."""
    if url is None and store.path is None:  # PostgreSQL: chat's window was in a Redis not named here
        return None, ARCHIVE_ONLY
    with window_for(store, url) as window:  # the window chat keeps: the store's own file, or the Redis at the URL
        return window.load_session(args.user, args.session), None
