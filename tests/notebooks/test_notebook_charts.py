"""Headless tests of classroom: the budget chart and the scripted conversation behind it."""

from __future__ import annotations

import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)

from memkit.models import call
from classroom import budget_chart, budget_summary, conversation_rows


def test_conversation_rows_never_send_over_budget_and_trim_history(demo):
    rows = conversation_rows(demo, "alice", 3600)
    assert len(rows) == 16 and {r["turn"] for r in rows} == set(range(1, 9))
    assert all(r["total"] <= 3600 for r in rows if r["sent"])
    assert sum(r["trimmed"] for r in rows) > 0
    parts = ("system", "tools", "memory", "history", "tool_rounds", "task")
    assert all(sum(r[p] for p in parts) == r["total"] for r in rows)


def test_conversation_rows_refuse_when_the_newest_exchange_cannot_fit(demo):
    rows = conversation_rows(demo, "alice", 2400)
    refused = [r for r in rows if not r["sent"]]
    assert refused and all("the budget is 2400" in r["refused"] for r in refused)
    assert all(r["total"] > 2400 for r in refused)
    assert budget_summary(rows)["refused"] == len(refused)


def test_conversation_rows_are_deterministic(demo):
    first = conversation_rows(demo, "alice", 4000)
    for _ in range(100):  # move the process-wide tool-call counter past another digit
        call("memory_get", kind="preference", key="drink")
    assert conversation_rows(demo, "alice", 4000) == first


def test_budget_chart_draws_a_bar_per_part_per_request_and_the_budget_line(demo):
    rows = conversation_rows(demo, "alice", 2400)
    figure = budget_chart(rows)
    ax = figure.axes[0]
    assert len(ax.get_xticks()) == len(rows)
    assert [line.get_ydata()[0] for line in ax.get_lines()] == [2400]
    labels = ax.get_legend_handles_labels()[1]
    assert "tool schemas" in labels and "refused (not sent)" in labels and "budget 2400" in labels
