"""The short-term window (suite `window`): memkit's `StoreWindow` (in the store's own SQLite file)
against openai-agents' `SQLiteSession` (one SQLite file too), and memkit's `RedisWindow` against its
`RedisSession` (the `bench` extra), reading the last 10 turns and appending one at 10, 100 and 1000
turns of history, beside a PING on the Redis windows' own client (the floor of a call to a server).

A peer's session is its whole identity; in memkit each session is a user's own (`USER` + session),
so a session's history is what that user's archive holds, and memkit keeps every turn (the per-user
archive bound is raised past the bench's turns). The peers are async: each has its own event loop,
a batch is one coroutine. Afterwards every session must read back the same last 10 turns and hold
as many turns.

`SQLiteSession` runs its SQLite calls in a worker thread (`asyncio.to_thread`), memkit's windows run
in the caller's; `memkit StoreWindow (worker thread)` is the same `StoreWindow`, on a file of its
own, called the session's way, so a difference that comes from the calling thread shows as one.
Each batch also records what its threads spent on a CPU and waiting for one (Linux's schedstat): at
FULL an append sleeps in `fdatasync`, and on a machine whose cores are busy the wait for a CPU after
it, not the disk, can decide the figure (bench/NOTES.md, issue 36).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window import RedisWindow, StoreWindow, connect_redis

from .peers import check_durability, durability
from .timing import alternate, paused_gc, per_call, summarize

USER = "alice"
LAST = 10
TEXT = "a short turn of about sixty characters, as a chat message is"
STORE_WINDOW = "memkit StoreWindow"
STORE_WINDOW_THREAD = "memkit StoreWindow (worker thread)"
MEMKIT = "memkit RedisWindow"
SQLITE_SESSION = "SQLiteSession"
REDIS_SESSION = "RedisSession"
CONTENDERS = (STORE_WINDOW, STORE_WINDOW_THREAD, MEMKIT, SQLITE_SESSION, REDIS_SESSION)
PAIRS = ((STORE_WINDOW, SQLITE_SESSION), (MEMKIT, REDIS_SESSION))
"""Like for like: a window in one SQLite file against a session in one, and in Redis against Redis."""
LIMITS = Limits(max_db_bytes=1 << 30, max_archived_turns_per_user=10_000)
"""Every turn kept (the checks count them), as the peers keep them: a user's archive holds one session."""
ROUND_TRIP = "PING (one round trip)"
READ, APPEND = "read last 10", "append"


def _turn(i: int) -> tuple[str, str]:
    return ("user" if i % 2 == 0 else "assistant", f"{TEXT} {i}")


def scheduler_times() -> tuple[float, float] | None:
    """Seconds this process's threads have run on a CPU and waited runnable for one, summed over
    its threads (Linux's /proc/self/task/*/schedstat); None where there is no such file."""
    on_cpu = waited = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/schedstat", encoding="ascii") as handle:
                ran, wait = handle.read().split()[:2]
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
        on_cpu, waited = on_cpu + int(ran), waited + int(wait)
    return on_cpu / 1e9, waited / 1e9


@dataclasses.dataclass
class WindowPeerConfig:
    histories: tuple[int, ...] = (10, 100, 1000)
    synchronous: tuple[str, ...] = ("FULL", "NORMAL")
    rounds: int = 9
    reads: int = 200
    appends: int = 50


