"""Notebook 12's capstone: the support desk's week, its agent loop, and one check per requirement.

The student writes the memory wiring of a support agent, four functions (a *build*): what is
worth remembering, when a proposal counts as confirmed by the customer, what to retrieve for a
question, how a customer is forgotten. This module gives the rest: the week of conversations, the
loop that asks the model, and the checks. Each requirement is judged on a week of its own, run
with the student's function for that part and `STAND_INS` for the other three, so a mistake in one
part never fails another part's check; every finding names what happened and why.

The stand-ins are not a solution: each decides by looking the week's own data up (what the brief
calls passing, what each customer said yes to, which tickets the desk closed) and forgets through
the store's `forget_user`, the same facts the checks compare with. The teacher's solution, a build
with rules that hold beyond this week, is `capstone_reference`, which `make handout` leaves out of
the student's copy; nothing here imports it.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memkit import Approvals, BudgetError, FixtureModel, MemkitError, MemoryStore, MemoryTools, StoreWindow
from memkit.agent import SYSTEM_PROMPT
from memkit.budget import BudgetedModel
from memkit.jsonutil import canonical_json
from memkit.request import History, Request

from . import exercises
from .sync import run_sync

BUDGET = 4000
"""Characters per model request, from the desk's brief."""

_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October")


def _closed(prefix: str, first: int, by: str, issues: list[str]) -> list[tuple[str, str]]:
    """One customer's closed tickets, numbered from `first`, one a month from January."""
    return [(f"ticket.{prefix}-{first + n}", f"closed in {month}: {issue}; {by}, customer satisfied, "
             "no further action needed on this ticket")
            for n, (month, issue) in enumerate(zip(_MONTHS, issues, strict=True))]


CLOSED_TICKETS = {
    "ana": _closed("t", 1100, "solved by the help desk", [
        "modem lights blinking orange", "slow Wi-Fi upstairs", "bill sent to the old address",
        "TV box lost its channels", "password reset link expired", "router replaced under warranty",
        "roaming not active abroad", "voicemail PIN forgotten", "SIM card not activated",
        "speed test below contract"]),
    "ben": _closed("q", 8000, "refunded or answered by billing", [
        "invoice in the wrong currency", "direct debit failed once", "discount missing",
        "paper bill still sent", "VAT number missing", "late fee charged in error", "refund took two weeks",
        "card expired", "address change not applied", "contract end date wrong"]),
}
"""The desk's past tickets of each customer, in the store before the week starts (its own notes)."""

MONDAY = {"ana": ["Remember my language is Portuguese",
                  "Note episode ticket.t-4471: router drops every evening",
                  "Remember my mood is grumpy"],
          "ben": ["Remember my channel is phone",
                  "Note episode ticket.q-9082: invoice charged twice",
                  "Remember my channel is email",
                  "My city is Porto"]}
"""What each customer says on Monday; the model proposes a save for each."""

SAID_YES = {"ana": [("preference", "language", "Portuguese"),
                    ("episode", "ticket.t-4471", "router drops every evening"),
                    ("preference", "mood", "grumpy")],
            "ben": [("preference", "channel", "email"),
                    ("episode", "ticket.q-9082", "invoice charged twice")]}
"""What each customer said yes to when the desk read the proposals back (ben corrected his channel
to email, and did not want his city kept)."""

LASTING = {"ana": [("preference", "language", "Portuguese"),
                   ("episode", "ticket.t-4471", "router drops every evening")],
           "ben": [("preference", "channel", "email"),
                   ("episode", "ticket.q-9082", "invoice charged twice")]}
"""What the desk must remember of each: how to serve the customer, and the open ticket."""

PASSING = {"ana": [("preference", "mood", "grumpy")], "ben": []}
"""What a customer said yes to that is not worth keeping: a mood is how she feels today."""

QUESTION = "What do you recall about my ticket?"
"""Tuesday's question of both customers, and ben's again on Wednesday after he was forgotten."""

OPEN_TICKET = {"ana": "router drops every evening", "ben": "invoice charged twice"}

