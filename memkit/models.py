"""The models the agent talks to: scripted fixtures that need nothing, and a live OpenAI-compatible client.

All of them speak chat-completions messages and answer with a `ModelReply`. Fixtures record every
request they receive, so a notebook or a test can look at exactly what a model was shown.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import itertools
import json
import os
import re
from typing import Any, Union
from collections.abc import Callable, Iterable

from .errors import ModelError


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


ScriptStep = Union[ModelReply, str, Callable[[list[dict[str, Any]]], ModelReply]]


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


REMEMBER_RULE = re.compile(r"remember (?:that )?my ([a-z][a-z0-9_ .:-]*?) is (.+?)\.?$", re.I)
"""The fixture's explicit phrase for saving a preference ("remember my KEY is VALUE"); the goldfish
agent of `memkit.lab` follows the same one."""
_EPISODE = re.compile(r"note (?:the )?episode ([a-z][a-z0-9_.:-]*): (.+?)$", re.I)
_FORGET = re.compile(r"^forget (?:about )?(?:my )?(episode )?([a-z][a-z0-9 _.:-]*?)$", re.I)
# "My ticket number is T-4471": a fact told in the conversation, not a request to save it.
_TOLD = re.compile(r"^my ([a-z][a-z0-9 _-]*?) is (.+?)[.!]?$", re.I)
# "What was my ticket number?": a question the recent conversation may answer.
_ASKED = re.compile(r"^what(?:'s| is| was) my ([a-z][a-z0-9 _-]*?)\??$", re.I)

PROFILE_KEYS = ("city", "drink", "name", "diet", "language", "pet", "food", "allergy")
"""The stable facts about a person that the fixture proposes to keep when it is told them plainly
("My city is Lisbon"); any other "my THING is VALUE" (a ticket number) stays in the conversation."""

_KEYS = "|".join(PROFILE_KEYS)
STATEMENTS: tuple[tuple[re.Pattern[str], str | None], ...] = (
    (re.compile(rf"^my (?:favou?rite |usual )?(?P<key>{_KEYS}) is (?P<value>.+)$", re.I), None),
    (re.compile(r"^i (?:now )?(?:live|am living|'m living) in (?P<value>.+)$", re.I), "city"),
    (re.compile(r"^i(?:'ve| have| just)? moved to (?P<value>.+)$", re.I), "city"),
    (re.compile(r"^i(?:'m| am) (?:a )?(?P<value>vegetarian|vegan|pescatarian)$", re.I), "diet"),
    (re.compile(r"^i(?:'m| am) allergic to (?P<value>.+)$", re.I), "allergy"),
    (re.compile(r"^(?:you can |please )?call me (?P<value>.+)$", re.I), "name"),
    (re.compile(r"^i (?:usually )?drink (?P<value>.+)$", re.I), "drink"),
    (re.compile(r"^i speak (?P<value>.+)$", re.I), "language"),
)
"""What the fixture understands as a stable fact worth keeping: (pattern, preference key); a key of
None comes from the pattern's `key` group. Each pattern reads a whole statement."""

ONE_OFF = re.compile(r"\b(?:this time|just this once|for now|today|tonight|this week|right now|"
                     r"for this (?:answer|reply|question|chat))\b", re.I)
"""Words that make a request a one-off ("answer in French this time"): nothing to remember."""

_REMEMBER_THAT = re.compile(r"^remember (?:that )?(?P<rest>.+)$", re.I)
_FORGET_CITY = re.compile(r"^forget (?:where i live|my address)$", re.I)
_POLITE = re.compile(r"^(?:please|ok|okay|so|btw|by the way|oh|hi|hello)[,!]?\s+", re.I)
_STOPWORDS = {"a", "an", "the", "that", "my", "i", "is", "am", "to", "on", "in", "at", "of", "was"}


def _key(text: str) -> str:
    return "_".join(text.strip().lower().split())


