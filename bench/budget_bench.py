"""The budget wrapper's cost per request, against sending the request unmeasured.

The request is a typical agent turn: the second model call of a task, carrying the retrieved
memory, the recent history and two tool round trips, of which the older one was measured at the
previous call (the wrapper caches message sizes by identity) and the newest is new. A second case
shows every message new to the wrapper; a third, a request over budget that must drop history.

Sending a request means building its messages and encoding them with the tool schemas as JSON;
that is the baseline, and nothing can send without paying it. The wrapper adds `prepare()` (what
`complete()` runs before the model call): measuring the request and, when it is over budget,
trimming it; it hands back the messages to send. The overhead is the difference between the two
contenders' medians, and the target is under 10% of the encoding. Two cases: a typical agent turn that fits, and one over budget that must drop history.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.agent import SYSTEM_PROMPT
from memkit.budget import BudgetedModel, Request, canonical_json
from memkit.models import ScriptedModel, call
from memkit.store import MemoryStore
from memkit.tools import tool_schemas

from .timing import summarize


@dataclasses.dataclass
class BudgetConfig:
    rounds: int = 7
    requests_per_round: int = 300


def _tools() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "schemas.sqlite3") as store:
        return tool_schemas(store)


def make_request(tools: list[dict[str, Any]], turn: int = 0) -> Request:
    """A typical agent turn: 8 retrieved records, 8 history exchanges, two tool round trips."""
    memory = [{"kind": "preference" if i < 4 else "episode", "key": f"topic.{i}",
               "value": f"I prefer green tea in the morning and quiet hotels near the station ({turn}.{i})"}
              for i in range(8)]
    history = [{"user": f"Can you plan the trip to Lisbon for the conference, step {i} of turn {turn}? " * 2,
                "assistant": f"Here is step {i}: book the aisle seat, the quiet hotel, and a table for two. " * 2}
               for i in range(8)]
    exchanges = []
    for i in range(2):
        reply = call("memory_search", query=f"hotel {i}")
        message = reply.as_message()
        result = {"ok": True, "result": [{"kind": "episode", "key": f"trip.{i}",
                                          "value": "stayed at a quiet hotel by the lake"}]}
        exchanges.append([message, {"role": "tool", "tool_call_id": reply.tool_calls[0].id,
                                    "content": canonical_json(result)}])
    return Request(system=SYSTEM_PROMPT, task=f"Plan my stay in Lisbon, turn {turn}", tools=tools,
                   memory=memory, history=history, exchanges=exchanges)


def encode(request: Request) -> str:
    """What sending costs without the wrapper: the messages, encoded with the tools as JSON."""
    return canonical_json({"messages": request.messages(), "tools": request.tools})


def send_through(wrapper: BudgetedModel, request: Request) -> str:
    """What `BudgetedModel.complete` does before the model call: fit, then encode what it sends."""
    _, messages = wrapper.prepare(request)
    return canonical_json({"messages": messages, "tools": request.tools})


def run(config: BudgetConfig, log: Any = print) -> dict[str, Any]:
    tools = _tools()
    typical = make_request(tools)
    size = len(encode(typical))
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    # (case, budget, warm): an agent turn fits; every message is new to the wrapper; the tight
    # budget forces history exchanges out.
    cases = [("agent turn, fits", size + 1000, True), ("cold: every message new, fits", size + 1000, False),
             ("agent turn, over budget: trims history", size - 1500, True)]
    for case, budget, warm in cases:
        wrapper = BudgetedModel(ScriptedModel([]), budget_chars=budget)
        contenders = {
            "encode only (unmeasured)": encode,
            "budget wrapper + encode": lambda req, w=wrapper: send_through(w, req),
        }
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        names = list(contenders)
        for r in range(config.rounds):
            # Fresh copies: prepare() trims in place. The copies share the tools list, as agent turns do.
            base = make_request(tools, r)
            wrapper.measure(base)  # the call before this one measured the older exchange
            pairs = []
            for _ in range(config.requests_per_round):
                pair = (copy.deepcopy(base), copy.deepcopy(base))
                for req in pair:
                    req.tools = tools
                    if warm:
                        # In the loop a request carries the earlier exchanges' very message objects,
                        # already measured (and cached by identity); only the newest one is new.
                        req.exchanges[0] = base.exchanges[0]
                pairs.append(pair)
            # A difference of a few µs between calls of ~150 µs would drown in the machine's noise,
            # so the two contenders are interleaved call by call (order alternating), and a round's
            # figure is the median call, which a preempted call or two cannot move.
            times: dict[str, list[float]] = {name: [] for name in names}
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                for i, pair in enumerate(pairs):
                    for name, req in zip(names if i % 2 else names[::-1], pair):
                        started = time.perf_counter()
                        contenders[name](req)
                        times[name].append(time.perf_counter() - started)
            finally:
                if gc_was_enabled:
                    gc.enable()
            for name in names:
                samples[name].append(statistics.median(times[name]))
            if len(wrapper.measurements) > 10_000:
                wrapper.measurements.clear()
        for name, times in samples.items():
            rows.append({"case": case, "contender": name, **summarize(times)})
        # Correctness: the measured size is the size of what would be sent, and the result fits.
        probe = make_request(tools, 99)
        twin = copy.deepcopy(probe)
        twin.tools = tools
        measurement, _ = wrapper.prepare(probe)
        sent_text = send_through(BudgetedModel(ScriptedModel([]), budget_chars=budget), twin)
        checks.append({"case": case, "measured_equals_encoded": measurement.total_chars == len(encode(probe)),
                       "sent_equals_unmeasured": sent_text == encode(probe),
                       "sent": measurement.sent, "trimmed": len(measurement.trimmed)})
        medians = {name: summarize(t)["median_s"] for name, t in samples.items()}
        log(f"    {case:<28} " + "  ".join(f"{n} {m * 1e6:7.1f} us" for n, m in medians.items()))
    return {"rows": rows, "checks": checks, "request_chars": size}
