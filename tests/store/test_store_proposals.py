"""Proposals: what the model proposed, kept for a person to approve or reject, on every backend.

The store keeps a proposal apart from the memories; approving applies exactly it through the same
transaction as any write, and a stale, expired, decided, foreign or unknown proposal changes nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from _store_helpers import open_store, snapshot
from memkit.clock import FakeClock
from memkit.errors import ApprovalError, ProposalError, QuotaError, ValidationError
from memkit.limits import Limits
from memkit.store import MemoryStore

pytestmark = pytest.mark.usefixtures("backend")  # the conformance suite: every test on every backend

TABLES = ("memories", "memory_events", "user_counts", "transcript", "proposals")


def everything(store: MemoryStore) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, proposals included: equal values mean nothing was written."""
    return snapshot(store, TABLES)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(step_seconds=1)


@pytest.fixture
def store(tmp_path, clock):
    limits = Limits(max_pending_proposals_per_user=3, proposal_ttl_seconds=3600)
    with open_store(tmp_path / "memory.sqlite3", clock=clock, limits=limits) as opened:
        yield opened


def test_a_proposal_is_kept_and_nothing_is_saved(store):
    proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
    assert {k: proposal[k] for k in ("action", "kind", "key", "value", "against_value", "against_revision",
                                     "session", "status", "expired", "stale", "new")} == {
        "action": "put", "kind": "preference", "key": "city", "value": "Porto", "against_value": None,
        "against_revision": None, "session": "s1", "status": "pending", "expired": False, "stale": False,
        "new": True}
    assert store.get("alice", "preference", "city") is None and store.records("alice") == []
    assert store.history("alice", "preference", "city") == []
    listed = store.proposals("alice")
    assert [p["id"] for p in listed] == [proposal["id"]] and listed[0]["age_seconds"] >= 1
    assert store.proposals("bob") == []


def test_the_same_proposal_twice_is_the_first_one(store):
    first = store.propose_put("alice", "s1", "preference", "city", "Porto")
    before = everything(store)
    again = store.propose_put("alice", "s2", "preference", "city", "Porto")
    assert again["id"] == first["id"] and again["new"] is False
    assert everything(store) == before
    other = store.propose_put("alice", "s1", "preference", "city", "Lisbon")
    assert other["id"] != first["id"] and len(store.proposals("alice")) == 2


def test_approving_applies_exactly_the_proposal_and_the_history_names_it(store):
    store.put("alice", "s0", "preference", "city", "Oslo")
    proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
    assert (proposal["against_value"], proposal["against_revision"]) == ("Oslo", 1)
    done = store.approve("alice", proposal["id"], origin="cli")
    assert done["record"]["value"] == "Porto" and done["record"]["revision"] == 2
    assert done["record"]["source_session"] == "s1"  # where the value came from, not where it was approved
    assert done["proposal"]["status"] == "approved" and done["proposal"]["decided_by"] == "cli"
    assert store.get("alice", "preference", "city") == done["record"]
    last = store.history("alice", "preference", "city")[-1]
    assert (last["action"], last["old_value"], last["new_value"], last["confirmation"]) == (
        "update", "Oslo", "Porto", f"proposal#{proposal['id']} approved via cli")
    assert store.proposals("alice") == []
    assert [p["status"] for p in store.proposals("alice", pending_only=False)] == ["approved"]


def test_approving_a_delete_deletes_and_keeps_the_proposal_in_the_history(store):
    store.put("alice", "s0", "episode", "trip", "went to Porto")
    proposal = store.propose_delete("alice", "s1", "episode", "trip")
    assert proposal["value"] is None and proposal["against_value"] == "went to Porto"
    assert store.get("alice", "episode", "trip") is not None  # proposing deletes nothing
    assert store.approve("alice", proposal["id"], origin="inspector")["deleted"] is True
    assert store.get("alice", "episode", "trip") is None
    last = store.history("alice", "episode", "trip")[-1]
    assert (last["action"], last["session"], last["confirmation"]) == (
        "delete", "s1", f"proposal#{proposal['id']} approved via inspector")


