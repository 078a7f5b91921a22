"""`memkit chat`: the agent over the store and its window, one message after another.

Messages come from `--message`/`--task`, or line by line from standard input (each answered with a
JSON line flushed the moment the exchange is stored, then `{"done": true}`).

A save or delete the model proposes that no `--confirm-*` flag allows is kept as a proposal of the
user. On a terminal chat asks at once ("save preference city = 'Porto'? [y/N]") and approves on
yes; otherwise the proposal waits, and the report says so (`memkit approve ID --user U --confirm`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from ..agent import MemoryAgent
from ..errors import CommittedThenFailedError, MemkitError
from ..limits import check_text
from ..models import FixtureModel, OpenAIModel
from ..store.files import write_private
from .options import CliError, cli_approvals, redis_url, store_for, window_for
from .output import emit, emit_line
from .proposal_commands import settle_proposals, waiting_in


def _messages(args: argparse.Namespace) -> Iterator[str]:
    """`--message`/`--task` values, else the non-blank lines of standard input as they arrive."""
    if args.message:
        yield from args.message
        return
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
        raise CliError("chat needs --message TEXT (repeatable) or lines on standard input, "
                       "and standard input is closed")
    # The model first: live mode without credentials fails before a database is created, and it
    # never falls back to the fixture.
    model = OpenAIModel() if args.live else FixtureModel()
    try:
        store = store_for(args)
    except BaseException:
        asyncio.run(model.aclose())
        raise
    turns: list[dict[str, Any]] = []
    with store, window_for(store, redis_url(args), process_only=args.window == "process") as window:
        approvals = cli_approvals(store)
        for key, value in args.confirm_preference or []:
            approvals.confirm_put("preference", key, value)
        for key, value in args.confirm_episode or []:
            approvals.confirm_put("episode", key, value)
        for kind, key in args.confirm_delete or []:
            approvals.confirm_delete(kind, key)
        agent = MemoryAgent(store, args.user, args.session, model, approvals=approvals, window=window,
                            budget_chars=args.budget, unconfirmed="propose")
        summary = {"user": args.user, "session": args.session, "model": "live" if args.live else "fixture"}
        try:
            # One event loop for the whole conversation: the live client's pooled connections
            # belong to the loop that opened them.
            asyncio.run(_converse(agent, model, _messages(args), turns, streaming))
        except MemkitError as exc:
            if turns and not streaming:  # earlier turns were answered and stored: say so before failing
                emit({**summary, "turns": turns, "error": str(exc)})
            if turns and not isinstance(exc, CommittedThenFailedError):
                # The earlier exchanges (and whatever they saved) stand: "refused, nothing changed"
                # would be untrue, so this is a failure after commits (exit 4), naming them.
                raise CommittedThenFailedError(_committed_in(args.user, args.session, turns), exc) from exc
            raise
        finally:
            if args.dump_requests and isinstance(model, FixtureModel):
                # The requests hold the user's memories and conversation: a private file.
                write_private(Path(args.dump_requests), json.dumps(model.requests, ensure_ascii=False).encode("utf-8"))
    totals = {"requests": len(agent.model.measurements), "largest_request_chars": agent.model.largest_request,
              "unused_confirmations": [c.describe() for c in approvals.pending],
              "proposals_waiting": waiting_in(turns)}
    answered = f"{len(turns)} message(s) answered and stored in session {args.session!r}"
    if streaming:
        emit_line({"done": True, **summary, "answered": len(turns), **totals}, committed=answered)
    else:
        emit({**summary, "turns": turns, **totals}, committed=answered if turns else None)


def _committed_in(user: str, session: str, turns: list[dict[str, Any]]) -> list[str]:
    """What the answered turns committed: the exchanges stored, and every save or delete they made."""
    committed = [f"{len(turns)} earlier exchange(s) of {user}'s session {session!r} answered and stored"]
    for turn in turns:
        for call in turn["tool_results"]:
            result = call["outcome"].get("result") if call["outcome"].get("ok") else None
            if isinstance(result, dict) and "revision" in result:
                committed.append(f"{result['kind']} {result['key']!r} saved at revision {result['revision']}")
            elif isinstance(result, dict) and result.get("deleted") is True:
                committed.append(f"{call['name']} {call['arguments']} deleted")
    return committed


async def _converse(agent: MemoryAgent, model: Any, messages: Iterator[str], turns: list[dict[str, Any]],
                    streaming: bool) -> None:
    try:
        for message in messages:
            reply = await agent.ask(message)
            turn = {"message": message, "reply": reply.text, "stop_reason": reply.stop_reason,
                    "tool_results": reply.tool_results,
                    # What the model proposed: asked about at a terminal, else left waiting.
                    "proposals": settle_proposals(agent.store, agent.user, reply.tool_results,
                                                  on_delete=lambda: agent.window.retire_user(agent.user))}
            turns.append(turn)
            if streaming:
                emit_line(turn, committed=f"{len(turns)} message(s) answered and stored")
    finally:
        await model.aclose()