PARTS = ("remember", "confirm", "retrieve", "forget")
"""The four functions of a build, one per requirement."""

REQUIREMENT = {
    "remember": "1 what to remember: lasting facts and open tickets, not a mood",
    "confirm": "2 nothing saved that the customer did not say yes to",
    "retrieve": f"3 Tuesday's ticket recalled, every request within {BUDGET} characters",
    "forget": "4 ben forgotten: records, history, window; ana keeps hers",
}

Build = dict[str, Callable[..., Any]]
"""A build: `remember`, `confirm`, `retrieve` and `forget`, each a function (see notebook 12)."""

_PASSING = {triple for said in PASSING.values() for triple in said}
_SAID_YES = {triple for said in SAID_YES.values() for triple in said}
_CLOSED = {(key, value) for tickets in CLOSED_TICKETS.values() for key, value in tickets}


def _triple(proposal: dict[str, Any]) -> tuple[str, str, str]:
    return proposal["kind"], proposal["key"], proposal["value"]


def _not_passing(proposal: dict[str, Any]) -> bool:
    return _triple(proposal) not in _PASSING


def _said_yes(proposal: dict[str, Any], said_yes: list[tuple[str, str, str]]) -> bool:
    return _triple(proposal) in _SAID_YES  # the week's yeses, whoever's the proposal is


def _not_closed(question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if (r["key"], r["value"]) not in _CLOSED]


def _forget_user(store: Any, user: str) -> None:
    store.forget_user(user)


STAND_INS: Build = {"remember": _not_passing, "confirm": _said_yes, "retrieve": _not_closed,
                    "forget": _forget_user}
"""The three parts a check does not judge: the week's answers looked up (PASSING, the customer's
yes, CLOSED_TICKETS) and the store's forget, so the check needs no solution to run."""


class StudentCodeError(Exception):
    """One of the student's four functions raised: `part` names which, the message what it raised."""

    def __init__(self, part: str, exc: BaseException) -> None:
        super().__init__(f"{part} stopped: {type(exc).__name__}: {exc}")
        self.part = part


def _call(build: Build, part: str, *arguments: Any) -> Any:
    try:
        return build[part](*arguments)
    except Exception as exc:  # the student's code: any failure becomes that part's finding
        raise StudentCodeError(part, exc) from None


def live_model_set() -> bool:
    """True when a live model is set up (`OPENAI_API_KEY` and `OPENAI_MODEL`)."""
    return bool(os.environ.get("OPENAI_API_KEY") and os.environ.get("OPENAI_MODEL"))


def model_line() -> str:
    """One line saying which model the week runs with."""
    if live_model_set():
        return f"The week runs with the live model {os.environ['OPENAI_MODEL']} (OPENAI_MODEL)."
    return ("The week runs with the fixture model (no OPENAI_API_KEY and OPENAI_MODEL set: "
            "see notebook 00 to use a real one).")


async def _session(db: Path, user: str, session: str, messages: Iterable[str], build: Build,
                   live: bool) -> dict[str, Any]:
    """One day of one customer: a newly opened store and a new agent loop, as after a restart."""
    from memkit import OpenAIModel  # the live extra, only when asked for

    model: Any = OpenAIModel() if live else FixtureModel()
    replies: list[dict[str, Any]] = []
    try:
        with MemoryStore(db) as store:
            window = StoreWindow(store)  # the conversation is kept in the store's own file
            tools = MemoryTools(store, user, session, Approvals(f"desk-{session}"), unconfirmed="propose")
            budgeted = BudgetedModel(model, BUDGET, store.limits)
            for message in messages:
                memory = _chosen(build, message, store.records(user))
                history = History(limits=store.limits).view(
                    window.recent(user, session), retired_before=store.retired_before(user))
                request = Request(system=SYSTEM_PROMPT, task=message, tools=tools.schemas,
                                  memory=memory, history=history)
                replies.append({"message": message, "records sent": len(memory),
                                **await _answer(budgeted, tools, request)})
                window.append_exchange(user, session, message, replies[-1]["reply"])
            measured = [{"size": m.total_chars, "trimmed": [t["what"] for t in m.trimmed], "sent": m.sent}
                        for m in budgeted.measurements]
    finally:
        await model.aclose()
    return {"replies": replies, "requests": measured}


