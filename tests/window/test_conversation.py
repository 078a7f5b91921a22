"""The conversation survives a restart: the agent's short-term memory is its window.

Real processes (`python -m memkit chat`) and a real SQLite file holding the store and its window
(`StoreWindow`). No fixture of these tests stands in for either.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _cli_helpers import memkit

from memkit import FixtureModel, InProcessWindow, MemoryAgent, ModelError, ScriptedModel, ValidationError
from memkit.approvals import Approvals
from memkit.models import call, say
from memkit.request import History


def requests_of(dump: Path) -> list[dict]:
    """The user envelopes of every request the fixture model received (from --dump-requests)."""
    return [json.loads(r["messages"][1]["content"]) for r in json.loads(dump.read_text(encoding="utf-8"))]


def finish(process: subprocess.Popen) -> None:
    """Kill a chat process if it still runs, and close its pipes."""
    if process.poll() is None:
        process.kill()
    process.wait(timeout=60)
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None and not stream.closed:
            stream.close()


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    return tmp_path / "ws"


# -- in Python: the agent reads and appends its window -----------------------------------------------


def test_the_agent_reads_recent_history_from_its_window_on_every_ask(store):
    window = InProcessWindow(16)
    agent = MemoryAgent(store, "alice", "s1", FixtureModel(), window=window)
    asyncio.run(agent.ask("My ticket number is T-4471"))
    reply = asyncio.run(agent.ask("What was my ticket number?"))
    assert "T-4471" in reply.text
    assert [t["role"] for t in window.recent("alice", "s1")] == ["user", "assistant"] * 2
    # A second agent on the same window (another instance) continues the same conversation.
    other = MemoryAgent(store, "alice", "s1", FixtureModel(), window=window)
    assert "T-4471" in asyncio.run(other.ask("What was my ticket number?")).text
    # ... and another session of the same user does not see it.
    elsewhere = MemoryAgent(store, "alice", "s2", FixtureModel(), window=window)
    assert "T-4471" not in asyncio.run(elsewhere.ask("What was my ticket number?")).text


def test_the_view_keeps_the_history_bounds_while_the_window_keeps_turns_whole(store):
    window = InProcessWindow(40)
    agent = MemoryAgent(store, "alice", "s1", ScriptedModel([say("ok")] * 12), window=window)
    for n in range(12):
        asyncio.run(agent.ask(f"question {n} " + "x" * 2000))
    assert all(len(t["content"]) > 2000 for t in window.recent("alice", "s1") if t["role"] == "user")
    view = History(limits=store.limits).view(window.recent("alice", "s1"))
    assert len(view) <= 8 and all("shortened" in e["user"] for e in view)
    assert view[-1]["user"].startswith("question 11")


def test_a_cancelled_or_failed_ask_changes_nothing_in_the_window(store):
    window = InProcessWindow(16)

    class Slow(ScriptedModel):
        async def complete(self, messages, tools):
            await asyncio.sleep(10)

    agent = MemoryAgent(store, "alice", "s1", Slow([]), window=window, timeout_s=0.05)
    with pytest.raises(TimeoutError):
        asyncio.run(agent.ask("hello"))
    broken = MemoryAgent(store, "alice", "s1", ScriptedModel([]), window=window)
    with pytest.raises(ModelError):
        asyncio.run(broken.ask("hello"))  # the script ran out
    assert window.recent("alice", "s1") == []


def test_an_empty_task_is_a_validation_error_and_asks_nothing(store):
    model = ScriptedModel([])
    with pytest.raises(ValidationError, match="empty"):
        asyncio.run(MemoryAgent(store, "alice", "s1", model).ask("   "))
    assert model.requests == []


def test_a_confirmed_delete_retires_recent_history_of_every_session(store):
    window = InProcessWindow(16)
    approvals = Approvals("test")
    approvals.confirm_put("preference", "drink", "tea")
    told = MemoryAgent(store, "alice", "s0", FixtureModel(), window=window, approvals=approvals)
    asyncio.run(told.ask("Remember my drink is tea"))
    approvals.confirm_delete("preference", "drink")
    model = ScriptedModel([call("memory_delete", kind="preference", key="drink"), say("gone"), say("ok")])
    agent = MemoryAgent(store, "alice", "s1", model, window=window, approvals=approvals)
    asyncio.run(agent.ask("forget my drink"))
    asyncio.run(MemoryAgent(store, "alice", "s0", model, window=window).ask("what now?"))
    assert "tea" not in json.dumps(model.requests[-1]["messages"])
    assert window.recent("alice", "s0")[0]["content"] == "what now?"


# -- across processes, with the store's own window ----------------------------------------------------


def test_two_chat_invocations_continue_one_conversation(workspace, tmp_path):
    dump = tmp_path / "second.json"
    first = memkit("chat", "--workspace", str(workspace), "--user", "alice", "--session", "s1",
                   "--message", "My ticket number is T-4471")
    assert first.returncode == 0, first.stderr
    second = memkit("chat", "--workspace", str(workspace), "--user", "alice", "--session", "s1",
                    "--task", "What was my ticket number?", "--dump-requests", str(dump))
    assert second.returncode == 0, second.stderr
    assert "T-4471" in json.loads(second.stdout)["turns"][0]["reply"]
    history = requests_of(dump)[0]["recent_history"]
    assert history == [{"user": "My ticket number is T-4471", "assistant": "Noted: your ticket number is T-4471."}]
    # Nothing is kept running between the two commands: the window is in the store's file.
    assert sorted(p.name for p in (workspace / "state").iterdir() if not p.name.endswith(("-wal", "-shm"))) == [
        "memory.sqlite3"]


def test_messages_on_stdin_are_answered_one_json_line_each_as_they_arrive(workspace):
    process = subprocess.Popen([sys.executable, "-m", "memkit", "chat", "--workspace", str(workspace),
                                "--user", "alice", "--session", "s1"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        process.stdin.write("My ticket number is T-9\n")
        process.stdin.flush()
        first = json.loads(process.stdout.readline())  # answered before the next line is even sent
        assert first["reply"] == "Noted: your ticket number is T-9."
        process.stdin.write("What was my ticket number?\n")
        process.stdin.close()
        second = json.loads(process.stdout.readline())
        done = json.loads(process.stdout.readline())
        assert "T-9" in second["reply"] and done["done"] is True and done["answered"] == 2
        assert process.wait(timeout=60) == 0
    finally:
        finish(process)


def test_a_process_killed_right_after_its_reply_loses_nothing_it_acknowledged(workspace, tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "memkit", "chat", "--workspace", str(workspace),
                                "--user", "alice", "--session", "s1"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    process.stdin.write("My ticket number is T-4471\n")
    process.stdin.flush()
    assert json.loads(process.stdout.readline())["message"] == "My ticket number is T-4471"
    process.send_signal(signal.SIGKILL)
    process.communicate()
    dump = tmp_path / "after.json"
    after = memkit("chat", "--workspace", str(workspace), "--user", "alice", "--session", "s1",
                   "--message", "What was my ticket number?", "--dump-requests", str(dump))
    assert after.returncode == 0, after.stderr
    assert "T-4471" in json.loads(after.stdout)["turns"][0]["reply"]
    assert [e["user"] for e in requests_of(dump)[0]["recent_history"]] == ["My ticket number is T-4471"]


def test_two_live_instances_answer_alternate_messages_and_see_each_other(workspace):
    def start():
        return subprocess.Popen([sys.executable, "-m", "memkit", "chat", "--workspace", str(workspace),
                                 "--user", "alice", "--session", "s1"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    instances = [start(), start()]
    try:
        def ask(instance, text):
            instance.stdin.write(text + "\n")
            instance.stdin.flush()
            return json.loads(instance.stdout.readline())["reply"]

        assert ask(instances[0], "My ticket number is T-1") == "Noted: your ticket number is T-1."
        assert "T-1" in ask(instances[1], "What was my ticket number?")
        ask(instances[1], "My ticket number is T-2")
        assert "T-2" in ask(instances[0], "What was my ticket number?")
    finally:
        for instance in instances:
            instance.stdin.close()
            assert instance.wait(timeout=60) == 0, instance.stderr.read()
            finish(instance)


def test_a_confirmed_delete_stays_out_of_every_later_request_after_a_restart(workspace, tmp_path):
    ws = ["--workspace", str(workspace), "--user", "alice", "--session", "s1"]
    assert memkit("chat", *ws, "--confirm-preference", "pin", "4321",
                  "--message", "Remember my pin is 4321").returncode == 0
    assert memkit("chat", *ws, "--message", "My pin is 4321").returncode == 0
    forgot = memkit("chat", *ws, "--confirm-delete", "preference", "pin", "--message", "Forget my pin")
    assert forgot.returncode == 0, forgot.stderr
    dump = tmp_path / "later.json"
    assert memkit("chat", *ws, "--message", "What was my pin?", "--dump-requests", str(dump)).returncode == 0
    assert "4321" not in dump.read_text(encoding="utf-8")


def test_forget_user_removes_the_user_from_store_archive_and_live_windows(workspace):
    ws = ["--workspace", str(workspace)]
    for user in ("alice", "bob"):
        assert memkit("chat", *ws, "--user", user, "--session", "s1", "--confirm-preference", "drink", "tea",
                      "--message", "Remember my drink is tea", "--message", "My ticket number is T-1").returncode == 0
    done = memkit("forget-user", *ws, "--user", "alice", "--confirm")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["removed"]["records"] == 1 and report["removed"]["window_turns"] == 4
    assert set(report["left"].values()) == {0}
    again = memkit("chat", *ws, "--user", "alice", "--session", "s1", "--message", "What was my ticket number?")
    assert "T-1" not in again.stdout
    bob = memkit("chat", *ws, "--user", "bob", "--session", "s1", "--message", "What was my ticket number?")
    assert "T-1" in json.loads(bob.stdout)["turns"][0]["reply"]


def test_a_process_killed_inside_an_ask_leaves_the_whole_exchange_or_none_of_it(workspace):
    ws = ["--workspace", str(workspace), "--user", "alice", "--session", "s1"]
    assert memkit("chat", *ws, "--message", "My ticket number is T-1").returncode == 0
    for delay in (0.0, 0.01, 0.03, 0.1):
        process = subprocess.Popen([sys.executable, "-m", "memkit", "chat", *ws], stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        process.stdin.write("My ticket number is T-2\n")
        process.stdin.flush()
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.communicate()
    from memkit import MemoryStore
    from memkit.window import StoreWindow

    with MemoryStore(workspace / "state" / "memory.sqlite3") as store:
        turns = StoreWindow(store).load_session("alice", "s1")
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))  # no gap, none twice
    assert [t["role"] for t in turns] == ["user", "assistant"] * (len(turns) // 2)  # whole exchanges only