class MemkitWindow:
    name = MEMKIT

    def __init__(self, folder: Path, client: Any, synchronous: str) -> None:
        self.store = MemoryStore(folder / "archive.sqlite3", limits=LIMITS,
                                 synchronous=synchronous)  # type: ignore[arg-type]
        self.window: Any = RedisWindow(self.store, client, prefix=f"memkit-bench-{synchronous.lower()}")

    def settings(self, synchronous: str) -> dict[str, str]:
        return check_durability(self.name, self.store.connection, "WAL", synchronous)

    def fill(self, session: str, n: int) -> None:
        for i in range(n):
            self.window.append(USER + session, session, *_turn(i))
        self.window.flush()

    def read_batch(self, session: str, n: int) -> float:
        return per_call(lambda _: self.window.recent(USER + session, session), n)

    def append_batch(self, session: str, first: int, n: int) -> float:
        seconds = per_call(lambda i: self.window.append(USER + session, session, *_turn(first + i)), n)
        self.window.flush()  # the archiver's work, untimed: not part of an append's wait
        return seconds

    def last(self, session: str) -> list[tuple[str, str]]:
        return [(t["role"], t["content"]) for t in self.window.recent(USER + session, session)][-LAST:]

    def count(self, session: str) -> int:
        self.window.flush()
        return len(self.window.load_session(USER + session, session))

    def close(self) -> None:
        self.window.close()
        self.store.close()


class MemkitStoreWindow(MemkitWindow):
    """`StoreWindow`: the window and its archive in one SQLite file, each append archiving what falls
    out in its own transaction (timed: there is no archiver to leave it to)."""

    name = STORE_WINDOW
    file = "window.sqlite3"

    def __init__(self, folder: Path, synchronous: str) -> None:
        self.store = MemoryStore(folder / self.file, limits=LIMITS, synchronous=synchronous)  # type: ignore[arg-type]
        self.window = StoreWindow(self.store)

    def fill(self, session: str, n: int) -> None:
        with self.store.transaction():  # one commit, as the peers fill theirs in one call: not n syncs
            super().fill(session, n)  # of the disk just before the timed appends (each nests)


class MemkitStoreWindowThread(MemkitStoreWindow):
    """The same `StoreWindow`, each call run in a worker thread from an event loop, as `SQLiteSession`
    runs its own SQLite calls (`asyncio.to_thread`): a control for the calling thread, not a pair."""

    name = STORE_WINDOW_THREAD
    file = "window-thread.sqlite3"

    def __init__(self, folder: Path, synchronous: str) -> None:
        super().__init__(folder, synchronous)
        self.loop = asyncio.new_event_loop()

    def _timed(self, call: Any, n: int) -> float:
        async def body() -> float:
            started = time.perf_counter()
            for i in range(n):
                await asyncio.to_thread(call, i)
            return (time.perf_counter() - started) / n
        with paused_gc():
            return self.loop.run_until_complete(body())

    def read_batch(self, session: str, n: int) -> float:
        return self._timed(lambda _: self.window.recent(USER + session, session), n)

    def append_batch(self, session: str, first: int, n: int) -> float:
        return self._timed(lambda i: self.window.append(USER + session, session, *_turn(first + i)), n)

    def close(self) -> None:
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()
        super().close()


class RoundTrip:
    """The floor of any call to a server: one PING on the window's own client, per read or append."""

    name = ROUND_TRIP

    def __init__(self, client: Any) -> None:
        self.client = client

    def fill(self, session: str, n: int) -> None:
        pass  # it holds nothing

    def read_batch(self, session: str, n: int) -> float:
        return per_call(lambda _: self.client.ping(), n)

    def append_batch(self, session: str, first: int, n: int) -> float:
        return self.read_batch(session, n)

    def close(self) -> None:
        pass  # the client is the window's


class _AsyncPeer:
    """An openai-agents session class driven from its own event loop."""

    name = ""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[str, Any] = {}

    def _make(self, session: str) -> Any:
        raise NotImplementedError

    def session(self, name: str) -> Any:
        if name not in self.sessions:
            self.sessions[name] = self._make(name)
        return self.sessions[name]

    def fill(self, session: str, n: int) -> None:
        items = [{"role": role, "content": content} for role, content in map(_turn, range(n))]
        if items:
            self.loop.run_until_complete(self.session(session).add_items(items))

    def _timed(self, calls: list[Any]) -> float:
        async def body() -> float:
            started = time.perf_counter()
            for call in calls:
                await call()
            return (time.perf_counter() - started) / len(calls)
        with paused_gc():
            return self.loop.run_until_complete(body())

    def read_batch(self, session: str, n: int) -> float:
        s = self.session(session)
        return self._timed([lambda: s.get_items(limit=LAST)] * n)

    def append_batch(self, session: str, first: int, n: int) -> float:
        s = self.session(session)
        items = [[{"role": role, "content": content}] for role, content in map(_turn, range(first, first + n))]
        return self._timed([lambda item=item: s.add_items(item) for item in items])

    def last(self, session: str) -> list[tuple[str, str]]:
        items = self.loop.run_until_complete(self.session(session).get_items(limit=LAST))
        return [(i["role"], i["content"]) for i in items]

    def count(self, session: str) -> int:
        return len(self.loop.run_until_complete(self.session(session).get_items()))


