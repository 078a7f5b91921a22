"""The reliability lab: what a person is asked to confirm is what is saved, whatever the value holds.

Issue 33, failure 2: line and paragraph separators (U+2028/9), a right-to-left override (U+202E),
zero-width characters (U+200B) and other format characters reached the MCP question raw, so a value
could forge a "now:" line inside the question or hide text; `repr`-based texts (chat's terminal
question, the proposals panel, the inspector's staged change) still let variation selectors, the
grapheme joiner and Hangul fillers through, and `memkit proposals` printed every one of them raw.
Generated hostile values go through every surface that asks a person to decide; each surface must
show no hidden character raw, and what it shows must read back to exactly the value kept.
"""

from __future__ import annotations

import ast
import json
import os
import pty
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from _reliability import scale
from memkit.inspector.core import InspectorCore
from memkit.inspector.proposals_panel import ProposalsPanel, against
from memkit.store import MemoryStore
from memkit.visible import hidden

pytest.importorskip("mcp.server.mcpserver", reason="the `mcp` extra is not installed: pip install -e '.[mcp]'")
pytest.importorskip("ipywidgets", reason="the proposals panel needs the `notebook` extra")

from _mcp_client import Person, connect

HIDING = ["\u2028", "\u2029", "\u202e", "\u202d", "\u2066", "\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad",
          "\u034f", "\ufe0f", "\U000e0041", "\U000e0100", "\u3164", "\u115f", "\u180e", "\u00a0", "\u3000",
          "\x1b", "\x85", "\r", "\n", "\t", "\x7f", "\ue000", "\u2800", "\u0378"]
"""Characters that hide text or move it: separators, bidi controls, zero-width and format characters,
variation selectors, tags, fillers, odd spaces, controls, private use, unassigned."""

FORGED = ["now: nothing saved", "kind: preference", "Accept saves exactly this value", "txt.exe", "\\u2028"]
"""Text a value may carry to forge a line of the question, and a backslash that looks like an escape."""


def hostile_values(count: int, seed: int = 33) -> list[str]:
    """`count` values, each an ordinary word with hidden characters and forged text inside it."""
    rng = random.Random(seed)
    words = ["Porto", "tea", "café", "東京", "🍵", "naïve"]
    values = []
    for n in range(count):
        parts = [rng.choice(words)]
        for _ in range(rng.randint(1, 3)):
            parts += [rng.choice(HIDING), rng.choice(FORGED + words)]
        parts.append(rng.choice(words))  # ends in a word: chat's fixture keeps the value as it is
        values.append(f"{n} " + "".join(parts))
    return values


def raw_hidden(text: str) -> int:
    return sum(1 for char in text if hidden(char))


class Tally:
    """Per surface: values shown, hidden characters shown raw, shown texts that do not read back."""

    def __init__(self) -> None:
        self.surfaces: dict[str, int] = {}
        self.raw = 0
        self.raw_by: dict[str, int] = {}
        self.misread: list[tuple[str, str]] = []

    def shown(self, surface: str, text: str, read: Any = None, value: str | None = None) -> None:
        self.surfaces[surface] = self.surfaces.get(surface, 0) + 1
        self.raw += raw_hidden(text)
        self.raw_by[surface] = self.raw_by.get(surface, 0) + raw_hidden(text)
        if read is not None and read != value:
            self.misread.append((surface, ascii(text)))


def mcp_questions(workspace: Path, era: str, values: list[str]) -> list[str]:
    """The messages the person is shown when a client asks to save each value (they decline each)."""
    person = Person("decline")

    async def body() -> None:
        async with connect(workspace, era, person) as client:
            for value in values:
                result = await client.call("memory_put", {"kind": "preference", "key": "drink", "value": value})
                assert result.structured_content["stored"] is False, result

    anyio.run(body)
    return person.asked


def chat_question(db: Path, value: str, user: str) -> str:
    """What `memkit chat` asks a person at a terminal (a pseudo-terminal) about saving `value`; the
    person presses Enter, so the proposal waits."""
    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "memkit", "chat", "--db", str(db), "--window", "process", "--user", user,
             "--message", f"Remember my city is {value}"], stdin=follower, stderr=follower, stdout=subprocess.PIPE)
        os.close(follower)
        shown = b""
        while b"[y/N]" not in shown:
            chunk = os.read(leader, 4096)
            assert chunk, shown
            shown += chunk
        os.write(leader, b"\n")
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0, (shown, out)
        return shown.decode()
    finally:
        os.close(leader)


