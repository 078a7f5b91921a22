"""`MemkitSession`: an openai-agents `Session` whose items live in memkit's store, per user.

openai-agents keeps an agent's conversation in a `Session` (`Runner.run(agent, text, session=...)`).
`MemkitSession` implements that protocol (`get_items`, `add_items`, `pop_item`, `clear_session`,
`session_settings`) on a memkit store file (or a `postgresql://` URL), so the conversation survives
the process, and is bound to one user chosen by the application, never by the model.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import weakref
from typing import Any

from ..errors import ValidationError, install_hint

try:
    from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit
except ImportError:  # pragma: no cover - depends on the installation
    raise ImportError(f"MemkitSession needs openai-agents: {install_hint('agents')}") from None

from ..limits import Limits
from ..store import Store, open_store

__all__ = ["IN_MEMORY", "MAX_ITEM_CHARS", "ItemNotJSON", "MemkitSession"]

IN_MEMORY = ":memory:"
"""The `db_path` of a session kept only while it is open, as openai-agents' `SQLiteSession` takes it:
a store in a private temporary folder, removed when the session closes (never a file named
`:memory:` in the working directory)."""

MAX_ITEM_CHARS = 1_000_000
"""The largest item a `MemkitSession` keeps, in characters of its JSON text: far above what agent runs
produce, as a refused item would stop the agent (docs/design/integrations.md). A user's items together
are bounded by `Limits.max_agent_item_chars_per_user` (the oldest go) and the store's size cap."""


class MemkitSession:
    """An openai-agents `Session` kept in memkit's store, bound to one user.

    Items (messages, tool calls and their outputs, reasoning items, whatever the run produced) are
    kept whole, as their JSON text, and come back equal to what was added, in the order added.
    `add_items` stores all its items or none. Two users' sessions never meet, even under the same
    `session_id`: every read and write names the user.

    Items are not memkit's turns (a removed item's number can come back; docs/design/integrations.md),
    but they are the user's data all the same: `forget_user` removes them, an export carries them, and
    `health` and the inspector show them.

    A user's items are bounded, so one conversation cannot fill the store and refuse another user's
    first memory: past `Limits.max_agent_item_chars_per_user` characters (over all their sessions),
    `add_items` removes the user's oldest items, never its own, with any tool output whose call went.
    Trimmed, not refused: a conversation log the framework reads back should keep going, as with
    openai-agents' own `SessionSettings.limit`; only one call's items past the bound are refused.

    Args:
        session_id: the conversation's id: any visible text of up to `Limits.max_id_chars` (256)
            characters (`thread/42`), stored as given and never used as a path (`Limits.check_id`).
        db_path: a memkit store file (created if missing; its folder must exist), a
            `postgresql://` URL, an open `Store` (then the caller closes it), or `":memory:"`
            (`IN_MEMORY`: a temporary store, gone when the session closes).
        user: whose conversation this is (`alice@example.com`, `auth0|123`: an id as above);
            chosen by the application, never by the model.
        session_settings: openai-agents' `SessionSettings` (or a dict); `limit` is the default
            number of latest items `get_items` returns.
        limits: the store's limits, when this session opens it (its size cap bounds all items).

    Raises:
        ValidationError: an id is not allowed. StoreError: the store cannot be opened.

    Example:
        >>> session = MemkitSession("trip", "memory.sqlite3", user="alice")   # doctest: +SKIP
        >>> await Runner.run(agent, "Book me a window seat", session=session)  # doctest: +SKIP
    """

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, db_path: str | os.PathLike[str] | Store, *, user: str,
                 session_settings: SessionSettings | dict[str, Any] | None = None,
                 limits: Limits | None = None) -> None:
        self.session_settings = (coerce_session_settings(session_settings) if session_settings is not None
                                 else SessionSettings())
        self._owns_store = not isinstance(db_path, Store)
        self._scratch: str | None = None
        if isinstance(db_path, Store):
            self.store = db_path
        else:
            if db_path == IN_MEMORY:
                self._scratch = tempfile.mkdtemp(prefix="memkit-session-")  # private: 0700
                # Removed at close, or when the session is collected or the interpreter exits.
                weakref.finalize(self, shutil.rmtree, self._scratch, True)
                db_path = os.path.join(self._scratch, "memory.sqlite3")
            self.store = open_store(db_path, **({"limits": limits} if limits is not None else {}))
        try:
            self.session_id = self.store.limits.check_id("session", session_id)
            self.user = self.store.limits.check_id("user", user)
        except ValidationError:
            self.close()
            raise
        self._closed = False

    # -- the Session protocol ------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The session's items in the order added; the latest `limit` of them (default:
        `session_settings.limit`; None: all; 0: none; a negative number: all, as in SQLiteSession)."""
        self._check_open()
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted is not None and wanted < 0:
            wanted = None
        texts = await asyncio.to_thread(self.store.agent_items, self.user, self.session_id, wanted)
        return [json.loads(text) for text in texts]

    async def add_items(self, items: list[Any]) -> None:
        """Add items after the last one, all or none.

        Raises:
            ValidationError: an item cannot be written as JSON, or its JSON text is longer than
                `MAX_ITEM_CHARS`; nothing of this call was stored.
            QuotaError: the store's size cap, or this call's items alone are past
                `Limits.max_agent_item_chars_per_user`; StoreError: the database failed. Nothing was stored.
        """
        self._check_open()
        texts = [_encode(item, number) for number, item in enumerate(items, 1)]
        if texts:
            await asyncio.to_thread(self.store.add_agent_items, self.user, self.session_id, texts)

    async def pop_item(self) -> Any | None:
        """Remove and return the latest item (None when the session has none)."""
        self._check_open()
        text = await asyncio.to_thread(self.store.pop_agent_item, self.user, self.session_id)
        return None if text is None else json.loads(text)

    async def clear_session(self) -> None:
        """Remove every item of this session (of this user; other sessions are untouched)."""
        self._check_open()
        await asyncio.to_thread(self.store.clear_agent_items, self.user, self.session_id)

    # -- life ------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if this session opened it (a `":memory:"` one is removed). Safe to call twice."""
        self._closed = True
        if self._owns_store:
            self.store.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> MemkitSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"MemkitSession({self.session_id!r}, user={self.user!r}, store={self.store!r})"

    def _check_open(self) -> None:
        if getattr(self, "_closed", True):
            raise RuntimeError(f"MemkitSession {self.session_id!r} is closed; open a new one")


class ItemNotJSON(ValidationError, TypeError):
    """An item `json.dumps` refuses (an object that is not JSON). A TypeError too, as openai-agents'
    own sessions raise for such an item; nothing of the call was stored."""


def _encode(item: Any, number: int) -> str:
    """One item's JSON text, or a ValidationError naming the item and what is wrong with it."""
    try:
        # ASCII escapes, as SQLiteSession writes them: a NUL or a lone surrogate comes back exactly.
        text = json.dumps(item)
    except (TypeError, ValueError) as exc:  # ValueError: a circular reference
        raise ItemNotJSON(f"item {number} cannot be kept as JSON ({exc}); nothing of this call was stored") from None
    if len(text) > MAX_ITEM_CHARS:
        raise ValidationError(f"item {number} is {len(text):,} characters of JSON; a MemkitSession keeps items of "
                              f"up to {MAX_ITEM_CHARS:,}; nothing of this call was stored")
    return text


from .agents_tools import memory_tools as memory_tools  # noqa: E402 - the approval-gated tools (agents_tools.py)