class AgentsSQLite(_AsyncPeer):
    name = SQLITE_SESSION

    def __init__(self, folder: Path, synchronous: str) -> None:
        super().__init__()
        from agents.memory import SQLiteSession

        self.path = folder / "agents.sqlite3"
        probe = SQLiteSession("probe", self.path)
        with probe._locked_connection() as conn:  # what the class sets on its own connections
            default = durability(conn)["synchronous"]
        probe.close()
        self.session_class: type = SQLiteSession  # its own configuration, when it already is the run's
        if default != synchronous.upper():
            class Configured(SQLiteSession):
                """SQLiteSession with `synchronous` set on each connection it opens."""

                def _configure_connection(self, conn: Any) -> None:  # type: ignore[override]
                    SQLiteSession._configure_connection(conn)
                    conn.execute(f"PRAGMA synchronous = {synchronous}")
            self.session_class = Configured

    def _make(self, session: str) -> Any:
        return self.session_class(session, self.path)

    def settings(self, synchronous: str) -> dict[str, str]:
        """Every connection the sessions opened (one per worker thread) is checked."""
        found = [check_durability(self.name, conn, "WAL", synchronous)
                 for s in self.sessions.values() for conn in list(s._connections)]
        if not found:
            raise RuntimeError(f"{self.name}: no connection was opened, nothing to check")
        return found[-1]

    def close(self) -> None:
        for s in self.sessions.values():
            s.close()
        self.loop.run_until_complete(self.loop.shutdown_default_executor())
        self.loop.close()


class AgentsRedis(_AsyncPeer):
    name = REDIS_SESSION

    def __init__(self, url: str, ttl: float, synchronous: str) -> None:
        super().__init__()
        import redis.asyncio
        from agents.extensions.memory import RedisSession

        self.session_class = RedisSession
        self.client = redis.asyncio.from_url(url)
        self.ttl = int(ttl)
        self.prefix = f"agents-bench-{synchronous.lower()}"

    def _make(self, session: str) -> Any:
        return self.session_class(session, redis_client=self.client, key_prefix=self.prefix, ttl=self.ttl)

    def settings(self, synchronous: str) -> dict[str, str]:
        return {"journal_mode": "none (Redis)", "synchronous": "none (Redis)"}

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


def _one_setting(handle: Any, synchronous: str, config: WindowPeerConfig, out: dict[str, Any], log: Any) -> None:
    """Every history at one `synchronous`: rows, checks and settings into `out`."""
    folder = Path(tempfile.mkdtemp(prefix="memkit-bench-window-peers-"))
    handle.client.flushdb()
    contenders: list[Any] = []
    try:
        kit = MemkitWindow(folder, handle.client, synchronous)
        contenders = [MemkitStoreWindow(folder, synchronous), MemkitStoreWindowThread(folder, synchronous), kit,
                      AgentsSQLite(folder, synchronous), AgentsRedis(handle.url, kit.window.ttl, synchronous)]
        for history in config.histories:
            out["rows"] += _time_history([*contenders, RoundTrip(handle.client)], history, synchronous, config, log)
            out["checks"] += _check_history(contenders, history, synchronous, config)
        out["settings"] += [{"synchronous_run": synchronous, "contender": c.name, **c.settings(synchronous)}
                            for c in contenders]
    finally:
        for contender in contenders:
            contender.close()
        shutil.rmtree(folder, ignore_errors=True)


