"""What every model of the kit answers with (`ModelReply`, made with `say` and `call`), and the
scripted fixture: replies written in advance, every request recorded for a notebook or a test.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from typing import Any
from collections.abc import Callable, Iterable

from ..errors import ModelError


@dataclasses.dataclass(frozen=True)
class ToolCall:
    """One tool call proposed by a model; `arguments` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str


@dataclasses.dataclass(frozen=True)
class ModelReply:
    """A model's answer: text, tool calls, or both."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    def as_message(self) -> dict[str, Any]:
        """The assistant message to put back into the conversation."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        return message


_call_ids = itertools.count(1)


def say(text: str) -> ModelReply:
    """A scripted reply with text only."""
    return ModelReply(content=text)


def call(name: str, arguments: dict[str, Any] | str | None = None, **kwargs: Any) -> ModelReply:
    """A scripted reply with one tool call. `arguments` may be raw text, to script malformed JSON.

    Example:
        >>> call("memory_get", kind="preference", key="drink").tool_calls[0].arguments
        '{"kind": "preference", "key": "drink"}'
    """
    text = arguments if isinstance(arguments, str) else json.dumps({**(arguments or {}), **kwargs})
    return ModelReply(tool_calls=(ToolCall(f"call_{next(_call_ids)}", name, text),))


ScriptStep = ModelReply | str | Callable[[list[dict[str, Any]]], ModelReply]


class RecordingModel:
    """Base of the fixture models: keeps a deep copy of every request in `requests`.

    It numbers the tool calls it returns `call_1`, `call_2`, ... per model, so the same script gives
    the same ids (and the same measured sizes) however often a notebook runs it in one kernel.
    """

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.closed = False
        self._call_numbers = itertools.count(1)

    def _numbered(self, reply: ModelReply) -> ModelReply:
        calls = tuple(dataclasses.replace(c, id=f"call_{next(self._call_numbers)}") for c in reply.tool_calls)
        return dataclasses.replace(reply, tool_calls=calls)

    def _record(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        self.requests.append({"messages": copy.deepcopy(messages), "tools": copy.deepcopy(tools)})

    async def aclose(self) -> None:
        """Nothing to release; present so every model closes the same way."""
        self.closed = True


class ScriptedModel(RecordingModel):
    """Answers from a script, one step per request; raises ModelError when the script runs out.

    A step is a `ModelReply`, a plain string (text reply), or a function of the messages that
    returns a `ModelReply`.

    Example:
        >>> model = ScriptedModel([call("memory_search", query="tea"), "You like tea."])
    """

    def __init__(self, script: Iterable[ScriptStep]) -> None:
        super().__init__()
        self._steps = list(script)

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """The next scripted reply."""
        self._record(messages, tools)
        if not self._steps:
            raise ModelError(f"the scripted model ran out of replies after {len(self.requests) - 1} requests")
        step = self._steps.pop(0)
        if isinstance(step, str):
            return say(step)
        return self._numbered(step(messages) if callable(step) else step)


def user_envelope(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON envelope of the (single) user message: task, retrieved_memory, recent_history."""
    for message in messages:
        if message["role"] == "user":
            return json.loads(message["content"])
    raise ModelError("the request has no user message")
