"""The short-term window against its peers: openai-agents `SQLiteSession` and `RedisSession`.

Two operations a conversation does on every reply, at 10, 100 and 1000 turns of history:

* read the last 10 turns: memkit `RedisWindow.recent` (its window is 10 turns; older ones are in
  the SQLite archive), `await session.get_items(limit=10)` for the peers;
* append one turn: `RedisWindow.append`, `await session.add_items([item])`.

Contenders (one Redis server for both Redis contenders: REDIS_URL, else memkit's embedded one):

* `memkit RedisWindow`  its defaults (window 10, TTL 1800 s, background archiver) over a memkit
                        store at the run's `synchronous`; after each timed append batch the window
                        is flushed (untimed, reported apart) so no archiving spills into another
                        contender's batch.
* `SQLiteSession`       one file for all sessions, as the class opens it (WAL; thread-local
                        connections used through `asyncio.to_thread`), at the run's `synchronous`.
* `RedisSession`        a `redis.asyncio` client on the same server, `ttl` = memkit's TTL so both
                        expire idle sessions.

And a floor, as the fsync probe is for the store: `PING (one round trip)`, the same sync client
on the same server sending PING, timed in the same rounds. No client of a server can read or append
in less than one round trip; "memkit in round trips" is memkit's time over it.

The peers are async: each has its own event loop, and a batch is one coroutine that awaits the
calls one after the other, timed inside the loop. Each round uses fresh sessions filled with the
round's history (appends add `appends` turns to it); contenders alternate in rotating order. After
timing, every session must read back the same last 10 turns and hold the same number of turns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window import RedisWindow, connect_redis

from .peers import check_durability, durability
from .timing import rotated

USER = "alice"
LAST = 10
TEXT = "a short turn of about sixty characters, as a chat message is"
MEMKIT = "memkit RedisWindow"
SQLITE_SESSION = "SQLiteSession"
REDIS_SESSION = "RedisSession"
CONTENDERS = (MEMKIT, SQLITE_SESSION, REDIS_SESSION)
ROUND_TRIP = "PING (one round trip)"


@dataclasses.dataclass
class WindowPeerConfig:
    histories: tuple[int, ...] = (10, 100, 1000)
    synchronous: tuple[str, ...] = ("FULL", "NORMAL")
    rounds: int = 9
    reads: int = 200
    appends: int = 50


def _turn(i: int) -> tuple[str, str]:
    return ("user" if i % 2 == 0 else "assistant", f"{TEXT} {i}")


def _paused_gc(body: Callable[[], float]) -> float:
    enabled = gc.isenabled()
    gc.disable()
    try:
        return body()
    finally:
        if enabled:
            gc.enable()


class MemkitWindow:
    name = MEMKIT

    def __init__(self, folder: Path, client: Any, synchronous: str) -> None:
        self.store = MemoryStore(folder / "archive.sqlite3", limits=Limits(max_db_bytes=1 << 30),
                                 synchronous=synchronous)  # type: ignore[arg-type]
        self.window = RedisWindow(self.store, client, prefix=f"memkit-bench-{synchronous.lower()}")
        self.flush_s: list[float] = []

    def settings(self, synchronous: str) -> dict[str, str]:
        return check_durability(self.name, self.store.connection, "WAL", synchronous)

    def fill(self, session: str, n: int) -> None:
        for i in range(n):
            self.window.append(USER, session, *_turn(i))
        self.window.flush()

    def read_batch(self, session: str, n: int) -> float:
        recent = self.window.recent

        def body() -> float:
            started = time.perf_counter()
            for _ in range(n):
                recent(USER, session)
            return (time.perf_counter() - started) / n
        return _paused_gc(body)

    def append_batch(self, session: str, first: int, n: int) -> float:
        append = self.window.append
        turns = [_turn(i) for i in range(first, first + n)]

        def body() -> float:
            started = time.perf_counter()
            for role, content in turns:
                append(USER, session, role, content)
            return (time.perf_counter() - started) / n
        per_call = _paused_gc(body)
        started = time.perf_counter()
        self.window.flush()
        self.flush_s.append((time.perf_counter() - started) / n)
        return per_call

    def last(self, session: str) -> list[tuple[str, str]]:
        return [(t["role"], t["content"]) for t in self.window.recent(USER, session)][-LAST:]

    def count(self, session: str) -> int:
        self.window.flush()
        return len(self.window.load_session(USER, session))

    def close(self) -> None:
        self.window.close()
        self.store.close()


class RoundTrip:
    """The floor of any call to a server: one PING on the window's own client, per read or append."""

    name = ROUND_TRIP

    def __init__(self, client: Any) -> None:
        self.client = client

    def fill(self, session: str, n: int) -> None:
        pass  # it holds nothing

    def _pings(self, n: int) -> float:
        ping = self.client.ping

        def body() -> float:
            started = time.perf_counter()
            for _ in range(n):
                ping()
            return (time.perf_counter() - started) / n
        return _paused_gc(body)

    def read_batch(self, session: str, n: int) -> float:
        return self._pings(n)

    def append_batch(self, session: str, first: int, n: int) -> float:
        return self._pings(n)

    def close(self) -> None:
        pass  # the client is the window's