def run_peers(config: WindowPeerConfig, log: Any = print) -> dict[str, Any]:
    """Time read-last-10 and append for every contender, history and `synchronous`; return rows and checks."""
    handle = connect_redis(persistence="none")
    version = handle.client.info("server")["redis_version"]
    out: dict[str, Any] = {"rows": [], "checks": [], "settings": []}
    try:
        for synchronous in config.synchronous:
            _one_setting(handle, synchronous, config, out, log)
    finally:
        where = "embedded redis-server, unix socket, persistence none" if handle.embedded else "REDIS_URL"
        handle.close()
    return {**out, "redis": f"Redis {version} ({where})", "rounds": config.rounds, "reads": config.reads,
            "appends": config.appends}


def _time_history(contenders: list[Any], history: int, synchronous: str, config: WindowPeerConfig,
                  log: Any) -> list[dict[str, Any]]:
    reader = f"h{history}-read"
    for c in contenders:
        c.fill(reader, history)
    reads: dict[str, list[float]] = {}
    appends: dict[str, list[float]] = {}
    spent: dict[tuple[str, str], list[tuple[float, float]]] = {}  # (op, contender): per call on a CPU, waiting

    def timed(op: str, c: Any, batch: Any, n: int) -> float:
        before = scheduler_times()
        seconds = float(batch())
        after = scheduler_times()
        if before and after:
            spent.setdefault((op, c.name), []).append(((after[0] - before[0]) / n, (after[1] - before[1]) / n))
        return seconds

    for r in range(config.rounds):
        alternate(1, contenders, lambda c, _: timed(READ, c, lambda: c.read_batch(reader, config.reads),
                                                    config.reads), reads, offset=r)
        for c in contenders:  # each round's sessions filled first, untimed
            c.fill(f"h{history}-r{r}", history)

        def append(c: Any, _: int, session: str = f"h{history}-r{r}") -> float:
            return timed(APPEND, c, lambda: c.append_batch(session, history, config.appends), config.appends)
        alternate(1, contenders, append, appends, offset=r + 1)

    def scheduler(op: str, name: str) -> dict[str, float]:
        """Medians over the batches: seconds per call on a CPU and waiting for one (threads summed)."""
        found = spent.get((op, name))
        return {"cpu_s": statistics.median(x[0] for x in found),
                "cpu_wait_s": statistics.median(x[1] for x in found)} if found else {}
    rows: list[dict[str, Any]] = [
        {"synchronous": synchronous, "history": history, "operation": op, "contender": name, **summarize(times),
         **scheduler(op, name)}
        for op, samples in ((READ, reads), (APPEND, appends)) for name, times in samples.items()]
    log(f"    synchronous={synchronous}, {history:>4} turns: " + "  ".join(
        f"{row['operation']} {row['contender']} {row['median_s'] * 1e6:.1f} us"
        + (f" (waiting for a CPU {row['cpu_wait_s'] * 1e6:.0f})" if "cpu_wait_s" in row else "") for row in rows))
    return rows


def _check_history(contenders: list[Any], history: int, synchronous: str,
                   config: WindowPeerConfig) -> list[dict[str, Any]]:
    """The same last 10 turns and the same number of turns in every contender, for every session used."""
    sessions = [f"h{history}-read"] + [f"h{history}-r{r}" for r in range(config.rounds)]
    last_disagree = count_disagree = 0
    for session in sessions:
        lasts = [c.last(session) for c in contenders]
        counts = [c.count(session) for c in contenders]
        last_disagree += any(x != lasts[0] for x in lasts[1:]) or len(lasts[0]) != min(LAST, counts[0])
        expected = history if session.endswith("-read") else history + config.appends
        count_disagree += any(n != expected for n in counts)
    return [{"synchronous": synchronous, "history": history, "check": "same last 10 turns",
             "sessions": len(sessions), "disagreements": last_disagree},
            {"synchronous": synchronous, "history": history, "check": "every turn kept (history + appends)",
             "sessions": len(sessions), "disagreements": count_disagree}]
