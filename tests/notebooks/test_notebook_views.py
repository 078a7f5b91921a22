"""Headless tests of classroom: the views (budget explorer, confirm form, user switcher) and the
isolation scans.
"""

from __future__ import annotations

import json

import pytest
import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)

from memkit import Approvals, FixtureModel, MemoryAgent, MemoryStore, ScriptedModel
from memkit.errors import ValidationError
from memkit.models import call
from classroom import (
    BudgetExplorer,
    ConfirmForm,
    UserSwitcher,
    approvals_table,
    confirm_from_form,
    conversation_rows,
    cross_user_scan,
    run_sync,
    scan_requests,
    tool_results_table,
    what_user_sees,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_budget_explorer_slider_reruns_and_redraws(demo):
    explorer = BudgetExplorer(lambda budget: conversation_rows(demo, "alice", budget), 6000)
    first_png = bytes(explorer.image.value)
    assert first_png.startswith(PNG_MAGIC) and "refused: 0" in explorer.summary.value
    explorer.slider.value = 2400  # what dragging the slider does
    assert explorer.rows[0]["budget"] == 2400
    assert bytes(explorer.image.value) != first_png and "refused: 0" not in explorer.summary.value
    assert explorer.rows == conversation_rows(demo, "alice", 2400)
    bundle = explorer._repr_mimebundle_()
    assert bundle["text/plain"] == "BudgetExplorer(budget slider 1000-16000)"
    assert "application/vnd.jupyter.widget-view+json" in bundle


def test_confirm_from_form_makes_one_confirmation_or_explains(demo):
    approvals = Approvals("widget")
    assert confirm_from_form(approvals, "put", "preference", "drink", "tea") == {
        "ok": True, "id": "widget#1", "allows": "save preference 'drink' = 'tea'"}
    assert confirm_from_form(approvals, "delete", "preference", " city ")["id"] == "widget#2"
    bad = confirm_from_form(approvals, "put", "preference", "Bad Key", "tea")
    assert not bad["ok"] and "key 'Bad Key' is not allowed" in bad["error"]
    assert not confirm_from_form(approvals, "put", "secret", "drink", "tea")["ok"]
    assert not confirm_from_form(approvals, "rename", "preference", "drink")["ok"]
    assert [c.id for c in approvals.pending] == ["widget#1", "widget#2"]


def test_confirm_form_click_lets_the_agent_save_exactly_once(demo):
    approvals = Approvals("widget")
    form = ConfirmForm(approvals, "put")
    form.kind.value, form.key.value, form.value.value = "preference", "drink", "green tea"
    form.button.click()
    assert "widget#1" in form.status.value and "waiting" in form.table.value
    model = ScriptedModel([call("memory_put", kind="preference", key="drink", value="green tea"),
                           call("memory_put", kind="preference", key="drink", value="green tea"), "done"])
    agent = MemoryAgent(demo, "alice", "s2", model, approvals=approvals)
    reply = run_sync(agent.ask("save it twice"))
    outcomes = [r["outcome"]["ok"] for r in reply.tool_results]
    assert outcomes == [True, False] and "already used" in reply.tool_results[1]["outcome"]["error"]
    assert demo.history("alice", "preference", "drink")[-1]["confirmation"] == "widget#1"
    assert list(approvals_table(approvals)["state"]) == ["spent"]
    table = tool_results_table(reply.tool_results)
    assert list(table["ok"]) == [True, False] and list(table.columns)[-1] == "result or error"


def test_confirm_form_for_delete_and_a_refused_click(demo):
    form = ConfirmForm(Approvals("widget"), "delete")
    form.key.value = "NOT OK"
    form.button.click()
    assert form.last is not None and not form.last["ok"] and "#b71c1c" in form.status.value
    form.key.value = "city"
    form.button.click()
    assert form.last == {"ok": True, "id": "widget#1", "allows": "delete preference 'city'"}
    with pytest.raises(ValidationError):
        ConfirmForm(Approvals(), "rename")


def test_scan_requests_finds_values_in_json_inside_strings():
    requests = [{"messages": [{"role": "user",
                               "content": json.dumps({"retrieved_memory": [{"value": "Café \"Oslo\""}]})}],
                 "tools": []},
                {"messages": [{"role": "tool", "content": "nothing"}], "tools": []}]
    frame = scan_requests(requests, {"escaped": 'café "oslo"', "absent": "espresso"})
    assert list(frame["hits"]) == [1, 0] and frame.loc[0, "in requests"] == "1"
    assert list(frame["memory"]) == ["escaped", "absent"]
    assert list(frame["requests scanned"]) == [2, 2]


def test_each_users_agent_sees_only_that_users_values(demo):
    alice = what_user_sees(demo, "alice", "What do I drink, and in which city?")
    bob = what_user_sees(demo, "bob", "What do I drink, and in which city?")
    assert {m["value"] for m in alice["retrieved"]} >= {"jasmine tea", "Lisbon"}
    assert {m["value"] for m in bob["retrieved"]} == {"espresso", "Oslo"}
    assert "espresso" not in alice["answer"] and "jasmine" not in bob["answer"]


def test_user_switcher_dropdown_runs_the_chosen_users_agent(demo):
    switcher = UserSwitcher(demo, "What do I drink?")
    assert switcher.seen["user"] == "alice" and "jasmine tea" in switcher.view.value
    switcher.dropdown.value = "bob"
    assert switcher.seen == what_user_sees(demo, "bob", "What do I drink?")
    assert "espresso" in switcher.view.value and "jasmine" not in switcher.view.value


def test_cross_user_scan_finds_nothing_foreign_and_would_find_a_leak(demo):
    models = {"alice": FixtureModel(), "bob": FixtureModel()}
    for user, model in models.items():
        run_sync(MemoryAgent(demo, user, "s1", model).ask("What do I drink, and where do I live?"))
    clean = cross_user_scan(demo, {user: m.requests for user, m in models.items()})
    assert len(clean) == 3 + 2 and clean["hits"].sum() == 0
    assert set(clean.loc[clean["requests of"] == "alice", "value"]) == {"espresso", "Oslo"}
    # The same scan over a request that did carry Bob's value reports it.
    leaked = [{"messages": [{"role": "tool", "content": json.dumps({"ok": True, "result": "espresso"})}]}]
    found = cross_user_scan(demo, {"alice": leaked}, roles=("tool",))
    assert found.loc[found["value"] == "espresso", "hits"].item() == 1
    assert cross_user_scan(demo, {}).empty


def test_views_show_a_failure_instead_of_stale_data(demo, tmp_path):
    with MemoryStore(tmp_path / "other.sqlite3") as other:
        other.put("alice", "s0", "preference", "drink", "tea")
        other.put("bob", "s0", "preference", "drink", "coffee")
        switcher = UserSwitcher(other, "What do I drink?")
        explorer = BudgetExplorer(lambda budget: conversation_rows(other, "alice", budget), 6000)
    # The store is closed now: a choice must say so, not keep showing alice's data under bob's name.
    switcher.dropdown.value = "bob"
    assert "cannot show bob" in switcher.view.value and "closed" in switcher.view.value
    assert "tea" not in switcher.view.value and switcher.seen == {}
    explorer.slider.value = 3000
    assert "budget 3000" in explorer.summary.value and explorer.rows == []
