"""The archiver of the Redis window: turns that left the window go into SQLite, exactly once.

Archiving is *copy, then trim*, keyed by (user, session, turn): a process killed between the SQLite
commit and the Redis trim leaves the turn in both places for a moment, and the next pass (any
instance) copies it again (ignored) and trims it. The sweeper retires each session within
`sweep_margin` of its expiry into `pending` (no TTL), so expiry frees memory without dropping a turn
as long as some instance runs a pass once per margin. A pending turn whose number the archive holds
with other content (a counter went back) gets the next free number: both are kept, the move logged
and listed in `renumbered`.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any, cast
from collections.abc import Callable

from ..store import Store
from ..store.archive import ArchiveConflictError
from ..transcript import Turn
from ..servers.redis_client import as_text, redis_errors
from .protocol import KeyLayout, Scripts, decode

if TYPE_CHECKING:  # pragma: no cover
    import redis

log = logging.getLogger(__name__)

OnArchived = Callable[[str, str, list[Turn]], None]


class Archiver:
    """Sweeper and archiver passes over every session of one key prefix, in a thread or on demand.

    Made by `RedisWindow`, with its client, store, key layout and scripts (RETIRE, TRIM and RENUMBER
    are the archiver's); `where` names the server in error messages.
    """

    def __init__(self, client: redis.Redis, store: Store, layout: KeyLayout, scripts: Scripts, *, where: str,
                 sweep_margin: float, interval: float, on_archived: OnArchived | None = None) -> None:
        self.client = client
        self.store = store
        self.layout = layout
        self.where = where
        self.sweep_margin = sweep_margin
        self.interval = interval
        self.on_archived = on_archived
        self.lock = threading.Lock()
        """Held by every pass (and by `RedisWindow.forget_user`): one pass at a time in this process."""
        self.last_error: BaseException | None = None
        """The last error the background worker met (it logs it and tries again next pass)."""
        self.renumbered: list[dict[str, Any]] = []
        """Turns this archiver moved to a new number: {"user", "session", "was", "now"} each."""
        self.scripts = scripts
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None

    # -- passes -----------------------------------------------------------------------------------

    def archive_session(self, user: str, session: str, batch: int = 500) -> int:
        """Copy the session's pending turns into SQLite, then trim them from Redis; returns how many
        were new in SQLite. Idempotent."""
        keys = self.layout.session(user, session)
        ref = self.layout.ref(user, session)
        added, conflicts = 0, 0
        while True:
            with redis_errors(self.where, f"reading the pending turns of {ref}"):
                members = self.client.zrange(keys.pending, 0, batch - 1)
            turns = decode(members)
            if turns:
                try:  # a turn already kept is skipped (a retry); the same number with other content is refused
                    added += self.store.archive_turns(user, session, cast(list[dict[str, Any]], turns))
                except ArchiveConflictError as exc:
                    conflicts += 1
                    if conflicts > 3:  # pragma: no cover - the moved turns conflict again: a bug, not a race
                        raise
                    self._move_past_archive(user, session, exc.turns)
                    continue
                if self.on_archived is not None:
                    self.on_archived(user, session, turns)
            highest = turns[-1]["turn"] if turns else 0
            with redis_errors(self.where, f"trimming the archived turns of {ref}"):
                left = int(self.scripts.trim(keys=[keys.pending, self.layout.queue, keys.seq], args=[ref, highest]))
            if not left or not turns:
                return added

    def _move_past_archive(self, user: str, session: str, numbers: list[int]) -> None:
        keys = self.layout.session(user, session)
        top = self.store.last_archived_turn(user, session)
        with redis_errors(self.where, f"renumbering conflicting turns of {user}/{session}"):
            moved = [int(n) for n in self.scripts.renumber(keys=[keys.pending, keys.seq, keys.turns],
                                                           args=[top, *numbers])]
        for was, now in zip(moved[::2], moved[1::2], strict=True):
            self.renumbered.append({"user": user, "session": session, "was": was, "now": now})
            log.error("turn %d of %s/%s was already archived with different content (a turn counter went back, "
                      "e.g. Redis restored from an older state); both are kept, the newer one as turn %d",
                      was, user, session, now)

    def forget(self, user: str) -> int:
        """Delete every Redis key of `user` under this prefix and their index entries, in one
        transaction (the caller holds `lock`: no pass runs meanwhile). Returns the keys deleted."""
        pattern, index, queue = self.layout.user_pattern(user), self.layout.index, self.layout.queue
        with redis_errors(self.where, f"forgetting {user}"):
            doomed = list(self.client.scan_iter(match=pattern, count=500))
            members: list[Any] = [*self.client.zrange(index, 0, -1), *self.client.smembers(queue)]
            refs = [m for m in map(as_text, members) if self.layout.is_users(m, user)]
            pipe = self.client.pipeline(transaction=True)
            if doomed:
                pipe.delete(*doomed)
            if refs:
                pipe.zrem(index, *refs)
                pipe.srem(queue, *refs)
            pipe.execute()
        return len(doomed)

    def sweep(self, *, margin: float | None = None) -> int:
        """Retire every session that expires within `margin` seconds (default `sweep_margin`); returns
        how many were retired."""
        margin = self.sweep_margin if margin is None else margin
        with redis_errors(self.where, "listing sessions near expiry"):
            if margin == float("inf"):
                members: Any = self.client.zrange(self.layout.index, 0, -1)
            else:
                seconds, micros = self.client.time()
                now_ms = seconds * 1000 + micros // 1000
                members = self.client.zrangebyscore(self.layout.index, "-inf", now_ms + round(margin * 1000))
        return self.retire(list(self.layout.refs(members)), margin)

    def retire(self, refs: list[tuple[str, str]], margin: float = float("inf")) -> int:
        """Move the windows of these (user, session) pairs into pending (those within `margin`
        seconds of expiry; `inf`: all of them). Returns how many sessions were retired."""
        retired = 0
        for user, session in refs:
            keys = self.layout.session(user, session)
            with redis_errors(self.where, f"retiring {user}/{session}"):
                moved = int(self.scripts.retire(
                    keys=[keys.turns, keys.pending, keys.seq, self.layout.index, self.layout.queue],
                    args=[self.layout.ref(user, session), "inf" if margin == float("inf") else round(margin * 1000)],
                ))
            retired += moved >= 0
        return retired

    def retire_user(self, user: str) -> int:
        """Retire and archive every session of `user` now, whatever its TTL; returns how many."""
        self.layout.user_pattern(user)  # the id, checked
        with self.lock:
            with redis_errors(self.where, f"listing the sessions of {user}"):
                members: Any = self.client.zrange(self.layout.index, 0, -1)
            refs = [ref for ref in self.layout.refs(members) if ref[0] == user]
            retired = self.retire(refs)
            for ref in refs:
                self.archive_session(*ref)
        return retired

    def archive_pending(self) -> int:
        """Archive the pending turns of every session of this prefix. Returns how many were new."""
        with redis_errors(self.where, "listing sessions with pending turns"):
            members = self.client.smembers(self.layout.queue)
        return sum(self.archive_session(user, session) for user, session in self.layout.refs(members))

    def flush(self, *, margin: float | None = None) -> dict[str, int]:
        """One pass now, in the caller's thread: retire sessions within `margin` of expiry (default
        `sweep_margin`; `inf`: all), then archive all pending turns; returns {"closed", "archived"}."""
        with self.lock:
            closed = self.sweep(margin=margin)
            return {"closed": closed, "archived": self.archive_pending()}

    def retire_all(self) -> dict[str, int]:
        """Move every session's window of this prefix into the archive now (before the server stops)."""
        return self.flush(margin=float("inf"))

    # -- the background worker --------------------------------------------------------------------

    def start(self) -> None:
        """Run a pass every `interval` seconds (sooner after `wake()`) in a daemon thread."""
        self._worker = threading.Thread(target=self._work, name=f"memkit-archiver-{self.layout.prefix}", daemon=True)
        self._worker.start()

    def wake(self) -> None:
        """Ask the worker for a pass now (new pending turns)."""
        self._wake.set()

    def stop(self) -> None:
        """Stop the worker (if running) and wait for its pass to end."""
        if self._worker is not None:
            self._stop.set()
            self._wake.set()
            self._worker.join()
            self._worker = None

    def _work(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.flush()
                self.last_error = None
            except Exception as exc:  # keep going: Redis may come back; the backlog waits in Redis
                self.last_error = exc
                log.warning("archiver pass failed, will retry: %s", exc)