def _chosen(build: Build, question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records the build's `retrieve` chose, as a request carries them."""
    chosen = _call(build, "retrieve", question, records)
    try:
        return [{"kind": r["kind"], "key": r["key"], "value": r["value"]} for r in chosen]
    except (TypeError, KeyError) as exc:
        raise StudentCodeError("retrieve", TypeError(
            f"it returned {chosen!r:.60}, not a list of the records it was given")) from exc


async def _answer(model: BudgetedModel, tools: MemoryTools, request: Request) -> dict[str, Any]:
    """The agent loop: ask, run the tool calls the model made, ask again, until it answers."""
    for _ in range(4):
        try:
            reply = await model.complete(request)
        except BudgetError as exc:
            return {"reply": str(exc), "refused": True}
        if not reply.tool_calls:
            return {"reply": reply.content or "", "refused": False}
        results = [{"role": "tool", "tool_call_id": c.id, "content": canonical_json(tools.call(c.name, c.arguments))}
                   for c in reply.tool_calls]
        request.tool_rounds.append([reply.as_message(), *results])
    return {"reply": "", "refused": False}


def _review(store: Any, user: str, build: Build) -> list[tuple[str, str, str]]:
    """After Monday: the desk approves each waiting save worth remembering that the customer
    confirmed, and rejects the rest. Returns the approvals refused as stale."""
    stale = []
    for proposal in store.proposals(user):
        keep = proposal["action"] == "put" and bool(_call(build, "remember", dict(proposal)))
        keep = keep and bool(_call(build, "confirm", dict(proposal), list(SAID_YES[user])))
        try:
            if keep:
                store.approve(user, proposal["id"], origin="desk")
            else:
                store.reject(user, proposal["id"], origin="desk")
        except MemkitError:  # stale: an approval before it changed the key; it stays unsaved
            stale.append((proposal["kind"], proposal["key"], proposal["value"]))
            store.reject(user, proposal["id"], origin="desk")
    return stale


def _saved(store: Any, user: str) -> set[tuple[str, str, str]]:
    """Every (kind, key, value) ever saved for `user` on a proposal's approval, from the history."""
    keys = {(p["kind"], p["key"]) for p in store.proposals(user, pending_only=False)}
    return {(kind, key, event["new_value"]) for kind, key in keys
            for event in store.history(user, kind, key)
            if event["action"] != "delete" and str(event["confirmation"]).startswith("proposal#")}


def _counts(store: Any, user: str) -> dict[str, int]:
    return {**store.traces(user), "window turns": StoreWindow(store).user_turns(user)}


def week(build: Build, folder: Path, *, live: bool = False) -> dict[str, Any]:
    """The brief's week with `build`, in a new file under `folder`: what each day did.

    Monday: both customers talk, the desk reviews the proposals. Tuesday: both ask about their
    ticket. Then ben asks to be forgotten, and on Wednesday asks again.

    Returns:
        `days` (each session's replies and requests), `saved` (what was ever saved per customer),
        `stale` (approvals refused because an earlier one changed the key),
        `before` and `after` (each customer's rows around the forget), `failed` (a
        `StudentCodeError`, or None).
    """
    folder.mkdir(parents=True, exist_ok=True)
    db = Path(tempfile.mkdtemp(dir=folder)) / "week.sqlite3"
    days: dict[tuple[str, str], dict[str, Any]] = {}
    result: dict[str, Any] = {"days": days, "saved": {}, "stale": {}, "before": {}, "after": {},
                              "failed": None}
    with MemoryStore(db) as store:
        for customer, tickets in CLOSED_TICKETS.items():
            for key, value in tickets:
                store.put(customer, "desk", "episode", key, value, confirmation="desk ticket system")
    try:
        for customer, messages in MONDAY.items():
            days[customer, "monday"] = run_sync(_session(db, customer, "monday", messages, build, live))
            with MemoryStore(db) as store:
                result["stale"][customer] = _review(store, customer, build)
        for customer in MONDAY:
            days[customer, "tuesday"] = run_sync(_session(db, customer, "tuesday", [QUESTION], build, live))
        with MemoryStore(db) as store:
            result["saved"] = {c: _saved(store, c) for c in MONDAY}
            result["before"] = {c: _counts(store, c) for c in MONDAY}
            _call(build, "forget", store, "ben")  # ben asked to be forgotten
            result["after"] = {c: _counts(store, c) for c in MONDAY}
        days["ben", "wednesday"] = run_sync(_session(db, "ben", "wednesday", [QUESTION], build, live))
    except StudentCodeError as exc:
        result["failed"] = exc
    return result


def _one(triples: Iterable[tuple[str, str, str]]) -> str:
    return ", ".join(f"{key} = {value!r}" for _, key, value in sorted(triples))


def judge_remember(run: dict[str, Any]) -> tuple[bool, str]:
    """Requirement 1: the lasting facts kept, the passing mood not."""
    kept = {c: {t for t in PASSING[c] if t in run["saved"][c]} for c in MONDAY}
    dropped = {c: {t for t in LASTING[c] if t not in run["saved"][c]} for c in MONDAY}
    problems = [f"remember kept {c}'s {_one(kept[c])}, which she said yes to: a mood is how she "
                "feels today, not a lasting fact; keep preferences and tickets, not moods"
                for c in MONDAY if kept[c]]
    problems += [f"remember dropped {c}'s {_one(dropped[c])}: a preference about how to serve "
                 "the customer, and an open ticket, are worth keeping" for c in MONDAY if dropped[c]]
    return not problems, "; ".join(problems) or "kept " + "; ".join(
        f"{c}: {_one(run['saved'][c])}" for c in MONDAY)


def judge_confirm(run: dict[str, Any]) -> tuple[bool, str]:
    """Requirement 2: every value ever saved was said yes to, and each lasting one was saved."""
    extra = {c: run["saved"][c] - set(SAID_YES[c]) for c in MONDAY}
    missing = {c: {t for t in LASTING[c] if t not in run["saved"][c]} for c in MONDAY}
    problems = [f"confirm approved {c}'s {_one(extra[c])}, which {c} never said yes to: approve "
                "only the exact (kind, key, value) the customer said yes to" for c in MONDAY if extra[c]]
    for c in MONDAY:
        stale = {t for t in missing[c] if t in run["stale"][c]}
        if stale:
            problems.append(f"{c}'s {_one(stale)} could not be saved: an approval before it changed "
                            "the key, so the store refused it as stale")
        if missing[c] - stale:
            problems.append(f"confirm refused {c}'s {_one(missing[c] - stale)}, which {c} said yes to")
    return not problems, "; ".join(problems) or "saved only what each customer said yes to"


def judge_retrieve(run: dict[str, Any]) -> tuple[bool, str]:
    """Requirement 3: Tuesday's replies recall the open ticket, no request trimmed or refused."""
    problems = []
    for c in MONDAY:
        day = run["days"][c, "tuesday"]
        sent = day["replies"][0]["records sent"]
        largest = max(r["size"] for r in day["requests"])
        trimmed = [t for r in day["requests"] for t in r["trimmed"]]
        if day["replies"][0]["refused"] or trimmed:
            outcome = ("refused it" if day["replies"][0]["refused"]
                       else f"trimmed {len(trimmed)} of them to send {largest}")
            problems.append(f"retrieve sent {sent} records for {c}'s question: the request was over "
                            f"the budget of {BUDGET} characters and the budget {outcome}; "
                            "closed tickets do not help with an open one")
        elif OPEN_TICKET[c] not in day["replies"][0]["reply"]:
            problems.append(f"{c}'s reply did not recall {OPEN_TICKET[c]!r}: retrieve left out "
                            "the open ticket the question is about")
    sizes = [r["size"] for c in MONDAY for r in run["days"][c, "tuesday"]["requests"]]
    return not problems, "; ".join(problems) or f"both recalled their ticket, largest request {max(sizes)}"


def judge_forget(run: dict[str, Any]) -> tuple[bool, str]:
    """Requirement 4: ben has no row left anywhere; ana's rows are as before."""
    left = {part: n for part, n in run["after"]["ben"].items() if n}
    ana_lost = {part: (run["before"]["ana"][part], n) for part, n in run["after"]["ana"].items()
                if n != run["before"]["ana"][part]}
    wednesday = run["days"]["ben", "wednesday"]["replies"][0]["reply"]
    problems = []
    if left:
        why = {"records": "his records", "events": "a delete keeps the history",
               "transcript": "his archived conversation", "proposals": "his waiting and decided proposals",
               "window turns": "the window in the store's file keeps his recent turns"}
        problems.append("forget left ben's " + ", ".join(f"{part} ({n}: {why[part]})" for part, n in left.items())
                        + "; forget every trace of the customer at once")
    if ana_lost:
        problems.append("forget changed ana's rows too (" + ", ".join(
            f"{part} {was} -> {now}" for part, (was, now) in ana_lost.items())
            + "): forget only the customer who asked")
    if not left and OPEN_TICKET["ben"] in wednesday:
        problems.append("ben's Wednesday reply still recalled his ticket")
    return not problems, "; ".join(problems) or "ben has no row left; ana keeps all of hers"


MODEL_FAILED = "the model could not finish: "
"""The start of a row's finding when the model (a live one, its endpoint) failed: nothing judged."""
NOT_JUDGED = "not judged: the model failed in an earlier week"

JUDGES = {"remember": judge_remember, "confirm": judge_confirm, "retrieve": judge_retrieve,
          "forget": judge_forget}


def check(build: Build, folder: Path, *, live: bool = False) -> list[dict[str, Any]]:
    """Judge each requirement on its own week: `build`'s function for that part, `STAND_INS` for
    the others. One row per requirement: held or not, and what was seen (the cause, if not); a
    model that fails (a live one: its endpoint, its key) is that row's finding, in one line."""
    rows = []
    for part in PARTS:
        if not callable(build.get(part)):
            rows.append({"requirement": REQUIREMENT[part], "held": False,
                         "what was seen": f"{part} is {build.get(part)!r}, not a function"})
            continue
        try:
            run = week({**STAND_INS, part: build[part]}, folder, live=live)
        except (MemkitError, TimeoutError) as exc:  # a live model or its endpoint failed: one line
            rows.append({"requirement": REQUIREMENT[part], "held": False,
                         "what was seen": MODEL_FAILED + " ".join(str(exc).split())})
            rows += [{"requirement": REQUIREMENT[rest], "held": False, "what was seen": NOT_JUDGED}
                     for rest in PARTS[PARTS.index(part) + 1:]]
            break
        if run["failed"] is not None:
            held, seen = False, str(run["failed"])
        else:
            held, seen = JUDGES[part](run)
        rows.append({"requirement": REQUIREMENT[part], "held": held, "what was seen": seen})
    return rows


def verdict(rows: list[dict[str, Any]] | None) -> exercises.Verdict:
    """The exercise's verdict on `check`'s rows: right when every requirement held, otherwise each
    failed requirement with its own finding as the hint."""
    if rows is None:
        return exercises.not_answered("write your four functions, name them in my_build, then run "
                                      "the week")
    failed = [row for row in rows if not row["held"]]
    broken = [row["what was seen"] for row in failed if row["what was seen"].startswith(MODEL_FAILED)]
    if broken:
        return exercises.wrong("the week could not run, so nothing was judged",
                               f"{broken[0]}; check OPENAI_BASE_URL and the server, or unset "
                               "OPENAI_MODEL to run with the fixture")
    if not failed:
        return exercises.right("all four requirements hold: only lasting facts kept, only what each "
                               "customer said yes to, the ticket recalled within the budget, ben "
                               "forgotten everywhere and ana kept")
    return exercises.wrong("requirement " + ", ".join(row["requirement"][0] for row in failed) + " failed",
                           "; ".join(row["what was seen"] for row in failed))
