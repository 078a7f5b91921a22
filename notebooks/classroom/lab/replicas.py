"""Scaling out, the instances: agent instances as real processes behind a round-robin, one user's
conversation hopping between them, and every model request scanned for another user's data
(notebook 09 writes the instance's function in a cell).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any
from collections.abc import Mapping, Sequence

from memkit.models import user_envelope
from .workers import WORKER_TIMEOUT_S, read_answer, send, stderr_tail, stop

HOP_SCRIPT: tuple[dict[str, Any], ...] = (
    {"message": "My ticket number is T-4471"},
    {"message": "What was my ticket number?", "expect": "T-4471"},
    {"message": "What was my ticket number?", "expect": "T-4471"},
    {"message": "Remember my drink is green tea", "confirm": ["preference", "drink", "green tea"]},
    {"message": "What is my drink?", "expect": "green tea"},
    {"message": "What is my drink?", "expect": "green tea"},
)
"""One user's conversation for three instances: told to A, asked of B and C (the ticket lives in
the window, the confirmed preference in the long-term store)."""


class Instance:
    """One agent instance: a real process answering messages for any user and session.

    Wrap a started process in one; `close()` ends the process (it closes its store and window
    first, so the window's archiver finishes its pass).

    Attributes:
        name: the instance's name ("A", "B", ...).
        shared: whether its window is a shared Redis (False: a window inside its own process).
    """

    def __init__(self, name: str, process: subprocess.Popen[str], shared: bool) -> None:
        self.name, self.process, self.shared = name, process, shared

    def ask(self, user: str, session: str, message: str, *, confirm: Sequence[str] | None = None) -> dict[str, Any]:
        """Ask the instance one message; return its reply and what its model requests carried.

        Args:
            confirm: (kind, key, value) that the user confirmed outside the chat for this message
                (what a save needs: the model only proposes).

        Returns:
            `reply`; `exchanges` and `memories`, how many recent exchanges and retrieved records
            the first model request carried; `requests`, the text of every model request sent.
        """
        try:
            send(self.process, json.dumps({"user": user, "session": session, "message": message,
                                           "confirm": list(confirm) if confirm else None}))
        except BrokenPipeError:  # it ended before it read the message: say why, from its stderr
            self.process.wait(timeout=WORKER_TIMEOUT_S)
            raise RuntimeError(f"instance {self.name} exited with code {self.process.returncode} "
                               f"before it read a message: {stderr_tail(self.process)}") from None
        result: dict[str, Any] = read_answer(self.process)
        if "error" in result:
            raise RuntimeError(f"instance {self.name} failed: {result['error']}")
        return result

    def close(self) -> None:
        """Stop the process (it closes its window and store first). Safe to call twice."""
        if self.process.poll() is None:
            try:
                send(self.process, json.dumps({"stop": True}))
                self.process.communicate(timeout=WORKER_TIMEOUT_S)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        stop(self.process)

    def __enter__(self) -> Instance:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Instance({self.name!r}, shared={self.shared})"


ISOLATION_USERS: dict[str, dict[str, str]] = {
    "alice": {"ticket number": "T-4471", "drink": "green tea"},
    "bob": {"ticket number": "Q-9082", "drink": "black coffee"},
}
"""Two users' facts for the isolation scan: a ticket in the window, a drink in the store."""


def isolation_scan(instances: Sequence[Instance], session: str,
                   users: Mapping[str, Mapping[str, str]] = ISOLATION_USERS) -> dict[str, Any]:
    """Two users talk through the same instances, interleaved; scan every model request.

    Each user tells their ticket number and confirms their drink, then asks for both, each message
    on the next instance round-robin (the users alternate). Every model request any instance sent
    for one user is searched for every other user's values.

    Returns:
        Figures: asks, model requests scanned, own facts recalled (of how many), and `leaks`,
        the requests that held another user's value (must be 0), with `leaked` naming them.
    """
    plan = []
    for facts in zip(*[[(user, step) for step in _user_steps(values)] for user, values in users.items()], strict=False):
        plan.extend(facts)
    scanned = recalled = expected = 0
    leaked: list[str] = []
    for hop, (user, step) in enumerate(plan):
        instance = instances[hop % len(instances)]
        result = instance.ask(user, session, step["message"], confirm=step.get("confirm"))
        others = [value for other, values in users.items() if other != user for value in values.values()]
        for text in result["requests"]:
            scanned += 1
            leaked += [f"{value!r} in a request for {user} (instance {instance.name})"
                       for value in others if value.lower() in text.lower()]
        if "expect" in step:
            expected += 1
            recalled += step["expect"] in result["reply"]
    return {"users": len(users), "asks": len(plan), "instances": len(instances), "model requests scanned": scanned,
            "own facts recalled": recalled, "own facts asked": expected, "leaks": len(leaked), "leaked": leaked}


def _user_steps(values: Mapping[str, str]) -> list[dict[str, Any]]:
    ticket, drink = values["ticket number"], values["drink"]
    return [{"message": f"My ticket number is {ticket}"},
            {"message": f"Remember my drink is {drink}", "confirm": ["preference", "drink", drink]},
            {"message": "What was my ticket number?", "expect": ticket},
            {"message": "What is my drink?", "expect": drink}]


def reply_figures(reply: str, requests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What an instance hands back for one message: the reply, and what its model requests carried.

    Args:
        reply: the text the agent answered.
        requests: the model requests it sent for that message (`FixtureModel.requests`, the new ones).

    Returns:
        `reply`; `exchanges` and `memories`, how many recent exchanges and retrieved records the
        first request carried; `requests`, the text of every request (for `isolation_scan`).
    """
    envelope = user_envelope(requests[0]["messages"]) if requests else {}
    return {"reply": reply, "exchanges": len(envelope.get("recent_history") or []),
            "memories": len(envelope.get("retrieved_memory") or []),
            "requests": [json.dumps(r["messages"], ensure_ascii=False) for r in requests]}
