"""Headless tests of the notebook widgets and the plain functions behind them.

Real store files under tmp_path; clicks are simulated with `Button.click()` and slider/dropdown
moves by setting `.value`, which runs the same handlers a browser would.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("pandas")
pytest.importorskip("matplotlib")

from memkit import Approvals, FakeClock, FixtureModel, MemoryAgent, MemoryStore, ScriptedModel  # noqa: E402
from memkit.models import call
from memkit.errors import ApprovalError, StoreError, ValidationError  # noqa: E402
from memkit.widgets import (  # noqa: E402
    BudgetExplorer,
    ConfirmForm,
    MemoryInspector,
    UserSwitcher,
    approvals_table,
    budget_chart,
    budget_summary,
    confirm_from_form,
    conversation_rows,
    cross_user_scan,
    history_table,
    messages_table,
    records_table,
    run_sync,
    scan_requests,
    store_fingerprint,
    tool_results_table,
    what_user_sees,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def demo(tmp_path):
    """Alice and Bob with the same keys and different values, on a fake clock."""
    with MemoryStore(tmp_path / "demo.sqlite3", clock=FakeClock(step_seconds=1)) as store:
        for user, drink, city in (("alice", "jasmine tea", "Lisbon"), ("bob", "espresso", "Oslo")):
            store.put(user, "s0", "preference", "drink", drink)
            store.put(user, "s0", "preference", "city", city)
        store.put("alice", "s0", "episode", "trip.lisbon", "Walked the Alfama hills in May")
        yield store


# -- tables and fingerprints -------------------------------------------------------------------------


def test_records_and_history_tables_have_fixed_columns(demo):
    frame = records_table(demo.records("alice"))
    assert list(frame.columns) == ["kind", "key", "value", "revision", "source_session", "updated_at"]
    assert list(frame["key"]) == ["trip.lisbon", "city", "drink"]
    assert records_table([]).empty and list(records_table([]).columns) == list(frame.columns)
    events = history_table(demo.history("alice", "preference", "drink"))
    assert list(events["action"]) == ["create"] and events.loc[0, "old_value"] == ""


def test_fingerprint_changes_with_content_and_only_then(demo):
    before = store_fingerprint(demo)
    assert before["memories"] == 5 and before["events"] == 5
    assert store_fingerprint(demo) == before
    demo.put("alice", "s1", "preference", "drink", "jasmine tea")  # the same value: a no-op
    assert store_fingerprint(demo) == before
    demo.put("alice", "s1", "preference", "drink", "green tea")
    after = store_fingerprint(demo)
    assert after["sha256"] != before["sha256"] and after["events"] == 6


def test_run_sync_works_inside_a_running_event_loop():
    async def answer():
        return 42

    async def from_a_callback_inside_a_loop():
        return run_sync(answer())  # what a widget callback does in a Jupyter kernel

    assert run_sync(answer()) == 42
    assert asyncio.run(from_a_callback_inside_a_loop()) == 42


# -- 03: budgets -----------------------------------------------------------------------------------------


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


# -- 04: confirmations -------------------------------------------------------------------------------


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


# -- 06: isolation ---------------------------------------------------------------------------------------


def test_scan_requests_finds_values_in_json_inside_strings():
    requests = [{"messages": [{"role": "user", "content": json.dumps({"retrieved_memory": [{"value": "Café \"Oslo\""}]})}],
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


# -- 08: the inspector ------------------------------------------------------------------------------------


def test_inspector_methods_filter_and_show_history(demo):
    inspector = MemoryInspector(demo)
    assert inspector.users() == ["alice", "bob"] and inspector.user == "alice"
    assert list(inspector.set_kind("episode")["key"]) == ["trip.lisbon"]
    assert list(inspector.set_kind("all")["key"]) == ["trip.lisbon", "city", "drink"]
    assert list(inspector.set_query("LIS")["key"]) == ["trip.lisbon", "city"]
    assert inspector.select_user("bob").empty  # the search box still says "LIS"
    assert list(inspector.set_query("")["value"]) == ["Oslo", "espresso"]
    history = inspector.select_key("preference", "drink")
    assert list(history["new_value"]) == ["espresso"]
    assert inspector.state() == {"user": "bob", "kind": "all", "query": "", "selected": "preference:drink",
                                 "staged": None}
    with pytest.raises(ValidationError):
        inspector.set_kind("secret")


def test_inspector_changes_nothing_until_confirm_and_records_the_confirmation(demo):
    inspector = MemoryInspector(demo)
    inspector.select_key("preference", "drink")
    before = store_fingerprint(demo)
    staged = inspector.stage_edit("green tea")
    assert staged["written"] is False and "'jasmine tea' -> 'green tea'" in staged["staged"]
    assert store_fingerprint(demo) == before
    assert inspector.cancel() == {"cancelled": staged["staged"], "written": False}
    with pytest.raises(ApprovalError, match="nothing is staged"):
        inspector.confirm()
    assert store_fingerprint(demo) == before

    inspector.stage_edit("green tea")
    done = inspector.confirm()
    assert done == {"done": "edit", "kind": "preference", "key": "drink", "confirmation": "inspector#1",
                    "revision": 2}
    assert demo.get("alice", "preference", "drink")["value"] == "green tea"
    last = inspector.history().iloc[-1]
    assert (last["action"], last["confirmation"], last["session"]) == ("update", "inspector#1", "inspector")
    with pytest.raises(ApprovalError):
        inspector.confirm()  # a confirmation covers one change, once

    inspector.stage_delete()
    assert inspector.confirm()["confirmation"] == "inspector#2"
    assert demo.get("alice", "preference", "drink") is None
    assert list(inspector.history()["action"]) == ["create", "update", "delete"]
    assert [c.id for c in inspector.approvals.spent] == ["inspector#1", "inspector#2"]
    assert inspector.approvals.pending == []


def test_inspector_refuses_a_stale_staged_change(demo, tmp_path):
    inspector = MemoryInspector(demo)
    inspector.select_key("preference", "city")
    inspector.stage_edit("Porto")
    # Someone else (another process) changes the record between staging and the click.
    script = ("import sys; from memkit import MemoryStore; "
              "MemoryStore(sys.argv[1]).put('alice', 'other', 'preference', 'city', 'Faro', confirmation='cli#1')")
    subprocess.run([sys.executable, "-c", script, str(demo.path)], check=True)
    with pytest.raises(ApprovalError, match="changed since it was staged"):
        inspector.confirm()
    assert demo.get("alice", "preference", "city")["value"] == "Faro"
    assert inspector.staged is None and inspector.approvals.pending == []


def test_inspector_refuses_bad_edits(demo):
    inspector = MemoryInspector(demo)
    with pytest.raises(ValidationError, match="select a user and a key"):
        inspector.stage_edit("x")
    inspector.select_key("preference", "drink")
    with pytest.raises(ValidationError, match="already holds"):
        inspector.stage_edit("jasmine tea")
    with pytest.raises(ValidationError, match="at most 512"):
        inspector.stage_edit("x" * 600)
    inspector.select_key("preference", "nothing")
    with pytest.raises(ValidationError, match="does not exist"):
        inspector.stage_delete()


def test_inspector_widget_drives_the_same_methods(demo):
    inspector = MemoryInspector(demo)
    inspector.widget  # build it, as displaying it would
    c = inspector.controls
    assert "jasmine tea" in c["records"].value and c["confirm"].disabled
    c["user"].value = "bob"
    assert "espresso" in c["records"].value and "jasmine" not in c["records"].value
    c["kind"].value = "episode"
    assert "no records match" in c["records"].value
    c["kind"].value = "all"
    c["query"].value = "osl"
    assert "Oslo" in c["records"].value and "espresso" not in c["records"].value
    c["query"].value = ""
    c["key"].value = "preference:drink"
    assert "espresso" in c["history"].value
    c["value"].value = "ristretto"
    c["stage_edit"].click()
    assert not c["confirm"].disabled and "not written yet" in c["status"].value
    assert demo.get("bob", "preference", "drink")["value"] == "espresso"
    c["confirm"].click()
    assert demo.get("bob", "preference", "drink")["value"] == "ristretto"
    assert "inspector#1" in c["status"].value and "inspector#1" in c["history"].value
    assert c["confirm"].disabled
    c["confirm"].click()  # nothing staged: refused on screen, not raised into the frontend
    assert "nothing is staged" in c["status"].value
    c["stage_delete"].click()
    c["cancel"].click()
    assert demo.get("bob", "preference", "drink") is not None
    c["stage_delete"].click()
    c["confirm"].click()
    assert demo.get("bob", "preference", "drink") is None
    assert "preference:drink" in c["key"].options  # a deleted key keeps its history in view
    assert "delete" in c["history"].value
    assert inspector._repr_mimebundle_()["text/plain"] == "MemoryInspector(user='bob', kind='all', query='')"


def test_inspector_opens_a_path_and_closes_what_it_opened(demo, tmp_path):
    with pytest.raises(StoreError, match="there is no database"):
        MemoryInspector(tmp_path / "missing.sqlite3")
    assert not (tmp_path / "missing.sqlite3").exists()
    inspector = MemoryInspector(demo.path)
    assert inspector.users() == ["alice", "bob"]
    inspector.close()
    with pytest.raises(StoreError, match="closed"):
        inspector.store.connection
    shared = MemoryInspector(demo)
    shared.close()
    assert demo.users() == {"alice": 3, "bob": 2}  # a store passed in stays open


def test_missing_extra_names_the_install_command():
    script = ("import sys; sys.modules['ipywidgets'] = None\n"
              "from memkit import Approvals\nfrom memkit.widgets import ConfirmForm\n"
              "try:\n    ConfirmForm(Approvals())\nexcept ImportError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert "pip install 'memkit[notebooks]'" in out


def test_importing_memkit_widgets_does_not_import_the_extras():
    script = "import sys, memkit.widgets; print(sorted({'ipywidgets', 'pandas', 'matplotlib'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_messages_table_shows_calls_and_shortens_content(demo):
    model = ScriptedModel([call("memory_search", query="drink"), "done"])
    run_sync(MemoryAgent(demo, "alice", "s1", model).ask("What do I drink?"))
    frame = messages_table(model.requests[1]["messages"], max_chars=80)
    assert list(frame["role"]) == ["system", "user", "assistant", "tool"]
    assert frame.loc[2, "content"] == 'memory_search {"query": "drink"}'
    assert len(frame.loc[0, "content"]) == 80 and "shortened" in frame.loc[0, "content"]
    assert frame.loc[3, "content"].startswith('{"ok":true,"result":[')


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


def test_inspector_on_an_empty_database_explains_instead_of_failing(tmp_path):
    with MemoryStore(tmp_path / "empty.sqlite3") as store:
        inspector = MemoryInspector(store)
        inspector.widget  # build it, as displaying it would
        assert inspector.user is None and inspector.table().empty and inspector.history().empty
        assert "no records match" in inspector.controls["records"].value
        inspector.controls["stage_delete"].click()
        assert "select a user and a key first" in inspector.controls["status"].value