def test_nothing_to_propose_is_refused_and_keeps_nothing(store):
    store.put("alice", "s0", "preference", "city", "Porto")
    before = everything(store)
    with pytest.raises(ValidationError, match="already holds exactly this value"):
        store.propose_put("alice", "s1", "preference", "city", "Porto")
    with pytest.raises(ValidationError, match="nothing to delete"):
        store.propose_delete("alice", "s1", "preference", "name")
    with pytest.raises(ValidationError, match="kind 'secret' is unknown"):
        store.propose_put("alice", "s1", "secret", "city", "Porto")
    with pytest.raises(ValidationError, match="value is blank"):
        store.propose_put("alice", "s1", "preference", "city", "  ")
    assert everything(store) == before


def test_a_decided_proposal_cannot_be_decided_again(store):
    approved = store.propose_put("alice", "s1", "preference", "city", "Porto")
    store.approve("alice", approved["id"], origin="cli")
    rejected = store.propose_put("alice", "s1", "preference", "name", "Sam")
    assert store.reject("alice", rejected["id"], origin="cli")["status"] == "rejected"
    assert store.get("alice", "preference", "name") is None
    before = everything(store)
    for decide in (store.approve, store.reject):
        with pytest.raises(ProposalError, match=f"proposal {approved['id']} .* was already approved") as refused:
            decide("alice", approved["id"], origin="cli")
        assert refused.value.reason == "decided"
        with pytest.raises(ApprovalError, match=f"proposal {rejected['id']} .* was already rejected"):
            decide("alice", rejected["id"], origin="cli")
    assert everything(store) == before


@pytest.mark.parametrize("change", ["update", "delete", "create and delete"])
def test_a_stale_proposal_is_refused_and_changes_nothing(store, change):
    if change != "create and delete":
        store.put("alice", "s0", "preference", "city", "Oslo")
    proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
    if change == "update":
        store.put("alice", "s2", "preference", "city", "Lisbon")
    elif change == "delete":
        store.delete("alice", "preference", "city")
    else:  # absent when proposed, absent again now: still changed in between
        store.put("alice", "s2", "preference", "city", "Lisbon")
        store.delete("alice", "preference", "city")
    assert store.proposals("alice")[0]["stale"] is True
    before = everything(store)
    with pytest.raises(ApprovalError, match="has changed since; nothing was changed") as refused:
        store.approve("alice", proposal["id"], origin="cli")
    assert isinstance(refused.value, ProposalError) and refused.value.reason == "stale"
    assert everything(store) == before
    assert store.reject("alice", proposal["id"], origin="cli")["status"] == "rejected"  # a person may clear it


def test_an_expired_proposal_is_refused_and_stops_counting(store, clock):
    proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
    clock.advance(3600)
    assert store.proposals("alice")[0]["expired"] is True
    before = everything(store)
    with pytest.raises(ProposalError, match=r"expired at .*nothing was changed") as refused:
        store.approve("alice", proposal["id"], origin="cli")
    assert refused.value.reason == "expired"
    assert everything(store) == before
    again = store.propose_put("alice", "s1", "preference", "city", "Porto")
    assert again["id"] != proposal["id"] and again["new"] is True  # not the expired one again
    for n in range(2):  # the expired one takes no room: three may wait beside it
        store.propose_put("alice", "s1", "preference", f"k{n}", "v")
    assert len(store.proposals("alice")) == 4


