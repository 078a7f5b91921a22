"""The commands on proposals: `proposals` lists what the model proposed for a user, `approve` applies
one (needs --confirm: the person's approval), `reject` turns one down; and `memkit chat`'s question
to a person at a terminal ("save preference city = 'Porto'? [y/N]").

A person decides here, outside any model, on what they are shown: every hidden character of a value
(a line separator, a right-to-left override, a zero-width space) as an escape (memkit.visible), in
the list and in chat's question. Every refusal (an unknown or another user's id, a
proposal already decided, expired, or made against a record that changed since) changes nothing
and exits 2 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, TextIO
from collections.abc import Callable

from ..errors import MemkitError
from ..store import Store
from ..store.proposals import approve_command, describe
from ..visible import visible_json
from .options import CliError, require_confirm, store_for
from .output import emit

ORIGIN = "cli"
"""Where an approval or rejection made with these commands came from, as the history keeps it."""

_ID = re.compile(r"[1-9][0-9]{0,17}")

Command = Callable[[str, Any, str], argparse.ArgumentParser]
"""`build_parser`'s `command(name, handler, help)`: adds a subcommand with --db and --workspace."""


def proposal_id(text: str) -> int:
    """The proposal id given on the command line, as a number (ids are what `proposals` lists)."""
    if not _ID.fullmatch(text):
        raise CliError(f"proposal id {text[:40]!r} is not a proposal id; ids are positive whole numbers, "
                       "as `memkit proposals --user USER` lists them")
    return int(text)


def cmd_proposals(args: argparse.Namespace) -> None:
    with store_for(args) as store:
        listed = store.proposals(args.user, pending_only=not args.all)
    # A person reads this list to choose what to approve: the same JSON data, with every hidden
    # character of a value a \u escape (json.dumps leaves U+2028, U+202E or U+200B as they are).
    if sys.stdout is None:  # started with stdout closed (`>&-`): a list nobody can read is an error
        raise OSError("standard output is closed")
    print(visible_json(json.dumps(listed, ensure_ascii=False, indent=2)), flush=True)


def cmd_approve(args: argparse.Namespace) -> None:
    number = proposal_id(args.id)
    require_confirm(args, "approve")
    with store_for(args) as store:
        done = store.approve(args.user, number, origin=ORIGIN)
        emit(done, committed=f"proposal {number} of {args.user!r} approved: {describe(done['proposal'])}")


def cmd_reject(args: argparse.Namespace) -> None:
    number = proposal_id(args.id)
    with store_for(args) as store:
        rejected = store.reject(args.user, number, origin=ORIGIN)
        emit(rejected, committed=f"proposal {number} of {args.user!r} rejected: {describe(rejected)}")


def add_commands(command: Command) -> None:
    """Add `proposals`, `approve` and `reject` through the parser's `command(name, handler, help)`."""
    sub = command("proposals", cmd_proposals,
                  "list what the model proposed for a user and a person has not decided (JSON)")
    sub.add_argument("--user", required=True, help="whose proposals (chosen by you, not by a model)")
    sub.add_argument("--all", action="store_true", help="also the approved and rejected ones the store keeps")
    sub = command("approve", cmd_approve, "apply one proposal exactly as proposed (needs --confirm)")
    sub.add_argument("id", metavar="ID", help="the proposal's id, as `memkit proposals` lists it")
    sub.add_argument("--user", required=True, help="whose proposal")
    sub.add_argument("--confirm", action="store_true", help="I approve this proposal")
    sub = command("reject", cmd_reject, "turn one proposal down; memory is not touched")
    sub.add_argument("id", metavar="ID", help="the proposal's id, as `memkit proposals` lists it")
    sub.add_argument("--user", required=True, help="whose proposal")


TERMINAL_ORIGIN = "chat-terminal"
"""Where an approval given at `memkit chat`'s prompt came from, as the history keeps it."""


def at_terminal(stdin: TextIO | None, stderr: TextIO | None) -> bool:
    """Whether a person can be asked: standard input (the answer) and standard error (the question)
    are both a terminal. A script or a test that captures stderr is never asked, so it never hangs."""
    try:
        return bool(stdin is not None and stderr is not None and stdin.isatty() and stderr.isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def settle_proposals(store: Store, user: str, tool_results: list[dict[str, Any]],
                     on_delete: Callable[[], object]) -> list[dict[str, Any]]:
    """The proposals one chat turn's tool calls made, each decided by a person at a terminal.

    At a terminal each is asked about on stderr and answered on stdin: `y`/`yes` approves it
    (origin `chat-terminal`), `n`/`no` rejects it, anything else (Enter) leaves it waiting. With no
    terminal it stays waiting. Each entry says which: `decision` is `approved`, `rejected`,
    `pending` (with the command that approves it later) or `refused` (the approval was refused:
    `error` says why, and nothing was changed). `on_delete` runs after an approved delete (chat
    retires the user's recent turns then, as after a confirmed one, so the old value is not resent).
    """
    stdin, stderr = sys.stdin, sys.stderr
    asking = at_terminal(stdin, stderr)
    settled: list[dict[str, Any]] = []
    for row in tool_results:
        result = row["outcome"].get("result") if row["outcome"].get("ok") else None
        if not isinstance(result, dict) or result.get("status") != "waiting_for_approval":
            continue
        number = result["proposal"]
        if any(entry["proposal"] == number for entry in settled):
            continue  # proposed twice in one turn: asked once
        entry: dict[str, Any] = {"proposal": number, "proposed": result["proposed"], "decision": "pending"}
        answer = ""
        if asking:
            stderr.write(f"{result['proposed']}? [y/N] ")
            stderr.flush()
            answer = stdin.readline().strip().lower()
        try:
            if answer in ("y", "yes"):
                done = store.approve(user, number, origin=TERMINAL_ORIGIN)
                entry["decision"] = "approved"
                if done.get("deleted"):
                    on_delete()
            elif answer in ("n", "no"):
                store.reject(user, number, origin=TERMINAL_ORIGIN)
                entry["decision"] = "rejected"
        except MemkitError as exc:
            entry.update(decision="refused", error=str(exc))
        if entry["decision"] == "pending":
            entry["approve_with"] = approve_command(number, user)
        settled.append(entry)
    return settled


def waiting_in(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The proposals of a chat's turns still waiting for a person at its end (the chat's report)."""
    return [entry for turn in turns for entry in turn.get("proposals", []) if entry["decision"] == "pending"]
