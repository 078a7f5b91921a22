"""The teacher's solution of notebook 12's capstone: a build whose four parts meet the brief.

Rules that hold beyond the week (a mood is not lasting, a yes covers one exact value, closed
tickets stay out of a request, forget every trace at once). The checks do not need it: they run
the student's part beside `capstone.STAND_INS`. `make handout` leaves this file out of the
student's copy and keeps it in the teacher's; tests/notebooks/test_capstone.py judges it right.
"""

from __future__ import annotations

from typing import Any

from .capstone import Build


def worth_remembering(proposal: dict[str, Any]) -> bool:
    """Keep tickets and preferences about how to serve the customer; a mood is how they feel
    today, not a lasting fact, even when they ask to keep it."""
    return proposal["kind"] == "episode" or proposal["key"] != "mood"


def customer_confirmed(proposal: dict[str, Any], said_yes: list[tuple[str, str, str]]) -> bool:
    """Confirmed only when the customer said yes to this exact kind, key and value: a value they
    corrected ("phone", then "email") or declined (ben's city) is not confirmed."""
    return (proposal["kind"], proposal["key"], proposal["value"]) in said_yes


def for_ticket(question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The customer's preferences and open tickets: closed tickets do not help with an open one,
    and they would push the request over the budget."""
    return [r for r in records if r["kind"] == "preference" or not r["value"].startswith("closed")]


def forget_customer(store: Any, user: str) -> None:
    """Every trace at once: records, history, transcript, proposals and the store's own window."""
    store.forget_user(user)


REFERENCE: Build = {"remember": worth_remembering, "confirm": customer_confirmed,
                    "retrieve": for_ticket, "forget": forget_customer}
"""The teacher's solution of the exercise (notebook 12's folded Solution cell names it)."""