class _AsyncPeer:
    """An openai-agents session class driven from its own event loop."""

    name = ""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[str, Any] = {}

    def _session(self, session: str) -> Any:
        raise NotImplementedError

    def session(self, name: str) -> Any:
        if name not in self.sessions:
            self.sessions[name] = self._session(name)
        return self.sessions[name]

    def fill(self, session: str, n: int) -> None:
        items = [{"role": role, "content": content} for role, content in map(_turn, range(n))]
        if items:
            self.loop.run_until_complete(self.session(session).add_items(items))

    def read_batch(self, session: str, n: int) -> float:
        s = self.session(session)

        async def reads() -> float:
            started = time.perf_counter()
            for _ in range(n):
                await s.get_items(limit=LAST)
            return (time.perf_counter() - started) / n
        return _paused_gc(lambda: self.loop.run_until_complete(reads()))

    def append_batch(self, session: str, first: int, n: int) -> float:
        s = self.session(session)
        items = [[{"role": role, "content": content}] for role, content in map(_turn, range(first, first + n))]

        async def appends() -> float:
            started = time.perf_counter()
            for item in items:
                await s.add_items(item)
            return (time.perf_counter() - started) / n
        return _paused_gc(lambda: self.loop.run_until_complete(appends()))

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
        if default == synchronous.upper():
            self.session_class: type = SQLiteSession  # its own configuration already is the run's
        else:
            class Configured(SQLiteSession):
                """SQLiteSession with `synchronous` set on each connection it opens."""

                def _configure_connection(self, conn: Any) -> None:  # type: ignore[override]
                    SQLiteSession._configure_connection(conn)
                    conn.execute(f"PRAGMA synchronous = {synchronous}")
            self.session_class = Configured

    def _session(self, session: str) -> Any:
        return self.session_class(session, self.path)

    def settings(self, synchronous: str) -> dict[str, str]:
        """Every connection the sessions opened (one per worker thread) is checked."""
        found = None
        for s in self.sessions.values():
            for conn in list(s._connections):
                found = check_durability(self.name, conn, "WAL", synchronous)
        if found is None:
            raise RuntimeError(f"{self.name}: no connection was opened, nothing to check")
        return found

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

    def _session(self, session: str) -> Any:
        return self.session_class(session, redis_client=self.client, key_prefix=self.prefix, ttl=self.ttl)

    def settings(self, synchronous: str) -> dict[str, str]:
        return {"journal_mode": "none (Redis)", "synchronous": "none (Redis)"}

    def close(self) -> None:
        self.loop.run_until_complete(self.client.aclose())
        self.loop.close()


def run(config: WindowPeerConfig, log: Any = print) -> dict[str, Any]:
    """Time read-last-10 and append for every contender, history and `synchronous`; return rows and checks."""
    handle = connect_redis(persistence="none")
    version = handle.client.info("server")["redis_version"]
    server: dict[str, dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    checks: list[dict[str, Any]] = []
    settings: list[dict[str, Any]] = []
    try:
        for synchronous in config.synchronous:
            folder = Path(tempfile.mkdtemp(prefix="memkit-bench-window-peers-"))
            handle.client.flushdb()
            contenders: list[Any] = []
            try:
                kit = MemkitWindow(folder, handle.client, synchronous)
                contenders = [kit, AgentsSQLite(folder, synchronous),
                              AgentsRedis(handle.url, kit.window.ttl, synchronous)]
                floor = RoundTrip(handle.client)
                for history in config.histories:
                    rows += _time_history([*contenders, floor], history, synchronous, config, log)
                    checks += _check_history(contenders, history, synchronous, config)
                settings += [{"synchronous_run": synchronous, "contender": c.name, **c.settings(synchronous)}
                             for c in contenders]
                if synchronous == config.synchronous[0]:
                    server = {c.name: _server_us(handle.client, c, config) for c in contenders if c.name != SQLITE_SESSION}
                flush = statistics.median(kit.flush_s) if kit.flush_s else None
                rows.append({"synchronous": synchronous, "history": None, "operation": "archive (flush, per turn)",
                             "contender": MEMKIT, "median_s": flush})
            finally:
                for contender in contenders:
                    contender.close()
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        where = "embedded redis-server, unix socket, persistence none" if handle.embedded else "REDIS_URL"
        handle.close()
    return {"rows": rows, "checks": checks, "settings": settings, "redis": f"Redis {version} ({where})",
            "server_us": server,
            "rounds": config.rounds, "reads": config.reads, "appends": config.appends}


def _server_us(client: Any, contender: Any, config: WindowPeerConfig) -> dict[str, float]:
    """What a read and an append cost the Redis server (INFO commandstats), per call, at 100 turns."""
    session = "server-cost"
    contender.fill(session, 100)
    out = {}
    for op, call in (("read last 10", lambda: contender.read_batch(session, config.reads)),
                     ("append", lambda: contender.append_batch(session, 100, config.appends))):
        client.config_resetstat()
        call()
        stats = client.info("commandstats")
        calls = config.reads if op == "read last 10" else config.appends
        out[op] = sum(v["usec"] for k, v in stats.items() if k != "cmdstat_config") / calls
    return out


def _time_history(contenders: list[Any], history: int, synchronous: str, config: WindowPeerConfig,
                  log: Any) -> list[dict[str, Any]]:
    reader = f"h{history}-read"
    for c in contenders:
        c.fill(reader, history)
    samples: dict[tuple[str, str], list[float]] = {}
    for r in range(config.rounds):
        for c in rotated(contenders, r):
            samples.setdefault(("read last 10", c.name), []).append(c.read_batch(reader, config.reads))
        for c in contenders:
            c.fill(f"h{history}-r{r}", history)
        for c in rotated(contenders, r + 1):
            samples.setdefault(("append", c.name), []).append(c.append_batch(f"h{history}-r{r}", history,
                                                                            config.appends))
    rows = [{"synchronous": synchronous, "history": history, "operation": op, "contender": name,
             "median_s": statistics.median(times), "min_s": min(times), "max_s": max(times)}
            for (op, name), times in samples.items()]
    log(f"    synchronous={synchronous}, {history:>4} turns: " + "  ".join(
        f"{row['operation']} {row['contender']} {row['median_s'] * 1e6:.1f} us" for row in rows))
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