def _clean(value: str) -> str:
    """A value as the person meant it: no trailing punctuation, quotes or "now"."""
    value = value.strip().rstrip(".!").strip()
    value = re.sub(r"\s+now$", "", value, flags=re.I)
    return value.strip("\"'").strip()


def _statement(text: str) -> tuple[str, str] | None:
    """The (key, value) of a preference a plain statement tells, by the table `STATEMENTS`."""
    for pattern, key in STATEMENTS:
        if match := pattern.match(text):
            value = _clean(match.group("value"))
            if value:
                return (key or _key(match.group("key"))), value
    return None


def propose(task: str) -> tuple[str, dict[str, str]] | None:
    """The memory tool call the fixture model proposes for what the person said, or None.

    Deterministic, and small on purpose (a table of patterns, not a language model):

    - an explicit request: "remember my KEY is VALUE", "remember that I live in Lisbon", "remember
      that the dentist moved to Friday" (an episode), "note episode KEY: VALUE";
    - a plain statement of a stable fact, by `STATEMENTS`: "My city is Lisbon", "I live in Lisbon",
      "I moved to Porto", "I'm vegetarian", "call me Sam";
    - a request to forget: "forget my city", "forget where I live", "forget episode KEY";
    - a one-off instruction ("answer in French this time") proposes nothing, nor does a question.

    Returns:
        (tool name, arguments) for `memory_put` or `memory_delete`, or None.

    Example:
        >>> propose("I moved to Porto")
        ('memory_put', {'kind': 'preference', 'key': 'city', 'value': 'Porto'})
    """
    text = _POLITE.sub("", " ".join(task.split())).rstrip("?.! ")
    text = re.sub(r",?\s+please$", "", text, flags=re.I)
    if not text or task.strip().endswith("?"):
        return None
    if match := REMEMBER_RULE.match(text):
        return "memory_put", {"kind": "preference", "key": _key(match.group(1)), "value": _clean(match.group(2))}
    if match := _EPISODE.match(text):
        return "memory_put", {"kind": "episode", "key": match.group(1).lower(), "value": _clean(match.group(2))}
    if _FORGET_CITY.match(text):
        return "memory_delete", {"kind": "preference", "key": "city"}
    if match := _FORGET.match(text):
        kind = "episode" if match.group(1) else "preference"
        return "memory_delete", {"kind": kind, "key": _key(match.group(2))}
    if match := _REMEMBER_THAT.match(text):
        rest = match.group("rest")
        if told := _statement(rest):
            return "memory_put", {"kind": "preference", "key": told[0], "value": told[1]}
        words = [w for w in re.findall(r"[a-z0-9]+", rest.lower()) if w not in _STOPWORDS][:3]
        if words and words[0][0].isalpha():
            value = _clean(rest)
            return "memory_put", {"kind": "episode", "key": "note." + "-".join(words),
                                  "value": value[:1].upper() + value[1:]}
        return None
    if ONE_OFF.search(text):
        return None
    if told := _statement(text):
        return "memory_put", {"kind": "preference", "key": told[0], "value": told[1]}
    return None


