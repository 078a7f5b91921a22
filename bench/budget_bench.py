"""The budget wrapper's cost per request, against sending the request unmeasured.

Sending means encoding the messages and tool schemas as JSON; no client avoids it. The wrapper runs
`prepare()` (what `complete()` runs before the model call): it encodes once, measures, trims when over
budget and hands back the text a wire model sends. Its overhead is the difference of the medians
(target: under 10% of the encoding); a third contender also reads the breakdown by part. Cases: an
agent turn, the first call of a task, and an agent turn over budget that must drop history.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.agent import SYSTEM_PROMPT
from memkit.budget import BudgetedModel
from memkit.jsonutil import canonical_json
from memkit.request import Request
from memkit.models import ScriptedModel, call
from memkit.store import MemoryStore
from memkit.tools import tool_schemas

from .timing import paused_gc, rotated, summarize


@dataclasses.dataclass
class BudgetConfig:
    rounds: int = 7
    requests_per_round: int = 300


def _tools() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as tmp, MemoryStore(Path(tmp) / "schemas.sqlite3") as store:
        return tool_schemas(store)


def make_request(tools: list[dict[str, Any]], turn: int = 0) -> Request:
    """A typical agent turn: 8 retrieved records (and the retrieval report on 12 candidates), 8 history
    exchanges, two tool round trips."""
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
    offered = [{"kind": m["kind"], "key": m["key"], "matched_by": "lisbon", "chars": len(canonical_json(m)),
                "status": "included", "reason": ""} for m in memory]
    offered += [{"kind": "episode", "key": f"older.{i}", "matched_by": "stay", "chars": 180, "status": "skipped",
                 "reason": "would make memory 2377 chars; budget 2200"} for i in range(4)]
    return Request(system=SYSTEM_PROMPT, task=f"Plan my stay in Lisbon, turn {turn}", tools=tools,
                   memory=memory, history=history, tool_rounds=exchanges, packing=offered)


def encode(request: Request) -> str:
    """What sending costs without the wrapper: the messages, encoded with the tools as JSON."""
    return canonical_json({"messages": request.messages(), "tools": request.tools})


def send_through(wrapper: BudgetedModel, request: Request) -> str:
    """What `BudgetedModel.complete` does before the model call: fit, which encodes what is sent."""
    return wrapper.prepare(request).body


def send_and_read_parts(wrapper: BudgetedModel, request: Request) -> str:
    """As `send_through`, and the breakdown by part read too (as a notebook's chart does)."""
    prepared = wrapper.prepare(request)
    _ = prepared.measurement.parts  # counted on first read
    return prepared.body


ENCODE, WRAPPED, WITH_PARTS = ("encode only (unmeasured)", "budget wrapper (its text is sent)",
                               "budget wrapper + parts read")


def run(config: BudgetConfig, log: Any = print) -> dict[str, Any]:
    tools = _tools()
    typical = make_request(tools)
    size = len(encode(typical))
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    # (case, budget, tool exchanges kept)
    cases = [("agent turn, fits", size + 1000, 2), ("first call of a task, fits", size + 1000, 0),
             ("agent turn, over budget: trims history", size - 1500, 2)]
    for case, budget, n_exchanges in cases:
        wrapper = BudgetedModel(ScriptedModel([]), budget_chars=budget)
        contenders = {
            ENCODE: encode,
            WRAPPED: lambda req, w=wrapper: send_through(w, req),
            WITH_PARTS: lambda req, w=wrapper: send_and_read_parts(w, req),
        }
        names = list(contenders)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for r in range(config.rounds):
            # Fresh copies for every call: prepare() trims in place. They share the tools list, as
            # an agent's requests do.
            base = make_request(tools, r)
            del base.tool_rounds[n_exchanges:]
            calls = []
            for _ in range(config.requests_per_round):
                copies = [copy.deepcopy(base) for _ in names]
                for req in copies:
                    req.tools = tools
                calls.append(copies)
            # A difference of a few µs between calls of ~100 µs would drown in the machine's noise,
            # so the contenders are interleaved call by call (order rotating), and a round's figure
            # is the median call, which a preempted call or two cannot move.
            times: dict[str, list[float]] = {name: [] for name in names}
            with paused_gc():
                for i, copies in enumerate(calls):
                    for name, req in zip(rotated(names, i), copies, strict=True):
                        started = time.perf_counter()
                        contenders[name](req)
                        times[name].append(time.perf_counter() - started)
            for name in names:
                samples[name].append(statistics.median(times[name]))
            wrapper.measurements.clear()
        for name, times in samples.items():
            rows.append({"case": case, "contender": name, **summarize(times)})
        # Correctness: the measured size is that of the messages handed over, encoded apart; the text
        # handed to the model is what sending unmeasured would have sent (after any trim).
        probe = make_request(tools, 99)
        del probe.tool_rounds[n_exchanges:]
        prepared = BudgetedModel(ScriptedModel([]), budget_chars=budget).prepare(probe)
        measurement = prepared.measurement
        encoded = canonical_json({"messages": prepared.messages, "tools": probe.tools})
        checks.append({"case": case, "measured_equals_encoded": measurement.total_chars == len(encoded),
                       "sent_equals_unmeasured": prepared.body == encode(probe),
                       "parts_add_up": sum(measurement.parts.values()) == measurement.total_chars,
                       "sent": measurement.sent, "trimmed": len(measurement.trimmed)})
        medians = {name: summarize(t)["median_s"] for name, t in samples.items()}
        log(f"    {case:<40} " + "  ".join(f"{n} {m * 1e6:7.1f} us" for n, m in medians.items()))
    return {"rows": rows, "checks": checks, "request_chars": size}
