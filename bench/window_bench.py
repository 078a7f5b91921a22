"""The short-term window: its latency beside in-process and SQLite-only windows, its AOF policy's
price, and memkit's window against its peers, openai-agents `SQLiteSession` and `RedisSession`.

`latency` (suite `window`): append a turn and read the window, each contender with a 10-turn window
of a session of its own: `InProcessWindow` without a store (a deque; the baseline) and with one
(`+arch`: what falls out is archived to SQLite inside append), `RedisWindow` (REDIS_URL, else an
embedded redis-server, persistence "none"; the archiver in its background thread), and a table of
every turn in SQLite (one BEGIN IMMEDIATE per append, a `LIMIT 10` query per read) at FULL and at
NORMAL. Each round runs every contender once in rotating order; a contender's figure is the median
over rounds of the mean over its batch.

`aof` (suite `aof`): one exchange appended (two turns, one transaction) on the workspace's server
with `appendfsync always` (the default) and `everysec`, alternating rounds, beside the disk's fsync.

`peers` (part of suite `peers`): read the last 10 turns and append one turn, at 10, 100 and 1000
turns of history: memkit's `RedisWindow` (its defaults, over a store at the run's `synchronous`;
flushed untimed after each append batch, the flush reported apart), `SQLiteSession` (one file, WAL,
at the run's `synchronous`) and `RedisSession` (the same server, memkit's TTL). The floor is
`PING (one round trip)` on the window's own client in the same rounds. The peers are async: each
has its own event loop and a batch is one coroutine. Each round uses fresh sessions filled with the
history; afterwards every session must read back the same last 10 turns and hold as many turns.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import platform
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memkit.clock import iso, utc_now
from memkit.limits import Limits
from memkit.store import MemoryStore
from memkit.window import InProcessWindow, RedisWindow, connect_redis

from .peers import check_durability, durability
from .timing import paused_gc, per_call, rotated

USER = "alice"
LAST = SIZE = 10
TEXT = "a short turn of about sixty characters, as a chat message is"
MEMKIT = "memkit RedisWindow"
SQLITE_SESSION = "SQLiteSession"
REDIS_SESSION = "RedisSession"
CONTENDERS = (MEMKIT, SQLITE_SESSION, REDIS_SESSION)
ROUND_TRIP = "PING (one round trip)"
READ, APPEND = "read last 10", "append"


def _turn(i: int) -> tuple[str, str]:
    return ("user" if i % 2 == 0 else "assistant", f"{TEXT} {i}")


# -- latency: the window beside in-process and SQLite-only windows --------------------------------

class SQLiteOnlyWindow:
    """The window as a query over a table of every turn: no second tier, one commit per append."""

    def __init__(self, path: Path, synchronous: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {synchronous}")
        self.conn.execute("CREATE TABLE turns (user_id TEXT, session_id TEXT, turn INTEGER, role TEXT, content TEXT,"
                          " at TEXT, PRIMARY KEY (user_id, session_id, turn)) WITHOUT ROWID")

    def append(self, user: str, session: str, role: str, content: str) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO turns SELECT ?, ?, coalesce(max(turn), 0) + 1, ?, ?, ? FROM turns"
                          " WHERE user_id = ? AND session_id = ?",
                          (user, session, role, content, iso(utc_now()), user, session))
        self.conn.execute("COMMIT")

    def recent(self, user: str, session: str) -> list[tuple[Any, ...]]:
        return self.conn.execute("SELECT turn, role, content, at FROM turns WHERE user_id = ? AND session_id = ?"
                                 " ORDER BY turn DESC LIMIT ?", (user, session, SIZE)).fetchall()[::-1]

    def close(self) -> None:
        self.conn.close()


def _latency_rounds(contenders: dict[str, Any], rounds: int, batch: int) -> dict[str, dict[str, float]]:
    names = list(contenders)
    # A session of its own per contender: the two that archive share one store, which refuses a
    # turn number already archived with other content.
    sessions = {name: f"bench{number}" for number, name in enumerate(names)}
    samples: dict[str, dict[str, list[float]]] = {n: {"append": [], "read": []} for n in names}
    for name, window in contenders.items():  # warm up: a full window in every contender
        for i in range(SIZE * 2):
            window.append(USER, sessions[name], "user", f"{TEXT} {i}")
    for round_no in range(rounds):
        for name in rotated(names, round_no):
            window, session = contenders[name], sessions[name]

            def append(i: int, w: Any = window, s: str = session) -> None:
                w.append(USER, s, "user" if i % 2 else "assistant", f"{TEXT} {i}")

            def read(_: int, w: Any = window, s: str = session) -> None:
                w.recent(USER, s)
            samples[name]["append"].append(per_call(append, batch))
            samples[name]["read"].append(per_call(read, batch))
    return {n: {op: statistics.median(v) for op, v in ops.items()} for n, ops in samples.items()}


def latency(rounds: int = 7, batch: int = 200, log: Any = print) -> dict[str, Any]:
    """Append and read-window latency of every contender; medians (seconds) and the run's header."""
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="memkit-bench-window-"))
    store = MemoryStore(folder / "archive.sqlite3", limits=Limits(max_db_bytes=1 << 30))
    handle = connect_redis(persistence="none")
    contenders: dict[str, Any] = {
        "in-process": InProcessWindow(SIZE), "in-process+arch": InProcessWindow(SIZE, store=store),
        "redis": RedisWindow(store, handle.client, size=SIZE, prefix="memkit-bench", background=True),
        "sqlite FULL": SQLiteOnlyWindow(folder / "full.sqlite3", "FULL"),
        "sqlite NORMAL": SQLiteOnlyWindow(folder / "normal.sqlite3", "NORMAL")}
    try:
        medians = _latency_rounds(contenders, rounds, batch)
        contenders["redis"].flush()
        version = handle.client.info("server")["redis_version"]
    finally:
        for window in contenders.values():
            window.close()
        handle.close()
        store.close()
        shutil.rmtree(folder, ignore_errors=True)
    where = ("embedded redis-server (unix socket, persistence none)" if handle.embedded
             else f"REDIS_URL (scheme {handle.url.split(':', 1)[0]})")
    header = (f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, Redis {version} ({where}), "
              f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}; {rounds} rounds x {batch} calls "
              f"per contender and operation, window of {SIZE} turns.")
    log(f"    window latency done in {time.perf_counter() - started:.1f} s")
    return {"status": "ok", "wall_s": round(time.perf_counter() - started, 1), "header": header, "medians": medians}