class FixtureModel(RecordingModel):
    """A rule-following stand-in for a real model, so the kit runs with no credentials.

    Rules, on the task of the user message:
      - what `propose` understands (an explicit "remember ...", a plain statement of a stable fact
        such as "My city is Lisbon" or "I moved to Porto", "forget my KEY") is proposed as a
        `memory_put` or `memory_delete` call; a one-off instruction is not;
      - "my THING is VALUE" about anything else (a ticket number) is acknowledged: it lives in the
        conversation, not in long-term memory;
      - "what was my THING?" is answered from the recent history when a user turn there said
        "my THING is VALUE" (the newest such turn);
      - anything else is answered from the retrieved memory in the user message.
    After tool results it reports them. Proposing is all it can do: the tools decide.
    """

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """A reply by the rules above."""
        return self._numbered(self._reply(messages, tools))

    def _reply(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        self._record(messages, tools)
        if messages[-1]["role"] == "tool":
            return say(" ".join(self._report(json.loads(m["content"])) for m in messages if m["role"] == "tool"))
        envelope = user_envelope(messages)
        task = envelope["task"].strip()
        if proposed := propose(task):
            return call(proposed[0], proposed[1])
        if ONE_OFF.search(task) and not task.endswith("?"):
            return say("Understood, for this time only: nothing to remember.")
        if match := _TOLD.search(task):
            return say(f"Noted: your {match.group(1).strip()} is {match.group(2).strip()}.")
        if (match := _ASKED.search(task)) and (told := _recall(envelope.get("recent_history") or [], match.group(1))):
            return say(f"From our conversation: your {match.group(1).strip()} is {told}.")
        memory = envelope.get("retrieved_memory") or []
        if not memory:
            return say("I have nothing in memory about that yet.")
        facts = "; ".join(f"{m['kind']} {m['key']} = {m['value']}" for m in memory)
        return say(f"From memory: {facts}.")

    @staticmethod
    def _report(outcome: dict[str, Any]) -> str:
        if not outcome.get("ok"):
            return f"I could not do that: {outcome.get('error')}."
        result = outcome.get("result")
        if isinstance(result, dict) and "revision" in result:
            return f"Saved {result['kind']} {result['key']} = {result['value']} (revision {result['revision']})."
        if isinstance(result, dict) and "deleted" in result:
            return "Deleted." if result["deleted"] else "There was nothing to delete."
        if isinstance(result, dict) and result.get("status") == "waiting_for_approval":
            # As a model should: say it waits for the person, never that it was done.
            return f"I have proposed this; it waits for your approval: {result['proposed']}."
        return f"Result: {json.dumps(result, ensure_ascii=False)}."


def _recall(history: list[dict[str, str]], thing: str) -> str | None:
    """The value the user last gave for `thing` in the recent history ("my THING is VALUE"), if any."""
    wanted = " ".join(thing.lower().split())
    for exchange in reversed(history):
        told = _TOLD.search(exchange.get("user", "").strip())
        if told and " ".join(told.group(1).lower().split()) == wanted:
            return told.group(2).strip()
    return None


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

    Reads `OPENAI_API_KEY`, `OPENAI_MODEL` and (optional) `OPENAI_BASE_URL` unless given. Fails at
    construction when a key or model name is missing: it never falls back to a fixture. Close it
    with `await model.aclose()` or `async with`.

    Every failure of a call is a `ModelError` that names the endpoint: an HTTP error status, no
    answer within the timeout, a connection refused, and a reply that is not a chat completion (an
    HTML page, an empty body, tool-call arguments sent as a JSON object instead of a JSON string).

    Args:
        timeout_s: how long one call may take, in seconds; default $MEMKIT_MODEL_TIMEOUT, else 30.

    Raises:
        ModelError: no credentials, no `openai` package, a bad timeout, or a failed call.
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
            raise ModelError("live mode needs the openai package: pip install 'memkit[live]'") from None
        from openai.types.chat import ChatCompletion

        self._openai, self._completion_type = openai, ChatCompletion
        self.client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=self.timeout_s, max_retries=0)
        self.endpoint = str(self.client.base_url).rstrip("/") + "/chat/completions"
        """Where the calls go (no key in it), for messages."""
        if "content" not in inspect.signature(self.client.post).parameters:
            raise ModelError(f"live mode needs openai 2.16 or later (found {openai.__version__}), which can send "
                             "a request body as it was measured: pip install 'memkit[live]'")
        # What goes in front of the measured body's keys (ASCII: json.dumps escapes the rest).
        self._body_prefix = ('{"model":' + json.dumps(self.model) + ",").encode("ascii")

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        """Send one chat-completions request and convert the answer."""
        return await self._send(self.client.chat.completions.create(
            model=self.model, messages=messages, **({"tools": tools} if tools else {})))  # type: ignore[call-overload]

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
            raise ModelError(f"the live model call failed: {where} answered HTTP {exc.status_code}: {_shown(detail)}") from exc
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
