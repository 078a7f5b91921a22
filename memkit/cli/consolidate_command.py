"""`memkit consolidate`: after a session, propose what its archived turns told worth keeping.

The background path to memory (memkit.consolidation): one pass over a finished session proposes
the facts it told and an episode summarising it. Nothing is approved: the proposals wait for a
person (`memkit proposals`, then `memkit approve ID --confirm` or `memkit reject ID`), so this
command needs no `--confirm`. It reads the session's archived turns and, in a SQLite store, those
still in the store's own window (`memkit chat`'s). A session with no turns is refused, and nothing
is proposed.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from ..consolidation import consolidate
from ..window import StoreWindow
from .options import store_for
from .output import emit


def add_command(command: Any) -> None:
    """Add `memkit consolidate` to the parser (`command` makes a subcommand with --db and --workspace)."""
    sub = command("consolidate", cmd_consolidate, "propose what a finished session's archived turns told worth "
                  "keeping (facts, and an episode summarising it); approves nothing")
    sub.add_argument("--user", required=True, help="whose session (chosen by you, not by a model)")
    sub.add_argument("--session", required=True, help="the finished session to read")
    sub.add_argument("--no-summary", action="store_true", help="propose the facts only, no episode")


def cmd_consolidate(args: argparse.Namespace) -> None:
    with store_for(args) as store:
        turns = None
        if store.path is not None:  # a SQLite store: the session's recent turns may still be in its window
            with StoreWindow(store, store.limits.window_turns) as window:
                turns = window.load_session(args.user, args.session)
        done = consolidate(store, args.user, args.session, summary=not args.no_summary, turns=turns)
    user = shlex.quote(args.user)  # the suggested commands paste into a shell as they are
    report = {
        "user": done.user, "session": done.session, "turns_read": done.turns_read,
        "policy_calls": done.policy_calls, "proposed": done.proposed,
        "already_waiting": [p["id"] for p in done.already_waiting], "unchanged": done.unchanged,
        "approved": 0,
        "next": f"a person decides: memkit proposals --user {user}, then "
                f"memkit approve ID --user {user} --confirm, or memkit reject ID --user {user}",
    }
    kept = ", ".join(str(p["id"]) for p in done.proposed)
    # The values are shown to a person who will approve them: emit escapes every hidden character.
    emit(report, committed=f"proposals {kept} of {args.user!r} kept, waiting for a person" if kept else None)