# -- aof: appendfsync always against everysec -------------------------------------------------------

def _fsync_latency(folder: Path, n: int = 200) -> float:
    """Median seconds of one small write + fsync on the disk that holds `folder`."""
    with open(folder / "fsync-probe", "wb") as file:
        def write() -> None:
            file.write(b"x" * 64)
            file.flush()
            os.fsync(file.fileno())
        return statistics.median(per_call(lambda _: write(), 1) for _ in range(n))


def _exchange_latency(folder: Path, appendfsync: str, appends: int) -> float:
    """Median seconds of one `append_exchange` on a workspace server with this fsync policy."""
    from memkit.servers.workspace import WorkspaceRedis

    with MemoryStore(folder / "memory.sqlite3") as store, \
            WorkspaceRedis(folder / "window", appendfsync=appendfsync) as redis, \
            RedisWindow(store, redis.client, size=16, background=False) as window:
        samples = []
        for n in range(appends):
            samples.append(per_call(lambda _: window.append_exchange(USER, "s1", f"question {n}",  # noqa: B023
                                                                     f"answer {n}"), 1))  # noqa: B023
            if n % 8 == 7:
                window.flush()  # keep the archive out of the timed appends
        return statistics.median(samples)


def aof(rounds: int = 5, appends: int = 200, log: Any = print) -> dict[str, Any]:
    """`append_exchange` under `appendfsync always` and `everysec`, and the disk's fsync (seconds)."""
    medians: dict[str, list[float]] = {"everysec": [], "always": []}
    with tempfile.TemporaryDirectory(prefix="memkit-aof-") as scratch:
        root = Path(scratch)
        disk = _fsync_latency(root)
        for r in range(rounds):
            for policy in rotated(list(medians), r):
                folder = root / f"{policy}-{r}"
                folder.mkdir()
                medians[policy].append(_exchange_latency(folder, policy, appends))
    out = {"disk_fsync_s": disk, **{p: statistics.median(v) for p, v in medians.items()},
           "rounds": rounds, "appends": appends}
    log(f"    fsync {disk * 1e6:.0f} us, everysec {out['everysec'] * 1e6:.0f} us, always {out['always'] * 1e6:.0f} us")
    return out


