"""The budget wrapper's cost per request, against sending the request unmeasured.

Sending a request means building its messages and encoding them with the tool schemas as JSON;
that is the baseline, and nothing can send without paying it. The wrapper adds `fit()`: measuring
the request and, when it is over budget, trimming it. The target is an overhead under 10% of the
encoding. Two cases: a typical agent turn that fits, and one over budget that must drop history.
"""

from __future__ import annotations

import copy
import dataclasses
import tempfile
from pathlib import Path
from typing import Any

from memkit.agent import SYSTEM_PROMPT
from memkit.budget import BudgetedModel, Request, canonical_json
from memkit.models import ScriptedModel, call
from memkit.store import MemoryStore
from memkit.tools import tool_schemas

from .timing import rotated, run_batch, summarize


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


def run(config: BudgetConfig, log: Any = print) -> dict[str, Any]:
    tools = _tools()
    typical = make_request(tools)
    size = len(encode(typical))
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    # (case, budget): the typical request fits; the tight budget forces four history exchanges out.
    cases = [("request fits", size + 1000), ("over budget: trims history", size - 1500)]
    for case, budget in cases:
        wrapper = BudgetedModel(ScriptedModel([]), budget_chars=budget)
        contenders = {
            "encode only (unmeasured)": lambda req: encode(req),
            "budget wrapper fit()": lambda req, w=wrapper: w.fit(req),
        }
        samples: dict[str, list[float]] = {name: [] for name in contenders}
        for r in range(config.rounds):
            # Fresh copies: fit() trims in place. The copies share the tools list, as agent turns do.
            base = make_request(tools, r)
            for name in rotated(list(contenders), r):
                items = [(copy.deepcopy(base),) for _ in range(config.requests_per_round)]
                for (req,) in items:
                    req.tools = tools
                per_call, _ = run_batch(contenders[name], items, None)
                samples[name].append(per_call)
            if len(wrapper.measurements) > 10_000:
                wrapper.measurements.clear()
        for name, times in samples.items():
            rows.append({"case": case, "contender": name, **summarize(times)})
        # Correctness: the measured size is the size of what would be sent, and the result fits.
        probe = make_request(tools, 99)
        measurement = wrapper.fit(probe)
        checks.append({"case": case, "measured_equals_encoded": measurement.total_chars == len(encode(probe)),
                       "sent": measurement.sent, "trimmed": len(measurement.trimmed)})
        medians = {name: summarize(t)["median_s"] for name, t in samples.items()}
        log(f"    {case:<28} " + "  ".join(f"{n} {m * 1e6:7.1f} us" for n, m in medians.items()))
    return {"rows": rows, "checks": checks, "request_chars": size}
