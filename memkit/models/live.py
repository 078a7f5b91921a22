"""The live model: an OpenAI-compatible chat-completions client (the `live` extra), sending the very
JSON the budget wrapper measured.
"""

from __future__ import annotations

import inspect
import json
import os
from typing import Any

from ..errors import ModelError, install_hint
from ..jsonutil import canonical_json
from .scripted import ModelReply, ToolCall


_EMPTY_TOOLS = ',"tools":[]}'


def _shown(text: str, limit: int = 300) -> str:
    """An endpoint's text in a message: one line, at most `limit` characters."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


def _reply_of(response: Any, where: str) -> ModelReply:
    """A chat completion as a `ModelReply`; anything else (a page, a body of another shape) a ModelError.

    The SDK builds its response objects without validating them, so a reply of the wrong shape
    arrives as a string or with fields of the wrong type: each is checked here before it is used.
    """
    def malformed(what: str) -> ModelError:
        return ModelError(f"the live model at {where} answered with {what}, not a chat completion; is it an "
                          "OpenAI-compatible chat-completions endpoint?")

    if isinstance(response, (str, bytes)):
        shown = response if isinstance(response, str) else repr(response)
        raise malformed(f"text ({_shown(shown, 80)!r})")
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise malformed("no choices") if isinstance(choices, list) else malformed("a body without 'choices'")
    message = getattr(choices[0], "message", None)
    content = getattr(message, "content", None)
    if message is None or not (content is None or isinstance(content, str)):
        raise malformed("a first choice without a message of text")
    raw_calls = getattr(message, "tool_calls", None) or []
    if not isinstance(raw_calls, list):
        raise malformed("'tool_calls' that is not a list")
    calls = []
    for c in raw_calls:
        function = getattr(c, "function", None)
        if function is None:
            continue
        name, arguments, call_id = (getattr(function, "name", None), getattr(function, "arguments", None),
                                    getattr(c, "id", None))
        if not isinstance(name, str) or not isinstance(call_id, str):
            raise malformed("a tool call without a name or an id")
        if not (arguments is None or isinstance(arguments, str)):
            sent = "object" if isinstance(arguments, dict) else "array" if isinstance(arguments, list) else \
                type(arguments).__name__
            raise ModelError(f"the live model at {where} sent the arguments of tool call {name!r} as a JSON "
                             f"{sent}, not as a JSON string; the chat-completions protocol "
                             "sends them as a string. Nothing of this call was run")
        calls.append(ToolCall(call_id, name, arguments or ""))
    return ModelReply(content=content, tool_calls=tuple(calls))


def _not_unicode(reason: str, position: int) -> ModelError:
    """The error for a request holding text with no UTF-8 form (a lone surrogate, from a JSON escape)."""
    return ModelError(f"the request holds text that is not valid Unicode ({reason} at character {position}); "
                      "it cannot be sent")


DEFAULT_MODEL_TIMEOUT_S = 30.0
"""How long the live model may take to answer one call, unless `timeout_s` or $MEMKIT_MODEL_TIMEOUT says."""


def _model_timeout(given: float | None) -> float:
    """`timeout_s`, else $MEMKIT_MODEL_TIMEOUT (seconds), else 30 s; refused unless a positive number."""
    source = "timeout_s"
    if given is None:
        text = os.environ.get("MEMKIT_MODEL_TIMEOUT")
        if not text:
            return DEFAULT_MODEL_TIMEOUT_S
        source = "MEMKIT_MODEL_TIMEOUT"
        try:
            given = float(text)
        except ValueError:
            raise ModelError(f"MEMKIT_MODEL_TIMEOUT is {text!r}; give the live model's timeout in seconds, "
                             "e.g. 30") from None
    if isinstance(given, bool) or not isinstance(given, (int, float)) or not 0 < given <= 3600:
        raise ModelError(f"{source} is {given!r}; give the live model's timeout in seconds (more than 0, "
                         "at most 3600)")
    return float(given)


class OpenAIModel:
    """A live model behind any OpenAI-compatible chat-completions endpoint.

    Reads `OPENAI_API_KEY`, `OPENAI_MODEL` and (optional) `OPENAI_BASE_URL` unless given, and never
    falls back to a fixture. `timeout_s` bounds one call (default $MEMKIT_MODEL_TIMEOUT, else 30 s).
    Close it with `await model.aclose()` or `async with`.

    Raises:
        ModelError: no credentials, no `openai` package, a bad timeout; or, naming the endpoint, a
            failed call (an HTTP error, no answer in time, no connection, a reply that is not a chat
            completion: an HTML page, an empty body, tool-call arguments as a JSON object).
    """

    def __init__(self, model: str | None = None, *, api_key: str | None = None, base_url: str | None = None,
                 timeout_s: float | None = None) -> None:
        api_key = api_key or os.environ.get("OPENAI_API_KEY")
        chosen = model or os.environ.get("OPENAI_MODEL")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.timeout_s = _model_timeout(timeout_s)
        if not api_key:
            raise ModelError("OPENAI_API_KEY is not set: live mode needs a key (the fixture model needs none)")
        if not chosen:
            raise ModelError("OPENAI_MODEL is not set: live mode needs a model name, e.g. OPENAI_MODEL=gpt-4o-mini")
        self.model: str = chosen
        try:
            import openai
        except ImportError:
            raise ModelError(f"live mode needs the openai package: {install_hint('live')}") from None
        from openai.types.chat import ChatCompletion

        self._openai, self._completion_type = openai, ChatCompletion
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=self.timeout_s, max_retries=0)
        self.endpoint = str(self.client.base_url).rstrip("/") + "/chat/completions"
        """Where the calls go (no key in it), for messages."""
        if "content" not in inspect.signature(self.client.post).parameters:
            raise ModelError(f"live mode needs openai 2.16 or later (found {openai.__version__}), which can send "
                             f"a request body as it was measured: {install_hint('live')}")
        # What goes in front of the measured body's keys (ASCII: json.dumps escapes the rest).
        self._body_prefix = ('{"model":' + json.dumps(self.model) + ",").encode("ascii")

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """Send one chat-completions request (as canonical JSON, like the budget wrapper's) and convert the answer."""
        return await self.complete_encoded(canonical_json({"messages": messages, "tools": tools}), messages, tools)

    async def _send(self, pending: Any) -> ModelReply:
        """Await a chat-completions call and convert its answer; any failure is a ModelError."""
        openai = self._openai
        where = self.endpoint
        try:
            response = await pending
        except openai.APITimeoutError as exc:
            raise ModelError(f"the live model call failed: {where} gave no answer within {self.timeout_s:g} s; "
                             "try again later, or give it longer with MEMKIT_MODEL_TIMEOUT (seconds)") from exc
        except openai.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            detail = str(body["message"]) if isinstance(body.get("message"), str) else exc.message
            raise ModelError(f"the live model call failed: {where} answered HTTP {exc.status_code}: "
                             f"{_shown(detail)}") from exc
        except openai.APIConnectionError as exc:
            raise ModelError(f"the live model call failed: cannot connect to {where} "
                             f"({_shown(str(exc.__cause__ or exc))})") from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"the live model call failed: {where}: {_shown(str(exc))}") from exc
        except UnicodeEncodeError as exc:
            raise _not_unicode(exc.reason, exc.start) from None
        except ValueError as exc:  # the body was not JSON at all (an empty body): json's own error
            raise ModelError(f"the live model at {where} answered with a body that is not JSON ({exc}); "
                             "is it an OpenAI-compatible chat-completions endpoint?") from exc
        return _reply_of(response, where)

    async def complete_encoded(self, body: str, messages: list[dict[str, Any]],
                               tools: list[dict[str, Any]]) -> ModelReply:
        """Send a request the budget wrapper has already encoded, as it is: what was measured is sent.

        `body` is the canonical JSON of `{"messages": ..., "tools": ...}`; the model's name goes in
        front of its keys. Endpoints refuse an empty tools list, so that key is left out (the
        measurement counted it: it errs on the large side).
        """
        if not tools and body.endswith(_EMPTY_TOOLS):
            body = body[: -len(_EMPTY_TOOLS)] + "}"
        try:
            content = self._body_prefix + body[1:].encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _not_unicode(exc.reason, exc.start + 1) from None
        return await self._send(self.client.post("/chat/completions", cast_to=self._completion_type, content=content))

    @property
    def closed(self) -> bool:
        """Whether the HTTP client has been closed."""
        return self.client.is_closed()

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.client.close()

    async def __aenter__(self) -> OpenAIModel:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
