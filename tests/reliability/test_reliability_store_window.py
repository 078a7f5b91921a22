"""The reliability lab: the store's own window (`StoreWindow`) under racing appends and SIGKILL.

Five real processes append to the window in one SQLite file at once: three to the same user's
session, one to another session of that user, one to another user's. Each prints a line only once
its append (or its exchange: question and answer in one transaction) has returned. At random
moments one of them is SIGKILLed, in the middle of whatever it was doing, and a new one takes its
place. At the end, per session: every acknowledged turn is there with the number it was
acknowledged with (none lost), no turn is there twice, the numbers run 1..N without a gap, every
turn is in exactly one of the window and the archive (the window holds the newest `SIZE`), and no
exchange is split or interleaved. Unacknowledged turns that were stored (killed after the commit,
before the print) are counted, never more than one per kill. An append starved of the write lock
past the busy timeout is refused (LockedError, counted) and must have written nothing.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from _cli_helpers import env_with
from _reliability import ROOMY, scale
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window import StoreWindow

SIZE = 3

APPENDER = textwrap.dedent("""
    import json, sys
    from memkit.errors import LockedError
    from memkit.limits import Limits
    from memkit.store import MemoryStore
    from memkit.window import StoreWindow
    db, user, session, name, mode, limits, size = sys.argv[1:8]
    with MemoryStore(db, limits=Limits(**json.loads(limits))) as store:
        window = StoreWindow(store, size=int(size))
        print("ready", flush=True)
        n = 0
        while True:
            n += 1
            text = f"{name}-{n}"
            try:
                if mode == "exchange":
                    turns = window.append_exchange(user, session, text, "re " + text)
                else:
                    turns = [window.append(user, session, "user", text)]
            except LockedError:  # starved past the busy timeout: refused, nothing written
                print(json.dumps([text, None]), flush=True)
                continue
            print(json.dumps([text, turns[0]["turn"]]), flush=True)
""")

WRITERS = [("alice", "s1", "exchange"), ("alice", "s1", "exchange"), ("alice", "s1", "single"),
           ("alice", "s2", "single"), ("bob", "s1", "exchange")]


class Appender:
    def __init__(self, db: Path, slot: int, generation: int, limits: str) -> None:
        self.user, self.session, self.mode = WRITERS[slot]
        self.name = f"w{slot}g{generation}"
        self.process = subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(db), self.user, self.session, self.name, self.mode, limits, str(SIZE)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env_with())
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line == "ready\n", self.process.communicate()[1][-2000:]

    def kill(self) -> list[tuple[str, int | None]]:
        """SIGKILL it (whatever it was doing) and return what it acknowledged: (text, turn number),
        or (text, None) for an append refused as locked (it waited past the busy timeout)."""
        self.process.send_signal(signal.SIGKILL)
        out, err = self.process.communicate(timeout=60)
        assert self.process.returncode == -signal.SIGKILL, err[-2000:]  # killed, never failed
        return [tuple(json.loads(line)) for line in out.splitlines()]  # type: ignore[misc]


def test_racing_appenders_killed_mid_append_lose_and_duplicate_no_turn(tmp_path, figures):
    db = tmp_path / "memory.sqlite3"
    limits = json.dumps(ROOMY)
    with MemoryStore(db, limits=Limits(**ROOMY)):
        pass  # the schema, made before the race
    kills = scale(6, 150)
    rng = random.Random(33)
    generations = [0] * len(WRITERS)
    running = [Appender(db, slot, 0, limits) for slot in range(len(WRITERS))]
    acknowledged: dict[tuple[str, str], dict[str, int]] = {}
    refused: dict[tuple[str, str], set[str]] = {}

    def record(appender: Appender) -> None:
        seen = acknowledged.setdefault((appender.user, appender.session), {})
        for text, number in appender.kill():
            if number is None:
                refused.setdefault((appender.user, appender.session), set()).add(text)
            else:
                seen[text] = number

    try:
        for _ in range(kills):
            time.sleep(rng.uniform(0.02, 0.3))
            slot = rng.randrange(len(WRITERS))
            record(running[slot])
            generations[slot] += 1
            running[slot] = Appender(db, slot, generations[slot], limits)
    finally:
        for appender in running:
            if appender.process.poll() is None:
                record(appender)

    lost = duplicated = gaps = split = unacknowledged = stored_refused = 0
    turns_total = 0
    with MemoryStore(db, limits=Limits(**ROOMY)) as store:
        window = StoreWindow(store, size=SIZE)
        raw = sqlite3.connect(db)
        for (user, session), seen in acknowledged.items():
            turns = window.load_session(user, session)
            turns_total += len(turns)
            numbers = [turn["turn"] for turn in turns]
            gaps += numbers != list(range(1, len(turns) + 1))
            questions = {turn["content"]: turn["turn"] for turn in turns if turn["role"] == "user"}
            duplicated += sum(1 for turn in turns if turn["role"] == "user") - len(questions)
            lost += sum(1 for text, number in seen.items() if questions.get(text) != number)
            unacknowledged += len(set(questions) - set(seen))
            stored_refused += len(set(questions) & refused.get((user, session), set()))
            for index, turn in enumerate(turns):  # an exchange is a question followed by its answer
                if turn["role"] == "assistant":
                    split += index == 0 or turns[index - 1]["content"] != turn["content"][len("re "):]
                elif WRITERS[int(turn["content"][1:].split("g")[0])][2] == "exchange":
                    split += index + 1 == len(turns) or turns[index + 1]["content"] != "re " + turn["content"]
            in_window = [row[0] for row in raw.execute(
                "SELECT turn FROM window_turns WHERE user_id = ? AND session_id = ? ORDER BY turn", (user, session))]
            archived = [row[0] for row in raw.execute(
                "SELECT turn FROM transcript WHERE user_id = ? AND session_id = ? ORDER BY turn", (user, session))]
            assert archived + in_window == numbers, (user, session)  # each turn in exactly one, once
            assert in_window == numbers[-SIZE:], (user, session)  # the window holds the newest
        raw.close()
    acknowledged_total = sum(len(seen) for seen in acknowledged.values())
    figures("The store's window: racing appends, SIGKILL mid-append",
            **{"processes at once": len(WRITERS), "kills": kills, "acknowledged appends": acknowledged_total,
               "turns stored": turns_total, "acknowledged lost": lost, "duplicated": duplicated,
               "sessions with a gap in the numbers": gaps, "exchanges split": split,
               "stored, not acknowledged (killed between commit and print)": unacknowledged,
               "refused as locked (busy timeout), none of them stored": sum(len(r) for r in refused.values())})
    assert acknowledged_total > kills  # the processes did append between the kills
    assert (lost, duplicated, gaps, split, stored_refused) == (0, 0, 0, 0, 0)
    assert unacknowledged <= kills + len(WRITERS)  # at most the one append each killed process was making
