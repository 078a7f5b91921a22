"""The reliability lab: a delete anywhere takes the deleted value out of the next request's history.

A value the user said in a conversation sits in the window's recent turns; after a confirmed
delete the next request must carry neither the record nor those turns, whoever deleted it: the
agent's own tool, `memkit delete --confirm` in another process, the Python store API (what the
inspector calls). The store records the delete's time in the delete's own transaction; the
request's history leaves out the turns from before it. See `tests/_reliability.py` for the sizes
and conftest.py for the `figures` fixture.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

from _reliability import scale
from memkit import MemoryAgent, ScriptedModel
from memkit.models import call, user_envelope
from memkit.store import MemoryStore
from memkit.window import InProcessWindow


def _cli_delete(db, key: str) -> None:
    done = subprocess.run([sys.executable, "-m", "memkit", "delete", "--db", str(db), "--user", "alice",
                           "--key", key, "--confirm"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and '"deleted": true' in done.stdout, done.stderr


def test_a_delete_anywhere_retires_the_value_from_the_next_requests_history(tmp_path, figures):
    trials = scale(3, 20)
    carried: dict[str, int] = {}
    kept_after = 0
    db = tmp_path / "memory.sqlite3"
    with MemoryStore(db) as store:
        window = InProcessWindow(16, store=store)
        for path in ("agent's tool", "store API (the inspector's)", "memkit delete --confirm"):
            carried[path] = 0
            for n in range(trials):
                key, value = f"k{n}", f"secret-{path[:5].strip()}-{n}"
                store.put("alice", "s1", "preference", key, value)
                told = MemoryAgent(store, "alice", "s1", ScriptedModel([f"Noted: {key} is {value}."]), window=window)
                asyncio.run(told.ask(f"Remember my {key} is {value}"))
                if path == "agent's tool":
                    agent = MemoryAgent(store, "alice", "s1",
                                        ScriptedModel([call("memory_delete", kind="preference", key=key), "Deleted."]),
                                        window=window)
                    agent.approvals.confirm_delete("preference", key)
                    asyncio.run(agent.ask(f"forget my {key}"))
                    assert store.get("alice", "preference", key) is None
                elif path == "memkit delete --confirm":
                    _cli_delete(db, key)
                else:
                    assert store.delete("alice", "preference", key, confirmation="inspector")
                # A later exchange is history as usual.
                asyncio.run(MemoryAgent(store, "alice", "s1", ScriptedModel(["Oslo, noted."]), window=window)
                            .ask(f"I live in Oslo ({path} {n})"))
                probe = ScriptedModel(["ok"])
                asyncio.run(MemoryAgent(store, "alice", "s1", probe, window=window).ask("what do you know?"))
                envelope = user_envelope(probe.requests[0]["messages"])
                carried[path] += value in str(envelope)
                kept_after += any(f"({path} {n})" in e["user"] for e in envelope["recent_history"])
    figures("A delete anywhere and the next request's history",
            **{"deletes per path": trials, **{f"carried after {path}": count for path, count in carried.items()},
               "later exchanges kept": f"{kept_after} of {3 * trials}"})
    assert carried == {path: 0 for path in carried} and kept_after == 3 * trials