def test_unknown_and_foreign_ids_get_the_same_refusal(store):
    mine = store.propose_put("alice", "s1", "preference", "city", "Porto")
    before = everything(store)
    for decide in (store.approve, store.reject):
        for user, number in (("bob", mine["id"]), ("alice", mine["id"] + 1000)):
            with pytest.raises(ProposalError, match=f"user '{user}' has no proposal {number} ") as refused:
                decide(user, number, origin="cli")
            assert refused.value.reason == "unknown"
        for bad in (0, -1, "1", 1.0, True, None):
            with pytest.raises(ValidationError, match="not a proposal id"):
                decide("alice", bad, origin="cli")  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="origin"):
            decide("alice", mine["id"], origin="the cli;\nDROP TABLE")
    assert everything(store) == before
    assert store.proposals("alice")[0]["status"] == "pending"


def test_waiting_proposals_are_bounded_per_user(store):
    made = [store.propose_put("alice", "s1", "preference", f"k{n}", "v") for n in range(3)]
    before = everything(store)
    with pytest.raises(QuotaError, match="user 'alice' has 3 proposals waiting for a person; at most 3"):
        store.propose_put("alice", "s1", "preference", "k3", "v")
    assert everything(store) == before
    store.propose_put("bob", "s1", "preference", "k0", "v")  # another user has room of their own
    store.reject("alice", made[0]["id"], origin="cli")
    store.propose_put("alice", "s1", "preference", "k3", "v")


def test_decided_proposals_kept_are_bounded_too(store):
    for n in range(20):
        store.reject("alice", store.propose_put("alice", "s1", "preference", "k", f"v{n}")["id"], origin="cli")
    kept = store.proposals("alice", pending_only=False)
    assert len(kept) <= 2 * 3 and kept[-1]["value"] == "v19"
    with pytest.raises(ApprovalError, match="has no proposal 1 "):  # removed long after it was decided
        store.approve("alice", 1, origin="cli")


def test_approving_goes_through_the_quota_like_any_write(tmp_path, clock):
    limits = Limits(max_records_per_user=1)
    with open_store(tmp_path / "quota.sqlite3", clock=clock, limits=limits) as store:
        store.put("alice", "s0", "preference", "drink", "tea")
        proposal = store.propose_put("alice", "s1", "preference", "city", "Porto")
        before = everything(store)
        with pytest.raises(QuotaError, match="per-user quota is 1"):
            store.approve("alice", proposal["id"], origin="cli")
        assert everything(store) == before and store.proposals("alice")[0]["status"] == "pending"
        update = store.propose_put("alice", "s1", "preference", "drink", "coffee")  # an update needs no slot
        assert store.approve("alice", update["id"], origin="cli")["record"]["revision"] == 2


def test_forgetting_a_user_removes_their_proposals_and_only_theirs(store):
    store.put("alice", "s0", "preference", "drink", "tea")
    store.propose_put("alice", "s1", "preference", "city", "Porto")
    store.reject("alice", store.propose_delete("alice", "s1", "preference", "drink")["id"], origin="cli")
    kept = store.propose_put("bob", "s1", "preference", "city", "Oslo")
    assert store.traces("alice")["proposals"] == 2
    assert store.forget_user("alice") == {"records": 1, "events": 1, "transcript": 0, "proposals": 2}
    assert store.traces("alice") == {"records": 0, "events": 0, "transcript": 0, "proposals": 0}
    assert [p["id"] for p in store.proposals("bob")] == [kept["id"]]


def test_export_leaves_proposals_out_and_an_import_makes_a_waiting_one_stale(store, tmp_path, clock):
    store.put("alice", "s0", "preference", "city", "Oslo")
    store.propose_put("alice", "s1", "preference", "city", "Porto")
    bundle = store.export_user("alice")
    assert "Porto" not in bundle
    with open_store(tmp_path / "other.sqlite3", clock=clock) as other:
        waiting = other.propose_put("alice", "s9", "preference", "city", "Lisbon")
        assert other.import_records(bundle) == {"records": 1, "events": 1}
        assert other.proposals("alice")[0]["stale"] is True  # made against no record; there is one now
        with pytest.raises(ApprovalError, match="changed since"):
            other.approve("alice", waiting["id"], origin="cli")
        assert other.get("alice", "preference", "city")["value"] == "Oslo"
