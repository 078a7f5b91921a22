"""Notebook 12's capstone, judged headless: builds that meet the brief, and builds with one mistake.

Each wrong build gets exactly one failed requirement, its own, with a finding that names the real
cause; the other three hold, because each requirement runs on a week of its own with stand-ins for
the other parts (the week's answers looked up, not the solution). Every week is real: a real SQLite
file, the fixture model proposing, the desk approving through the store, the budget measuring each
request, `forget_user` in the store. The right and wrong builds are judged twice: by the course's
checks and by those of a student copy (`make handout`), which holds no reference build.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from _model_server import ChatServer
from memkit import MemoryStore, forget_user
from classroom import capstone, capstone_reference, handout
from classroom.capstone_reference import REFERENCE

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


# -- right parts, each written another way than the reference -------------------------------------

def keep_but_moods(proposal: dict[str, Any]) -> bool:
    return proposal["key"] not in {"mood", "feeling"}


def keep_tickets_and_service(proposal: dict[str, Any]) -> bool:
    return proposal["kind"] == "episode" or proposal["key"] in {"language", "channel", "city"}


def exact_triple(proposal: dict[str, Any], said_yes: list[tuple[str, str, str]]) -> bool:
    return any((proposal["kind"], proposal["key"], proposal["value"]) == tuple(yes) for yes in said_yes)


def open_tickets_named(question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if "closed in" not in r["value"]]


def newest_three(question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "preference"] + [
        r for r in records if r["kind"] == "episode" and not r["value"].startswith("closed")][:3]


def forget_everywhere(store: Any, user: str) -> None:
    forget_user(store, user)  # the store, its own window and every Redis it recorded


RIGHT = {
    "reference": REFERENCE,
    "moods left out by key": {**REFERENCE, "remember": keep_but_moods},
    "a list of lasting keys": {**REFERENCE, "remember": keep_tickets_and_service, "confirm": exact_triple},
    "open tickets by their text": {**REFERENCE, "retrieve": open_tickets_named},
    "preferences and open tickets, forget_user of memkit": {**REFERENCE, "retrieve": newest_three,
                                                            "forget": forget_everywhere},
}


# -- wrong parts: each a plausible mistake, and the finding it must get ----------------------------

def keep_everything(proposal: dict[str, Any]) -> bool:
    return True


def keep_preferences_only(proposal: dict[str, Any]) -> bool:
    return proposal["kind"] == "preference" and proposal["key"] != "mood"


def same_key(proposal: dict[str, Any], said_yes: list[tuple[str, str, str]]) -> bool:
    return any(key == proposal["key"] for _, key, _ in said_yes)


def whatever_the_model_proposed(proposal: dict[str, Any], said_yes: list[tuple[str, str, str]]) -> bool:
    return True


def same_value_any_case(proposal: dict[str, Any], said_yes: list[tuple[str, str, str]]) -> bool:
    return proposal["value"].lower() in {value.lower() for *_, value in said_yes} and proposal["key"] != "channel"


def everything_known(question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return records


def preferences_only(question: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "preference"]


def delete_keys(store: Any, user: str) -> None:
    for record in store.records(user):
        store.delete(user, record["kind"], record["key"])


def forget_everyone(store: Any, user: str) -> None:
    for someone in store.users():
        store.forget_user(someone)


def forget_a_typo(store: Any, user: str) -> None:
    store.forget_usr(user)


WRONG = [
    ("remember", keep_everything, "remember kept ana's mood = 'grumpy'"),
    ("remember", keep_preferences_only, "remember dropped ana's ticket.t-4471"),
    ("confirm", same_key, "confirm approved ben's channel = 'phone', which ben never said yes to"),
    ("confirm", whatever_the_model_proposed, "city = 'Porto', which ben never said yes to"),
    ("confirm", same_value_any_case, "confirm refused ben's channel = 'email', which ben said yes to"),
    ("retrieve", everything_known, "the request was over the budget of 4000 characters and the budget "
                                   "trimmed"),
    ("retrieve", preferences_only, "ana's reply did not recall 'router drops every evening'"),
    ("forget", delete_keys, "forget left ben's events"),
    ("forget", forget_everyone, "forget changed ana's rows too (records 12 -> 0"),
    ("forget", forget_a_typo, "forget stopped: AttributeError"),
]


def _rows(build: dict[str, Any], tmp_path: Path, checks: ModuleType = capstone) -> dict[str, dict[str, Any]]:
    return {row["requirement"][0]: row for row in checks.check(build, tmp_path)}


@pytest.fixture(scope="module")
def student_capstone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """`classroom.capstone` as a student copy of `make handout` holds it, imported from that copy
    (as the package `student_classroom`, beside the course's own `classroom`)."""
    out = tmp_path_factory.mktemp("handout")
    handout.write_handouts(NOTEBOOKS, out)
    folder = out / "student" / "classroom"
    spec = importlib.util.spec_from_file_location("student_classroom", folder / "__init__.py",
                                                  submodule_search_locations=[str(folder)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules["student_classroom"] = package
    try:
        spec.loader.exec_module(package)
        module = importlib.import_module("student_classroom.capstone")
        assert Path(module.__file__ or "").parent == folder
        yield module
        assert "student_classroom.capstone_reference" not in sys.modules
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "student_classroom"]:
            del sys.modules[name]


@pytest.fixture(params=["course", "student copy"])
def checks(request: pytest.FixtureRequest) -> ModuleType:
    return capstone if request.param == "course" else request.getfixturevalue("student_capstone")


@pytest.mark.parametrize("name", RIGHT)
def test_a_build_that_meets_the_brief_holds_every_requirement(name, checks, tmp_path):
    rows = _rows(RIGHT[name], tmp_path, checks)
    assert all(row["held"] for row in rows.values()), rows
    verdict = checks.verdict(list(rows.values()))
    assert verdict.right and "all four requirements hold" in str(verdict)


@pytest.mark.parametrize(("part", "function", "finding"), WRONG, ids=[w[1].__name__ for w in WRONG])
def test_a_wrong_part_fails_its_own_requirement_only_and_names_the_cause(part, function, finding, checks,
                                                                        tmp_path):
    rows = _rows({**REFERENCE, part: function}, tmp_path, checks)
    number = checks.REQUIREMENT[part][0]
    failed = [n for n, row in rows.items() if not row["held"]]
    assert failed == [number], rows
    assert finding in rows[number]["what was seen"], rows[number]
    verdict = checks.verdict(list(rows.values()))
    assert str(verdict).startswith(f"not right yet: requirement {number} failed"), verdict
    # No other part's cause is blamed for this mistake.
    seen = rows[number]["what was seen"]
    assert not any(f"{other} " in seen for other in capstone.PARTS if other != part), seen


def test_the_skeleton_of_the_notebook_fails_all_four_each_for_its_own_reason(tmp_path):
    skeleton = {"remember": keep_everything, "confirm": same_key, "retrieve": everything_known,
                "forget": delete_keys}
    rows = _rows(skeleton, tmp_path)
    assert [row["held"] for row in rows.values()] == [False] * 4
    assert [row["what was seen"].split(" ")[0] for row in rows.values()] == [
        "remember", "confirm", "retrieve", "forget"]


def test_a_part_that_is_not_a_function_is_named_and_the_others_are_still_judged(tmp_path):
    rows = _rows({**REFERENCE, "forget": "forget_user"}, tmp_path)
    assert [row["held"] for row in rows.values()] == [True, True, True, False]
    assert rows["4"]["what was seen"] == "forget is 'forget_user', not a function"


def test_retrieve_returning_no_list_is_its_own_finding(tmp_path):
    rows = _rows({**REFERENCE, "retrieve": lambda question, records: None}, tmp_path)
    assert [row["held"] for row in rows.values()] == [True, True, False, True]
    assert "retrieve stopped: TypeError: it returned None" in rows["3"]["what was seen"]


def test_an_unanswered_build_is_not_answered_yet():
    assert str(capstone.verdict(None)).startswith("not answered yet")


# -- a live model: the week over a real HTTP endpoint ---------------------------------------------

def fixture_over_http() -> ChatServer:
    """The kit's local chat-completions server answering by the fixture model's rules, so a week with
    `live=True` goes through `OpenAIModel` and the network, as with OpenAI or Ollama."""
    import asyncio

    from memkit import FixtureModel

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        return asyncio.run(FixtureModel().complete(body["messages"], body.get("tools", []))).as_message()

    return ChatServer([], answer=answer)


@pytest.fixture
def live_env(monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("OPENAI_MODEL", "local-test-model")
    return monkeypatch


def test_with_a_live_model_set_the_week_runs_over_http_and_says_so(live_env, tmp_path):
    server = fixture_over_http()
    live_env.setenv("OPENAI_BASE_URL", server.url)
    try:
        assert capstone.live_model_set()
        assert capstone.model_line() == "The week runs with the live model local-test-model (OPENAI_MODEL)."
        rows = capstone.check({**REFERENCE, "forget": delete_keys}, tmp_path, live=True)
    finally:
        server.close()
    assert [row["held"] for row in rows] == [True, True, True, False], rows
    assert "forget left ben's events" in rows[3]["what was seen"]
    assert len(server.received) >= 4 * 17  # every request of four weeks went over the network


def test_a_live_model_that_cannot_be_reached_is_a_one_line_finding(live_env, tmp_path):
    import socket

    with socket.socket() as sock:  # a port nothing listens on once this closes
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    live_env.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{port}/v1")
    rows = capstone.check(REFERENCE, tmp_path, live=True)
    assert all(not row["held"] for row in rows)
    seen = rows[0]["what was seen"]
    assert seen.startswith("the model could not finish: ") and "\n" not in seen, seen
    assert "Traceback" not in seen and f"127.0.0.1:{port}" in seen, seen
    assert [row["what was seen"] for row in rows[1:]] == [capstone.NOT_JUDGED] * 3  # stopped at once
    verdict = str(capstone.verdict(rows))
    assert verdict.startswith("not right yet: the week could not run, so nothing was judged")
    assert "\n" not in verdict and "unset OPENAI_MODEL" in verdict


def test_without_a_live_model_the_week_says_it_runs_with_the_fixture(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert not capstone.live_model_set()
    assert capstone.model_line().startswith("The week runs with the fixture model")


# -- the stand-ins: the week's answers, deciding as the reference on all the week offers ----------

def test_the_stand_ins_decide_as_the_reference_on_every_proposal_and_record_of_the_week(tmp_path):
    """The checks judge as they did with the reference beside the student's part: on every save the
    fixture model proposes in the week and every record a customer has, stand-in and reference agree."""
    capstone.week({**REFERENCE, "forget": lambda store, user: None}, tmp_path)  # keep ben's rows
    [db] = tmp_path.rglob("week.sqlite3")
    with MemoryStore(db) as store:
        proposals = {c: [dict(p) for p in store.proposals(c, pending_only=False)] for c in capstone.MONDAY}
        records = {c: store.records(c) for c in capstone.MONDAY}
    assert [len(proposals[c]) for c in capstone.MONDAY] == [3, 4]  # ana's three sayings, ben's four
    stand_in, reference = capstone.STAND_INS, REFERENCE
    for customer in capstone.MONDAY:
        said_yes = list(capstone.SAID_YES[customer])
        for proposal in proposals[customer]:
            assert stand_in["remember"](proposal) == reference["remember"](proposal), proposal
            assert stand_in["confirm"](proposal, said_yes) == reference["confirm"](proposal, said_yes), proposal
        offered = records[customer] + [{"kind": p["kind"], "key": p["key"], "value": p["value"]}
                                       for p in proposals[customer]]
        assert [r for r in offered if stand_in["retrieve"](capstone.QUESTION, [r])] == \
            reference["retrieve"](capstone.QUESTION, offered)
    assert len(records["ana"]) == 12 and len(records["ben"]) == 12  # ten closed tickets and two kept each


def test_the_checks_import_no_solution():
    assert "capstone_reference" not in inspect.getsource(capstone).replace(
        "`capstone_reference`", "")  # named in its docstring only, never imported
    assert not set(map(id, capstone.STAND_INS.values())) & set(map(id, REFERENCE.values()))
    assert capstone_reference.Build is capstone.Build
