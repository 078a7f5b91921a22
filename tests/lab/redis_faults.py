"""The Redis window when Redis misbehaves: it comes back older than the archive, it evicts keys, the
program using it ends without closing, REDIS_URL is not a Redis URL.

Each experiment runs a real embedded redis-server (killed and restarted for real where it says so)
over a real SQLite archive, and counts turns: acknowledged (append returned a number), kept (in
`load_session` with the content that was appended), dropped, doubled.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import time
from pathlib import Path
from typing import Any

from memkit.errors import WindowError
from memkit.store import MemoryStore
from memkit.transcript import Turn
from memkit.window import RedisWindow, connect_redis, start_embedded_redis
from memkit.window.protocol import LIFE_KEY
from memkit.servers.redis import _is_alive
from .workers import PathLike, run_worker, wait_for, worker


def count_kept(whole: list[Turn], acknowledged: dict[int, str]) -> dict[str, int]:
    """How many acknowledged turns (number -> content) a loaded session holds with their content.

    Returns:
        `acknowledged`, `kept` (a turn with that content is there, under any number), `dropped`
        (no turn has that content), `doubled` (a content is there more than once).
    """
    contents = [t["content"] for t in whole]
    kept = sum(1 for content in acknowledged.values() if content in contents)
    return {"acknowledged": len(acknowledged), "kept": kept, "dropped": len(acknowledged) - kept,
            "doubled": sum(1 for content in acknowledged.values() if contents.count(content) > 1)}


# -- a program that ends without close(), and exit hooks ------------------------------------------------------


def exit_without_close(db: PathLike, *, turns: int = 10, size: int = 3, own_server: bool = True,
                       session: str = "s1", background: bool = False) -> dict[str, Any]:
    """A fresh process appends `turns` turns to alice/`session` and ends normally without closing anything.

    With `own_server`, the window starts its own embedded server (`RedisWindow(store)`); otherwise
    the program starts one (`start_embedded_redis()`) and gives the window its client. Either way
    the server's data lives in a temporary folder and is gone when the process ends. With
    `background`, the window's archiver thread is still running when the program ends.

    Returns:
        `appended` (the numbers append returned), `archived` (the numbers the archive holds after the
        process ended), `lost` (appended but not archived) and `redis_pid`.
    """
    result = run_worker("abandon", {"db": os.fspath(db), "turns": turns, "size": size, "own_server": own_server,
                                    "session": session, "background": background})
    with MemoryStore(db) as store:
        archived = [t["turn"] for t in store.archived_turns("alice", session)]
    result.update(archived=archived, lost=len(set(result["appended"]) - set(archived)))
    return result  # type: ignore[no-any-return]


@worker("abandon")
def _abandon_worker(payload: dict[str, Any]) -> dict[str, Any]:
    store = MemoryStore(payload["db"])
    if payload["own_server"]:
        window = RedisWindow(store, size=payload["size"], background=payload["background"], persistence="none")
        handle = window.handle
    else:
        handle = start_embedded_redis(persistence="none")
        window = RedisWindow(store, handle.client, size=payload["size"], background=payload["background"])
    assert handle is not None
    session = payload.get("session", "s1")
    appended = [window.append("alice", session, "user", f"turn {i}")["turn"] for i in range(1, payload["turns"] + 1)]
    return {"appended": appended, "redis_pid": handle.pid}  # and end without close()


def exit_hook_cycles(store: MemoryStore, cycles: int = 40) -> dict[str, Any]:
    """Open and close a window with its own embedded server, and one on a server the caller started,
    `cycles` times each; count the exit hooks left registered and the handles still alive.

    Returns:
        `cycles`, `exit hooks left` (registered by the cycles and not removed) and `handles alive`
        (after close and garbage collection: an exit hook left behind would keep its handle).
    """
    import atexit
    import gc
    import weakref

    live: list[Any] = []
    real_register, real_unregister = atexit.register, atexit.unregister

    def register(function: Any, *args: Any, **kwargs: Any) -> Any:
        live.append(function)
        return real_register(function, *args, **kwargs)

    def unregister(function: Any) -> None:
        live[:] = [f for f in live if f != function]
        real_unregister(function)

    held = []
    atexit.register, atexit.unregister = register, unregister  # type: ignore[assignment]
    try:
        for _ in range(cycles):
            window = RedisWindow(store, background=True, persistence="none")
            assert window.handle is not None
            held.append(weakref.ref(window.handle))
            window.close()
            with start_embedded_redis(persistence="none") as handle:
                held.append(weakref.ref(handle))
                RedisWindow(store, handle.client, background=False).close()
    finally:
        atexit.register, atexit.unregister = real_register, real_unregister  # type: ignore[assignment]
    del window, handle
    gc.collect()
    return {"cycles": cycles, "exit hooks left": len(live), "handles alive": sum(ref() is not None for ref in held)}


# -- an append when the archive refuses ----------------------------------------------------------------------


def refused_appends(folder: PathLike, *, attempts: int = 10, cause: str = "locked") -> dict[str, Any]:
    """Append while the archive refuses the back-pressure write, and check that each append either
    stored its turn and returned, or stored nothing and raised; then retry each refused one.

    The window keeps one turn and one pending turn (`size=1, max_backlog=1`), so every append must
    archive first. `cause` "locked": another process holds the store's write lock (the store's busy
    timeout is 100 ms), released before the retry; "full": the store is at its size cap (no retry
    can succeed, so none is made).

    Returns:
        `attempts`, `raised`, `raised but stored` and `returned but not stored` (both must be 0),
        `retried` and `copies after the retries` beyond one per turn (must be 0), and `errors` (the
        classes raised).
    """
    from memkit.errors import MemkitError
    from memkit.limits import Limits
    from .locks import holding_write_lock

    folder = Path(folder)
    limits = Limits().replace(busy_timeout_ms=100, max_records_per_user=10_000, max_records_total=10_000,
                              max_db_bytes=256 * 1024 if cause == "full" else 1 << 30)
    tally = {"attempts": 0, "raised": 0, "raised but stored": 0, "returned but not stored": 0, "retried": 0}
    errors: set[str] = set()
    with MemoryStore(folder / "memory.sqlite3", limits=limits) as store, \
            start_embedded_redis(persistence="none") as handle:
        window = RedisWindow(store, handle.client, size=1, max_backlog=1, background=False, prefix="refused")
        window.append("alice", "s1", "user", "first")
        window.append("alice", "s1", "user", "second")  # "first" waits in pending: the backlog is full
        if cause == "full":
            for n in range(10_000):  # fill the store to its size cap
                try:
                    store.put("filler", "s1", "episode", f"filler-{n}", "x" * 500)
                except MemkitError:
                    break
        refused = []
        for i in range(attempts):
            content = f"attempt {i}" + ("y" * 15_000 if cause == "full" else "")
            tally["attempts"] += 1
            context = holding_write_lock(store.location) if cause == "locked" else contextlib.nullcontext()
            with context:
                raised = False
                try:
                    window.append("alice", "s1", "user", content)
                except MemkitError as exc:
                    raised = True
                    errors.add(type(exc).__name__)
                stored = content in [t["content"] for t in window.load_session("alice", "s1")]
            tally["raised"] += raised
            tally["raised but stored"] += raised and stored
            tally["returned but not stored"] += not raised and not stored
            if raised:
                refused.append(content)
        if cause == "locked":
            for content in refused:
                window.append("alice", "s1", "user", content)
                tally["retried"] += 1
        contents = [t["content"] for t in window.load_session("alice", "s1")]
        window.close()
    return {**tally, "copies after the retries": sum(max(0, contents.count(c) - 1) for c in set(contents)),
            "errors": sorted(errors)}


# -- Redis comes back older than the archive ------------------------------------------------------------


def older_state_restart(folder: PathLike, *, before: int = 10, after: int = 4, size: int = 3,
                        snapshot_at: int = 5, own_clients: bool = False) -> dict[str, Any]:
    """Run a session, restart its Redis from a snapshot older than the archive, and go on.

    A real embedded server (AOF in `folder`, reached at a TCP address that survives the restart)
    takes `before` turns of alice/s1 from two instances: the "early" one writes the first two and
    then stays idle; the other the rest, saving a snapshot (`SAVE`, the RDB a stock server restarts
    from) after turn `snapshot_at`. An archiver pass copies what left the window into SQLite. Then
    redis-server is killed and started again from the snapshot alone, at the same address: its
    counter is back at `snapshot_at` while the archive holds more. The early instance appends
    `after` turns (it remembers only the first two), then a new instance appends `after` more.
    The windows connect to the URL themselves (kit clients, which note the server's life when they
    connect), or with `own_clients` each gets a plain `redis.Redis.from_url` client (the script
    then asks INFO on every append).

    Returns:
        `archived before the restart` (highest number), `counter after the restart`, `acknowledged
        after the restart`, `kept`, `dropped`, `doubled`, `numbers reused` (new turns numbered at or
        below the archive's highest when they were appended), `renumbered` (turns the archive refused,
        kept under a new number and reported), and `lost with the older state` (acknowledged before
        the restart and never archived: what a Redis restored from an older state cannot give back).
    """
    folder = Path(folder)
    data = folder / "redis"
    data.mkdir(parents=True)
    with MemoryStore(folder / "memory.sqlite3") as store:
        first = start_embedded_redis(persistence="aof", directory=data)
        url = _listen_on_tcp(first)
        options: dict[str, Any] = {"size": size, "background": False, "prefix": "restart"}
        own: list[Any] = []

        def window_on(url: str) -> RedisWindow:
            if not own_clients:
                return RedisWindow(store, url=url, **options)
            import redis

            own.append(redis.Redis.from_url(url))
            return RedisWindow(store, own[-1], **options)

        early, writer = window_on(url), window_on(url)
        acknowledged_before: dict[int, str] = {}
        for i in range(1, before + 1):
            turn = (early if i <= 2 else writer).append("alice", "s1", "user", f"before the restart {i}")
            acknowledged_before[turn["turn"]] = turn["content"]
            if i == snapshot_at:
                writer.flush()
                first.client.save()
                snapshot = (data / "redis.db").read_bytes()
        writer.flush()
        archived_max = store.last_archived_turn("alice", "s1")
        writer.close()
        first_life = first.client.info("server")["run_id"]
        _kill(first)
        shutil.rmtree(data)
        data.mkdir()
        (data / "redis.db").write_bytes(snapshot)
        second = start_embedded_redis(persistence="none", directory=data)
        try:
            _listen_on_tcp(second, url)
            if own_clients:
                # The handle's own (kit) client has already noted the new life; plain clients must
                # not rely on that: give them the key as an older state brings it back.
                second.client.set(LIFE_KEY, first_life)
            counter = int(second.client.get(early.keys("alice", "s1").seq) or 0)
            acknowledged_after: dict[int, str] = {}
            reused = 0
            late = None
            for name, make in (("early", lambda: early), ("new", lambda: window_on(url))):
                window = late = make()
                for i in range(1, after + 1):
                    taken = store.last_archived_turn("alice", "s1")
                    turn = window.append("alice", "s1", "user", f"after the restart, {name} instance {i}")
                    acknowledged_after[turn["turn"]] = turn["content"]
                    reused += turn["turn"] <= taken
            assert late is not None
            late.archiver.retire_all()
            whole = late.load_session("alice", "s1")
            renumbered = len(early.archiver.renumbered) + len(late.archiver.renumbered)
            early.close()
            late.close()
        finally:
            for client in own:
                client.close()
            second.close()
    counts = count_kept(whole, acknowledged_after)
    return {"archived before the restart": archived_max, "counter after the restart": counter,
            "acknowledged after the restart": counts["acknowledged"], "kept": counts["kept"],
            "dropped": counts["dropped"], "doubled": counts["doubled"], "numbers reused": reused,
            "renumbered": renumbered, "lost with the older state": count_kept(whole, acknowledged_before)["dropped"]}


def _listen_on_tcp(handle: Any, url: str | None = None) -> str:
    """Make an embedded server listen on 127.0.0.1 too (at `url`'s port, or a free one): a server at a
    TCP address comes back at the same address after a restart, as a stock server does."""
    if url is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            url = f"redis://127.0.0.1:{probe.getsockname()[1]}/0"
    handle.client.config_set("bind", "127.0.0.1")
    handle.client.config_set("port", url.rsplit(":", 1)[1].split("/")[0])
    return url


def _kill(handle: Any) -> None:
    """SIGKILL an embedded redis-server (a crash: no SHUTDOWN, no fsync) and wait until it is gone."""
    pid = handle.pid
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not _is_alive(pid))
    handle.close()


# -- a server that evicts keys ----------------------------------------------------------------------------

EVICTING_POLICIES = ("allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu",
                     "volatile-random", "volatile-ttl")
"""Every `maxmemory-policy` but noeviction: each may drop a window's keys (they all carry a TTL)."""


def eviction_run(db: PathLike, *, policy: str, turns: int = 4000, sessions: int = 40,
                 headroom_bytes: int = 128 * 1024, size: int = 10, flush_every: int = 200) -> dict[str, Any]:
    """Fill a real embedded server capped at `headroom_bytes` above what it uses empty (its
    `maxmemory`), under `policy`, with `turns` turns (about 250 bytes each) over
    `sessions` sessions (an archiver pass every `flush_every` turns), and count what the archive and the
    windows still hold. The window is told to accept the risk (`accept_eviction=True`), else it
    would refuse to start; `refused_without_accepting` says whether it did.

    Returns:
        `policy`, `refused_without_accepting`, `acknowledged`, `kept`, `dropped`, `doubled`, and
        `refused appends` (appends that raised: under noeviction a full server refuses writes).
    """
    with MemoryStore(db, limits=_roomy()) as store, start_embedded_redis(persistence="none") as handle:
        handle.client.config_set("maxmemory", int(handle.client.info("memory")["used_memory"]) + headroom_bytes)
        handle.client.config_set("maxmemory-policy", policy)
        try:
            RedisWindow(store, handle.client, background=False, prefix="evict").close()
            refused = False
        except WindowError:
            refused = True
        window = RedisWindow(store, handle.client, size=size, background=False, prefix="evict", accept_eviction=True)
        acknowledged: dict[tuple[str, int], str] = {}
        failed = 0
        for i in range(turns):
            session = f"s{i % sessions}"
            content = f"turn {i} of {session} " + "x" * 200
            try:
                acknowledged[(session, window.append("alice", session, "user", content)["turn"])] = content
            except WindowError:
                failed += 1
            if i % flush_every == flush_every - 1:
                # A full server refuses the trim too; the turns wait in Redis, already in SQLite.
                with contextlib.suppress(WindowError):
                    window.flush()
        kept = dropped = doubled = 0
        for number in range(sessions):
            session = f"s{number}"
            mine = {n: c for (s, n), c in acknowledged.items() if s == session}
            counts = count_kept(window.load_session("alice", session), mine)
            kept, dropped, doubled = kept + counts["kept"], dropped + counts["dropped"], doubled + counts["doubled"]
        window.close()
    return {"policy": policy, "refused_without_accepting": refused, "acknowledged": len(acknowledged),
            "kept": kept, "dropped": dropped, "doubled": doubled, "refused appends": failed}


def _roomy() -> Any:
    from .workers import ROOMY_LIMITS, limits_from

    return limits_from(ROOMY_LIMITS)


# -- REDIS_URL values that are not Redis URLs ----------------------------------------------------------------


def url_refusals(urls: list[str], *, password: str = "hunter2") -> list[dict[str, Any]]:
    """Try `connect_redis` with each URL and report what happened, without ever showing `password`.

    Returns:
        One row per URL: `url` (as `display_url` shows it), `outcome` ("refused" for a WindowError,
        "connected", or the class of any other exception), `message` and `password shown` (bool).
    """
    from memkit.window import display_url

    rows = []
    for url in urls:
        try:
            connect_redis(url).close()
            outcome, message = "connected", ""
        except WindowError as exc:
            outcome, message = "refused", str(exc)
        except Exception as exc:
            outcome, message = type(exc).__name__, str(exc)
        rows.append({"url": display_url(url), "outcome": outcome, "message": message,
                     "password shown": password in message})
    return rows


def silent_server_seconds(timeout: float) -> tuple[float, BaseException | None]:
    """Seconds `connect_redis` takes to report a server that accepts connections and never answers,
    and what it raised (None if it connected)."""
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    started = time.monotonic()
    error: BaseException | None = None
    try:
        connect_redis(f"redis://127.0.0.1:{listener.getsockname()[1]}/0", timeout=timeout).close()
    except Exception as exc:
        error = exc
    finally:
        elapsed = time.monotonic() - started
        stop.set()
        thread.join()
        for connection in accepted:
            connection.close()
        listener.close()
    return elapsed, error
