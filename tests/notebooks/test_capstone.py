"""Notebook 12's capstone, judged headless: builds that meet the brief, and builds with one mistake.

Each wrong build gets exactly one failed requirement, its own, with a finding that names the real
cause; the other three hold, because each requirement runs on a week of its own with the reference
for the other parts. Every week is real: a real SQLite file, the fixture model proposing, the
desk approving through the store, the budget measuring each request, `forget_user` in the store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memkit import forget_user
from classroom import capstone
from classroom.capstone_reference import REFERENCE


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


def _rows(build: dict[str, Any], tmp_path: Path) -> dict[str, dict[str, Any]]:
    return {row["requirement"][0]: row for row in capstone.check(build, tmp_path)}


@pytest.mark.parametrize("name", RIGHT)
def test_a_build_that_meets_the_brief_holds_every_requirement(name, tmp_path):
    rows = _rows(RIGHT[name], tmp_path)
    assert all(row["held"] for row in rows.values()), rows
    verdict = capstone.verdict(list(rows.values()))
    assert verdict.right and "all four requirements hold" in str(verdict)


@pytest.mark.parametrize(("part", "function", "finding"), WRONG, ids=[w[1].__name__ for w in WRONG])
def test_a_wrong_part_fails_its_own_requirement_only_and_names_the_cause(part, function, finding, tmp_path):
    rows = _rows({**REFERENCE, part: function}, tmp_path)
    number = capstone.REQUIREMENT[part][0]
    failed = [n for n, row in rows.items() if not row["held"]]
    assert failed == [number], rows
    assert finding in rows[number]["what was seen"], rows[number]
    verdict = capstone.verdict(list(rows.values()))
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

class FixtureOverHttp:
    """A real chat-completions endpoint on 127.0.0.1 whose answers follow the fixture model's rules,
    so a week with `live=True` goes through `OpenAIModel` and the network, as with OpenAI or Ollama."""

    def __init__(self) -> None:
        import asyncio
        import json
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from memkit import FixtureModel

        self.received = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.received += 1
                reply = asyncio.run(FixtureModel().complete(body["messages"], body.get("tools", [])))
                message = reply.as_message()
                data = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                                   "model": body["model"],
                                   "choices": [{"index": 0, "message": message, "finish_reason":
                                                "tool_calls" if message.get("tool_calls") else "stop"}]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def live_env(monkeypatch):
    pytest.importorskip("openai")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("OPENAI_MODEL", "local-test-model")
    return monkeypatch


def test_with_a_live_model_set_the_week_runs_over_http_and_says_so(live_env, tmp_path):
    server = FixtureOverHttp()
    live_env.setenv("OPENAI_BASE_URL", server.url)
    try:
        assert capstone.live_model_set()
        assert capstone.model_line() == "The week runs with the live model local-test-model (OPENAI_MODEL)."
        rows = capstone.check({**REFERENCE, "forget": delete_keys}, tmp_path, live=True)
    finally:
        server.close()
    assert [row["held"] for row in rows] == [True, True, True, False], rows
    assert "forget left ben's events" in rows[3]["what was seen"]
    assert server.received >= 4 * 17  # every request of four weeks went over the network


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
