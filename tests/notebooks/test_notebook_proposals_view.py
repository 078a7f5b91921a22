"""Headless tests of the proposals panel: `decide` on a real SQLite store, and the panel's buttons,
clicked with `Button.click()` (the same handlers a browser runs), driving the same function.
"""

from __future__ import annotations

import asyncio

import pytest
import _notebook_demo  # noqa: F401  (skips this module without the notebook extra)

from memkit import FixtureModel, MemoryAgent
from classroom import ProposalsPanel, decide, pending_table


def _events(store, user, key):
    return [(e["action"], e["new_value"], e["confirmation"]) for e in store.history(user, "preference", key)]


def test_the_agent_proposes_and_decide_approves_with_the_proposal_in_the_history(demo):
    agent = MemoryAgent(demo, "alice", "s1", FixtureModel(), unconfirmed="propose")
    reply = asyncio.run(agent.ask("I moved to Porto"))
    assert "NOT saved" in reply.tool_results[0]["outcome"]["result"]["message"]
    assert demo.get("alice", "preference", "city")["value"] == "Lisbon"  # nothing saved yet
    [waiting] = demo.proposals("alice")
    assert pending_table(demo, "alice").to_dict("records") == [{
        "id": waiting["id"], "proposed": "save preference city = 'Porto'", "against": "rev 1: 'Lisbon'",
        "note": "", "session": "s1"}]
    result = decide(demo, "alice", waiting["id"], "approve")
    assert result == {"ok": True, "decision": "approved", "proposal": waiting["id"],
                      "what": "save preference city = 'Porto'", "revision": 2,
                      "confirmation": f"proposal#{waiting['id']} approved via notebook"}
    assert _events(demo, "alice", "city")[-1] == ("update", "Porto", f"proposal#{waiting['id']} approved via notebook")
    assert demo.proposals("alice") == []


def test_reject_leaves_memory_alone(demo):
    proposal = demo.propose_put("alice", "s1", "preference", "drink", "coffee")
    before = _events(demo, "alice", "drink")
    result = decide(demo, "alice", proposal["id"], "reject", origin="widget")
    assert result == {"ok": True, "decision": "rejected", "proposal": proposal["id"],
                      "what": "save preference drink = 'coffee'"}
    assert _events(demo, "alice", "drink") == before
    assert demo.proposals("alice", pending_only=False)[0]["decided_by"] == "widget"


def test_a_stale_proposal_is_refused_and_changes_nothing(demo):
    proposal = demo.propose_put("alice", "s1", "preference", "city", "Porto")
    demo.put("alice", "s2", "preference", "city", "Faro")  # the record changed since
    before = _events(demo, "alice", "city")
    result = decide(demo, "alice", proposal["id"], "approve")
    assert result["ok"] is False and result["reason"] == "stale"
    assert "changed since; nothing was changed" in result["error"] and "\n" not in result["error"]
    assert _events(demo, "alice", "city") == before
    assert pending_table(demo, "alice")["note"].tolist() == ["stale"]
    assert decide(demo, "alice", proposal["id"], "reject")["ok"]  # a stale one may be rejected


def test_a_decided_proposal_and_another_users_id_are_refused(demo):
    proposal = demo.propose_put("alice", "s1", "preference", "drink", "coffee")
    assert decide(demo, "alice", proposal["id"], "approve")["ok"]
    again = decide(demo, "alice", proposal["id"], "approve")
    assert (again["ok"], again["reason"]) == (False, "decided") and "already approved" in again["error"]
    assert decide(demo, "alice", proposal["id"], "reject")["reason"] == "decided"
    bobs = demo.propose_put("bob", "s1", "preference", "drink", "tea")
    foreign = decide(demo, "alice", bobs["id"], "approve")
    assert (foreign["ok"], foreign["reason"]) == (False, "unknown")
    assert demo.get("bob", "preference", "drink")["value"] == "espresso"
    assert [p["status"] for p in demo.proposals("bob")] == ["pending"]


@pytest.mark.parametrize("proposal_id, decision, reason", [
    (0, "approve", "invalid"), ("1", "approve", "invalid"), (1, "accept", "invalid"), (999, "reject", "unknown"),
])
def test_bad_input_is_one_clear_line(demo, proposal_id, decision, reason):
    result = decide(demo, "alice", proposal_id, decision)
    assert (result["ok"], result["reason"]) == (False, reason) and result["error"]