# -- peers: memkit's window against openai-agents sessions -------------------------------------------

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
        return per_call(lambda _: self.window.recent(USER, session), n)

    def append_batch(self, session: str, first: int, n: int) -> float:
        seconds = per_call(lambda i: self.window.append(USER, session, *_turn(first + i)), n)
        self.flush_s.append(per_call(lambda _: self.window.flush(), 1) / n)
        return seconds

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
        contenders = [kit, AgentsSQLite(folder, synchronous), AgentsRedis(handle.url, kit.window.ttl, synchronous)]
        for history in config.histories:
            out["rows"] += _time_history([*contenders, RoundTrip(handle.client)], history, synchronous, config, log)
            out["checks"] += _check_history(contenders, history, synchronous, config)
        out["settings"] += [{"synchronous_run": synchronous, "contender": c.name, **c.settings(synchronous)}
                            for c in contenders]
        if synchronous == config.synchronous[0]:
            out["server_us"] = {c.name: _server_us(handle.client, c, config) for c in contenders
                                if c.name != SQLITE_SESSION}
        out["rows"].append({"synchronous": synchronous, "history": None, "operation": "archive (flush, per turn)",
                            "contender": MEMKIT, "median_s": statistics.median(kit.flush_s) if kit.flush_s else None})
    finally:
        for contender in contenders:
            contender.close()
        shutil.rmtree(folder, ignore_errors=True)


def run_peers(config: WindowPeerConfig, log: Any = print) -> dict[str, Any]:
    """Time read-last-10 and append for every contender, history and `synchronous`; return rows and checks."""
    handle = connect_redis(persistence="none")
    version = handle.client.info("server")["redis_version"]
    out: dict[str, Any] = {"rows": [], "checks": [], "settings": [], "server_us": {}}
    try:
        for synchronous in config.synchronous:
            _one_setting(handle, synchronous, config, out, log)
    finally:
        where = "embedded redis-server, unix socket, persistence none" if handle.embedded else "REDIS_URL"
        handle.close()
    return {**out, "redis": f"Redis {version} ({where})", "rounds": config.rounds, "reads": config.reads,
            "appends": config.appends}


def _server_us(client: Any, contender: Any, config: WindowPeerConfig) -> dict[str, float]:
    """What a read and an append cost the Redis server (INFO commandstats), per call, at 100 turns."""
    session = "server-cost"
    contender.fill(session, 100)
    out = {}
    for op, call, calls in ((READ, lambda: contender.read_batch(session, config.reads), config.reads),
                            (APPEND, lambda: contender.append_batch(session, 100, config.appends), config.appends)):
        client.config_resetstat()
        call()
        stats = client.info("commandstats")
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
            samples.setdefault((READ, c.name), []).append(c.read_batch(reader, config.reads))
        for c in contenders:
            c.fill(f"h{history}-r{r}", history)
        for c in rotated(contenders, r + 1):
            samples.setdefault((APPEND, c.name), []).append(c.append_batch(f"h{history}-r{r}", history,
                                                                          config.appends))
    rows: list[dict[str, Any]] = [{"synchronous": synchronous, "history": history, "operation": op, "contender": name,
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
