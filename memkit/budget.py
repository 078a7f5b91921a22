"""The budget wrapper: every model request measured as canonical JSON and trimmed to a budget, or refused.

Everything is measured the same way: the number of code points of the canonical JSON (sorted keys,
no spaces, non-ASCII kept as is). That is a stand-in for tokens that anyone can recompute exactly.
Asked for a token budget too (`budget_tokens=`, the `tokens` extra), the wrapper also counts the
same JSON's tokens with a real tokenizer (`memkit.tokens`) and trims until both budgets hold.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any
from collections.abc import Callable

from .errors import BudgetError
from .jsonutil import canonical_json
from .limits import DEFAULT_LIMITS, Limits, check_positive, positive_or_default
from .request import ChatModel, Request
from .tokens import DEFAULT_ENCODING, Tokenizer, get_tokenizer


@dataclasses.dataclass
class Measurement:
    """One request as measured before it was sent (or refused). Read it; do not change it.

    `total_chars` is the length of the request's canonical JSON; `parts` breaks it down (system,
    tools, memory, history, tool_rounds, task and envelope) and adds up to it, counted when first
    read (the budget decision needs the total only). `tokens` and `budget_tokens` are None unless
    the wrapper counts tokens or has a token budget.
    """

    call: int
    total_chars: int
    budget_chars: int
    trimmed: list[dict[str, Any]]
    packing: list[dict[str, Any]]
    sent: bool
    _count_parts: Callable[[], dict[str, int]] = dataclasses.field(repr=False, compare=False)
    tokens: int | None = None
    budget_tokens: int | None = None

    @functools.cached_property
    def parts(self) -> dict[str, int]:
        """The size of each part of the request, in characters of its canonical JSON."""
        return self._count_parts()

    def row(self) -> dict[str, Any]:
        """A flat row for a table or a plot."""
        tokens = {} if self.tokens is None else {"tokens": self.tokens, "budget_tokens": self.budget_tokens}
        return {"call": self.call, **self.parts, "total": self.total_chars, "budget": self.budget_chars,
                **tokens, "trimmed": len(self.trimmed), "sent": self.sent}


@dataclasses.dataclass
class PreparedRequest:
    """A request fitted to the budget: its measurement, its messages, and `body`, the canonical JSON
    of `{"messages": messages, "tools": tools}` that was measured (its length is the total)."""

    measurement: Measurement
    messages: list[dict[str, Any]]
    body: str


class BudgetedModel:
    """Wraps any model: measures every real request and trims it to the budget, or refuses it.

    Trimming order: the oldest history exchanges, then retrieved records (lowest ranked first),
    then whole old tool exchanges (a call and its results together, never a result alone). When the
    newest exchange still does not fit, `BudgetError` is raised and the model is not called. Every
    measurement, sent or refused, is kept in `measurements`; a model with `complete_encoded` (the
    live model) is sent the very text that was measured. With `budget_tokens` the request must also
    fit that many tokens of the same JSON, counted by `tokenizer` (an encoding name or a
    `memkit.tokens.Tokenizer`, default o200k_base; the `tokens` extra); a `tokenizer` alone only counts.

    Example:
        >>> model = BudgetedModel(ScriptedModel(["hi"]), budget_chars=16000)   # doctest: +SKIP
        >>> reply = await model.complete(request)                                # doctest: +SKIP
    """

    def __init__(self, model: ChatModel, budget_chars: int | None = None, limits: Limits = DEFAULT_LIMITS, *,
                 budget_tokens: int | None = None, tokenizer: str | Tokenizer | None = None) -> None:
        self.model = model
        self.budget_chars = positive_or_default("budget_chars", budget_chars, limits.request_budget_chars)
        self.measurements: list[Measurement] = []
        self.budget_tokens = None if budget_tokens is None else check_positive("budget_tokens", budget_tokens)
        self.tokenizer: Tokenizer | None = None
        if budget_tokens is not None or tokenizer is not None:
            self.tokenizer = (tokenizer if isinstance(tokenizer, Tokenizer)
                              else get_tokenizer(tokenizer or DEFAULT_ENCODING))

    def measure(self, request: Request) -> tuple[int, dict[str, int]]:
        """The canonical JSON size of `{"messages": ..., "tools": ...}` and its parts."""
        encoded = request.encode()
        return len(encoded.body), encoded.parts()

    def _trim_one(self, request: Request, trimmed: list[dict[str, Any]], budget: str = "") -> bool:
        """Take the next item off `request`, noting it in `trimmed` with the `budget` ("" or "token ")
        it was over; False when nothing is left to trim."""
        over = f"request over {budget}budget"
        if request.history:
            item = request.history.pop(0)
            trimmed.append({"part": "history", "what": item["user"][:40], "chars": len(canonical_json(item)),
                            "reason": f"oldest history exchange, {over}"})
        elif request.memory:
            record = request.memory.pop()
            trimmed.append({"part": "memory", "what": f"{record['kind']}:{record['key']}",
                            "chars": len(canonical_json(record)),
                            "reason": f"lowest-ranked retrieved record, {over}"})
            request.mark_packing(record["kind"], record["key"], "trimmed", over)
        elif len(request.tool_rounds) > 1:
            exchange = request.tool_rounds.pop(0)
            names = [c["function"]["name"] for c in exchange[0].get("tool_calls", [])]
            trimmed.append({"part": "tool_rounds", "what": "+".join(names), "chars": len(canonical_json(exchange)),
                            "reason": f"oldest whole tool exchange, {over}"})
        else:
            return False
        return True

    def prepare(self, request: Request) -> PreparedRequest:
        """Fit `request` to the budget: measure, trim one item, measure again, until it fits or nothing
        is left to trim. Returns the measurement, the messages and `body`, the text measured last."""
        trimmed: list[dict[str, Any]] = []
        encoded = request.encode()
        tools_json = encoded.tools_json  # trimming never touches the tools: encode them once
        # One encoding per trimmed item: tens of microseconds, against a model call of hundreds of
        # milliseconds (docs/design/budget.md).
        while len(encoded.body) > self.budget_chars and self._trim_one(request, trimmed):
            encoded = request.encode(tools_json)
        sent = len(encoded.body) <= self.budget_chars
        tokens = None
        if self.tokenizer is not None:
            tokens = self.tokenizer.count(encoded.body)
            if self.budget_tokens is not None:
                while sent and tokens > self.budget_tokens and self._trim_one(request, trimmed, "token "):
                    encoded = request.encode(tools_json)
                    tokens = self.tokenizer.count(encoded.body)
                sent = sent and tokens <= self.budget_tokens
        # The rows are shared with the request and later measurements, not copied: none is changed in place.
        measurement = Measurement(len(self.measurements) + 1, len(encoded.body), self.budget_chars, trimmed,
                                  list(request.packing), sent=sent, _count_parts=encoded.parts,
                                  tokens=tokens, budget_tokens=self.budget_tokens)
        self.measurements.append(measurement)
        return PreparedRequest(measurement, encoded.messages, encoded.body)

    async def complete(self, request: Request) -> Any:
        """Fit `request` to the budget and send it; refuse with BudgetError when it cannot fit."""
        prepared = self.prepare(request)
        measurement = prepared.measurement
        if not measurement.sent and measurement.tokens is not None and measurement.total_chars <= self.budget_chars:
            raise BudgetError(
                f"the request needs {measurement.tokens} tokens even after trimming history, memory and old "
                f"tool exchanges; the token budget is {self.budget_tokens}. The model was not called"
            )
        if not measurement.sent:
            raise BudgetError(
                f"the request needs {measurement.total_chars} characters even after trimming history, memory "
                f"and old tool exchanges; the budget is {self.budget_chars}. The model was not called"
            )
        complete_encoded = getattr(self.model, "complete_encoded", None)
        if complete_encoded is not None:
            return await complete_encoded(prepared.body, prepared.messages, request.tools)
        return await self.model.complete(prepared.messages, request.tools)

    @property
    def largest_request(self) -> int:
        """The largest request sent so far, in characters (0 if none)."""
        return max((m.total_chars for m in self.measurements if m.sent), default=0)