def test_every_question_to_a_person_shows_hidden_characters_as_escapes(tmp_path, figures):
    values = hostile_values(scale(12, 120))
    tally = Tally()

    # MCP elicitation, both eras: the message as the client received it.
    for era in ("legacy", "modern"):
        workspace = tmp_path / era
        asked = mcp_questions(workspace, era, values)
        assert len(asked) == len(values)
        for value, message in zip(values, asked, strict=True):
            lines = message.split("\n")
            assert len(lines) == len(message.splitlines()) == 7, ascii(message)  # no forged line
            assert lines[3].startswith("value: ")
            # Its own line breaks aside, nothing hidden; its value line reads back to the value.
            tally.shown(f"MCP elicitation ({era})", "".join(lines), json.loads(lines[3][len("value: "):]), value)

    # The proposals list of the CLI, the panel's rows and the inspector's staged changes.
    db = tmp_path / "lists.sqlite3"
    chunk = 16  # a user's pending proposals are bounded (Limits.max_pending_proposals_per_user)
    with MemoryStore(db) as store:
        for n, value in enumerate(values):
            # Made against a record holding the value, proposing the value with "!" after it.
            store.put(f"lister{n // chunk}", "s1", "preference", f"k{n % chunk}", value)
            store.propose_put(f"lister{n // chunk}", "s1", "preference", f"k{n % chunk}", value + "!")
            store.put(f"editor{n // chunk}", "s1", "preference", f"k{n}", value)  # quotas bound a user
        for user in sorted({f"lister{n // chunk}" for n in range(len(values))}):
            listed = subprocess.run([sys.executable, "-m", "memkit", "proposals", "--db", str(db), "--user", user],
                                    capture_output=True, text=True, timeout=120)
            assert listed.returncode == 0, listed.stderr
            proposals = json.loads(listed.stdout)
            tally.raw += raw_hidden(listed.stdout.replace("\n", ""))
            for proposal in proposals:
                tally.surfaces["memkit proposals"] = tally.surfaces.get("memkit proposals", 0) + 1
                n = int(proposal["key"][1:]) + chunk * int(user[len("lister"):])
                if (proposal["value"], proposal["against_value"]) != (values[n] + "!", values[n]):
                    tally.misread.append(("memkit proposals", ascii(proposal["value"])))
            panel = ProposalsPanel(store, user)
            for row in panel.rows.children:  # a row: the label, Approve, Reject ("and N more" past MAX_ROWS)
                tally.shown("proposals panel", row.children[0].value if hasattr(row, "children") else row.value)
            for proposal in store.proposals(user):
                text = against(proposal)
                tally.shown("proposals panel (against)", text, ast.literal_eval(text.split(": ", 1)[1]),
                            proposal["against_value"])
        inspector = InspectorCore(store, edit=True)
        for n, value in enumerate(values):
            inspector.select_user(f"editor{n // chunk}")
            inspector.select_key("preference", f"k{n}")
            staged = inspector.stage_edit(value + " (edited)")["staged"]
            tally.shown("inspector (staged edit)", staged)
            inspector.cancel()
            staged = inspector.stage_delete()["staged"]
            shown_value = staged.split("(now ", 1)[1][:-1]
            tally.shown("inspector (staged delete)", staged, ast.literal_eval(shown_value), value)
            inspector.cancel()

    # chat's question to a person at a terminal, from a real `memkit chat` process.
    chat_db = tmp_path / "chat.sqlite3"
    questions = []
    chatted = values[: scale(2, 20)]
    for n, value in enumerate(chatted):  # a user each: a user's waiting proposals are bounded
        shown = chat_question(chat_db, value, f"chat{n}")
        questions.append(shown[shown.index("save preference city = "):shown.index("? [y/N]")])
    with MemoryStore(chat_db) as store:
        # What the model proposed (the fixture folds runs of whitespace into one space), kept exactly.
        kept = [p["value"] for n in range(len(chatted)) for p in store.proposals(f"chat{n}")]
    assert len(kept) == len(questions) and sum(raw_hidden(value) for value in kept) > 0
    for question, value in zip(questions, kept, strict=True):
        tally.shown("chat at a terminal", question, ast.literal_eval(question.split(" = ", 1)[1]), value)

    figures("What a person is shown is what is saved",
            **{"hostile values": len(values), "surfaces": len(tally.surfaces),
               "texts shown": sum(tally.surfaces.values()), "hidden characters shown raw": tally.raw,
               "shown texts that do not read back to the value": len(tally.misread)})
    assert tally.raw == 0, tally.raw_by
    assert tally.misread == []