def test_buttons_drive_decide_and_the_panel_reads_the_store_again(demo):
    porto = demo.propose_put("alice", "s1", "preference", "city", "Porto")
    coffee = demo.propose_put("alice", "s1", "preference", "drink", "coffee")
    demo.propose_put("bob", "s1", "preference", "drink", "tea")
    panel = ProposalsPanel(demo, "alice", origin="panel")
    assert sorted(panel.buttons) == [porto["id"], coffee["id"]]  # never bob's
    approve, _ = panel.buttons[porto["id"]]
    approve.click()
    assert panel.last["ok"] and panel.last["confirmation"] == f"proposal#{porto['id']} approved via panel"
    assert _events(demo, "alice", "city")[-1][2] == f"proposal#{porto['id']} approved via panel"
    assert "approved" in panel.status.value and sorted(panel.buttons) == [coffee["id"]]
    _, reject = panel.buttons[coffee["id"]]
    reject.click()
    assert panel.last["decision"] == "rejected" and demo.get("alice", "preference", "drink")["value"] == "jasmine tea"
    assert panel.buttons == {} and "nothing is waiting" in panel.rows.children[0].value
    reject.click()  # a button of a proposal already decided: refused, one line, nothing changed
    assert panel.last["reason"] == "decided" and "refused (decided)" in panel.status.value
    assert repr(panel) == "ProposalsPanel(user='alice', origin='panel')"
    assert "application/vnd.jupyter.widget-view+json" in panel._repr_mimebundle_()


def test_a_button_decided_elsewhere_or_on_a_closed_store_shows_one_line(tmp_path, demo):
    proposal = demo.propose_put("alice", "s1", "preference", "drink", "coffee")
    panel = ProposalsPanel(demo, "alice")
    assert decide(demo, "alice", proposal["id"], "approve", origin="cli")["ok"]  # decided elsewhere
    panel.buttons[proposal["id"]][0].click()
    assert panel.last["reason"] == "decided" and "by cli" in panel.status.value
    panel.refresh_button.click()
    assert panel.buttons == {}
    waiting = demo.propose_put("alice", "s1", "preference", "city", "Porto")
    panel.refresh()
    approve = panel.buttons[waiting["id"]][0]
    demo.close()
    approve.click()  # the store closed under the panel: one line, no traceback
    assert panel.last["reason"] == "store" and "is closed" in panel.status.value and panel.buttons == {}
    panel.refresh()
    assert "cannot read the proposals" in panel.status.value


def test_an_expired_proposal_is_refused_then_may_be_rejected(tmp_path):
    from memkit import FakeClock, Limits, MemoryStore

    clock = FakeClock()
    with MemoryStore(tmp_path / "ttl.sqlite3", clock=clock, limits=Limits(proposal_ttl_seconds=60)) as store:
        proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
        clock.advance(61)
        assert pending_table(store, "alice")["note"].tolist() == ["expired"]
        result = decide(store, "alice", proposal["id"], "approve")
        assert (result["ok"], result["reason"]) == (False, "expired") and "expired at" in result["error"]
        assert store.get("alice", "preference", "city") is None
        assert decide(store, "alice", proposal["id"], "reject")["decision"] == "rejected"


def test_an_embedding_view_switches_the_panel_to_another_user(demo):
    from memkit.errors import ValidationError

    alices = demo.propose_put("alice", "s1", "preference", "drink", "coffee")
    bobs = demo.propose_put("bob", "s1", "preference", "drink", "tea")
    panel = ProposalsPanel(demo, "alice")
    panel.show_user("bob")
    assert sorted(panel.buttons) == [bobs["id"]] and "bob" in panel.title.value
    with pytest.raises(ValidationError):
        panel.show_user("not\ta user")  # a control character: ids are any visible text now
    assert panel.user == "bob"
    assert panel.approve(alices["id"])["reason"] == "unknown"  # bob's panel cannot decide alice's
    assert demo.proposals("alice")[0]["status"] == "pending"


def test_decide_and_the_panel_on_every_backend(backend, store):
    """The same decisions on SQLite and PostgreSQL: approve, stale refused, decided refused."""
    store.put("carol", "s0", "preference", "city", "Lisbon")
    porto = store.propose_put("carol", "s1", "preference", "city", "Porto")
    braga = store.propose_put("carol", "s2", "preference", "city", "Braga")
    panel = ProposalsPanel(store, "carol")
    panel.buttons[porto["id"]][0].click()
    assert panel.last["revision"] == 2 and store.get("carol", "preference", "city")["value"] == "Porto"
    assert store.history("carol", "preference", "city")[-1]["confirmation"] == (
        f"proposal#{porto['id']} approved via notebook")
    assert pending_table(store, "carol")["note"].tolist() == ["stale"]
    panel.buttons[braga["id"]][0].click()
    assert panel.last["reason"] == "stale" and store.get("carol", "preference", "city")["revision"] == 2
    assert decide(store, "carol", porto["id"], "approve")["reason"] == "decided"
    panel.buttons[braga["id"]][1].click()
    assert panel.last["decision"] == "rejected" and panel.buttons == {}


def test_an_approval_over_the_quota_is_refused_and_the_proposal_still_waits(tmp_path):
    from memkit import Limits, MemoryStore

    with MemoryStore(tmp_path / "quota.sqlite3", limits=Limits(max_records_per_user=1)) as store:
        store.put("alice", "s0", "preference", "drink", "tea")
        proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
        result = decide(store, "alice", proposal["id"], "approve")
        assert (result["ok"], result["reason"]) == (False, "quota") and "\n" not in result["error"]
        assert store.get("alice", "preference", "city") is None
        assert [p["status"] for p in store.proposals("alice")] == ["pending"]
