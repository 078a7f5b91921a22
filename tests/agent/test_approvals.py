"""One-time confirmations: exact match, one use, clear refusals."""

from __future__ import annotations

import pytest

from memkit import ApprovalError, Approvals, ValidationError


def test_a_confirmation_allows_exactly_one_save_of_that_value():
    approvals = Approvals("cli")
    confirmation = approvals.confirm_put("preference", "drink", "tea")
    assert approvals.find_put("preference", "drink", "tea") is confirmation
    approvals.spend(confirmation)
    with pytest.raises(ApprovalError, match=r"already used"):
        approvals.find_put("preference", "drink", "tea")
    assert approvals.spent == [confirmation] and approvals.pending == []


@pytest.mark.parametrize(
    ("kind", "key", "value", "message"),
    [
        ("preference", "drink", "coffee", "different one"),  # changed value
        ("preference", "food", "tea", "no confirmation"),  # another key
        ("episode", "drink", "tea", "no confirmation"),  # another kind
    ],
)
def test_anything_but_the_confirmed_write_is_refused(kind, key, value, message):
    approvals = Approvals("cli")
    approvals.confirm_put("preference", "drink", "tea")
    with pytest.raises(ApprovalError, match=message):
        approvals.find_put(kind, key, value)
    assert len(approvals.pending) == 1


def test_delete_confirmations_do_not_allow_writes_and_the_reverse():
    approvals = Approvals("widget")
    delete = approvals.confirm_delete("episode", "trip")
    with pytest.raises(ApprovalError):
        approvals.find_put("episode", "trip", "anything")
    assert approvals.find_delete("episode", "trip") is delete
    approvals.confirm_put("preference", "drink", "tea")
    with pytest.raises(ApprovalError):
        approvals.find_delete("preference", "drink")


def test_ids_name_their_origin_and_count_up():
    approvals = Approvals("widget")
    ids = [approvals.confirm_put("preference", f"k{n}", "v").id for n in range(3)]
    assert ids == ["widget#1", "widget#2", "widget#3"]


def test_a_confirmation_the_store_would_refuse_is_refused_at_once():
    with pytest.raises(ValidationError, match="512"):
        Approvals().confirm_put("preference", "drink", "x" * 513)
    with pytest.raises(ValidationError, match="kind"):
        Approvals().confirm_delete("secret", "drink")


def test_waiting_finds_only_an_unspent_exact_confirmation():
    approvals = Approvals("t")
    assert approvals.waiting_put("preference", "drink", "tea") is None
    confirmation = approvals.confirm_put("preference", "drink", "tea")
    assert approvals.waiting_put("preference", "drink", "Tea") is None
    assert approvals.waiting_put("preference", "drink", "tea") is confirmation
    assert approvals.waiting_delete("preference", "drink") is None
    approvals.spend(confirmation)
    assert approvals.waiting_put("preference", "drink", "tea") is None
    delete = approvals.confirm_delete("episode", "trip")
    assert approvals.waiting_delete("episode", "trip") is delete
