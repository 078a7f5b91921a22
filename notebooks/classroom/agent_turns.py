"""An openai-agents agent with a local stand-in model (`RecallModel`, no network), whose conversation
lives in a `MemkitSession`.

`python -m classroom.agent_turns --db DB --user U --session S --message TEXT` is the new
process of `run_turn_in_new_process` (the restart).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any
from collections.abc import AsyncIterator

from agents import Agent, RunConfig, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import ResponseOutputMessage, ResponseOutputText

from memkit.integrations.openai_agents import MemkitSession

from .sync import run_sync

__all__ = ["RecallModel", "run_turn", "run_turn_in_new_process"]


class RecallModel(Model):
    """A stand-in model that answers from the user messages in its input, and nothing else.

    It has no memory of its own: a second turn can quote the first only if the session sent it.
    """

    def __init__(self) -> None:
        self.received: list[Any] = []

    async def get_response(self, system_instructions: str | None, input: str | list[Any],
                           *args: Any, **kwargs: Any) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.received = items
        said = [item["content"] for item in items
                if item.get("role") == "user" and isinstance(item.get("content"), str)]
        if len(said) > 1:
            text = f"From our conversation: you told me {said[0]!r}."
        else:
            text = "Noted. (This is all I have been told.)"
        message = ResponseOutputMessage(
            id="msg_recall", type="message", role="assistant", status="completed",
            content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("RecallModel answers Runner.run; it does not stream")


def run_turn(session: MemkitSession, message: str) -> dict[str, Any]:
    """One turn of the agent: its answer and what the model received (one row per item)."""
    model = RecallModel()
    agent = Agent(name="travel", instructions="Answer from the conversation.", model=model)
    # No tracing: it would send spans to OpenAI's servers (and warn without a key); this runs offline.
    result = run_sync(Runner.run(agent, message, session=session, run_config=RunConfig(tracing_disabled=True)))
    return {"answer": result.final_output, "model_received": [_describe(item) for item in model.received]}


def run_turn_in_new_process(db: str | Path, user: str, session_id: str, message: str) -> dict[str, Any]:
    """`run_turn` in a new Python process, on a new `MemkitSession` over the same database."""
    done = subprocess.run([sys.executable, "-m", "classroom.agent_turns", "--db", str(db), "--user", user,
                           "--session", session_id, "--message", message],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    if done.returncode != 0:
        raise RuntimeError(f"the agent's process failed: {done.stderr.strip()[-500:]}")
    return dict(json.loads(done.stdout))


def _describe(item: Any) -> str:
    """An item in a few words: `user: ...`, `assistant: ...`."""
    content = item.get("content")
    if isinstance(content, list):  # an assistant message: a list of parts
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return f"{item.get('role', item.get('type'))}: {content}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m classroom.agent_turns")
    for name in ("--db", "--user", "--session", "--message"):
        parser.add_argument(name, required=True)
    args = parser.parse_args(argv)
    with MemkitSession(args.session, args.db, user=args.user) as session:
        print(json.dumps(run_turn(session, args.message)))


if __name__ == "__main__":
    main()
