"""A PostgreSQL server of the kit's own in a temporary folder: the default when no URL is given.

`start_embedded_postgres()` runs `initdb` into a new temporary folder and starts `postgres` on a
Unix socket inside it: no TCP port, so nothing else on the machine reaches it or clashes with it.
The binaries are the `pgserver` wheel's (PostgreSQL 16, no `pg_trgm`) unless `bin_dir` names an
installed PostgreSQL. `close()`, the interpreter's exit, or a watchdog process when the starter
dies without exit hooks (SIGKILL) stops the server and removes the folder. As root (which
PostgreSQL refuses) it runs as `postgres` or `nobody`: docs/design/postgres.md.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import IO, Any, Literal
from collections.abc import Mapping

from ...errors import StoreError, install_hint
from ...servers.watchdog import Watchdog

_STOP_SIGNALS = {"fast": signal.SIGINT, "immediate": signal.SIGQUIT}
_SOCKET_NAME = ".s.PGSQL.5432"


def pgserver_bin_dir() -> Path:
    """The bin folder of the `pgserver` wheel's PostgreSQL (found without importing pgserver).

    Raises:
        ImportError: pgserver is not installed (it is in the `postgres` extra).
    """
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"the embedded PostgreSQL needs pgserver: {install_hint('postgres')}")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _server_user() -> pwd.struct_passwd | None:
    """Who runs the server: the current user, or (as root, whom PostgreSQL refuses) postgres or nobody."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise StoreError("running as root, and there is neither a 'postgres' nor a 'nobody' user to run PostgreSQL as")


class EmbeddedPostgres:
    """A running PostgreSQL server in a temporary folder, reached at `url` (a Unix socket).

    Use `start_embedded_postgres()` to make one. `stop()` and `start()` stop and restart the same
    server with its data (to show what clients see while it is down); `close()` ends it for good.
    If this process dies without closing it (SIGKILL included), its watchdog stops the server (a
    fast shutdown) and removes the folder.

    Attributes:
        url: `postgresql://postgres@/postgres?host=FOLDER`: the superuser, trust authentication on
            a socket only this machine's processes of the folder's owner (and root) can open.
        folder: the temporary folder (data, socket, server.log).
        bin_dir: the PostgreSQL binaries it runs.
    """

    def __init__(self, bin_dir: Path, settings: Mapping[str, str], startup_timeout: float) -> None:
        self.bin_dir = bin_dir
        self.settings = dict(settings)
        self.startup_timeout = startup_timeout
        self._user = _server_user()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        # The watchdog first: it stops the server and removes the folder if this process dies without
        # close(), from the moment the folder exists.
        self._watchdog = Watchdog(stop_signal=_STOP_SIGNALS["fast"], grace=60.0)
        try:
            self.folder = Path(self._watchdog.make_folder("memkit-pg-"))
        except BaseException:
            self._watchdog.disarm()
            raise
        atexit.register(self.close)
        try:
            if len(str(self.folder / _SOCKET_NAME)) > 100:
                raise StoreError(f"the temporary folder {self.folder} is too long a path for a Unix socket; "
                                 "set TMPDIR shorter")
            if self._user is not None:
                os.chown(self.folder, self._user.pw_uid, self._user.pw_gid)
                if not self._reachable():
                    self.bin_dir = self._reachable_copy()
            self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                      "--no-locale", "--no-sync", "--no-instructions")
            self.start()
        except BaseException:
            self.close()
            raise
        self.url = f"postgresql://postgres@/postgres?host={self.folder}"

    @property
    def data(self) -> Path:
        """The data directory (PGDATA)."""
        return self.folder / "data"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    def _as_server_user(self) -> dict[str, Any]:
        if self._user is None:
            return {"cwd": self.folder}
        return {"cwd": self.folder, "user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def _reachable(self) -> bool:
        """Whether the server's user can run the binaries (every folder above them must let it in)."""
        try:
            done = subprocess.run([str(self.bin_dir / "postgres"), "--version"], capture_output=True,
                                  timeout=self.startup_timeout, **self._as_server_user())
        except PermissionError:
            return False
        return done.returncode == 0

    def _reachable_copy(self) -> Path:
        """The installation (bin, lib, share, the wheel's libraries) inside the server's own folder,
        which its user can enter.

        Hard links where the folder is on the same file system (instant; the files stay root's and
        read-only to the server's user), a copy elsewhere. PostgreSQL finds its `lib` and `share`
        beside its `bin`, so the linked installation runs as the original would. Removed with the folder.

        Raises:
            StoreError: the server's user cannot run even that copy.
        """
        # The wheel's layout, kept: its programs find their libraries at $ORIGIN/../../../pgserver.libs
        # (auditwheel's RPATH), and PostgreSQL finds lib/ and share/ beside bin/.
        install = self.bin_dir.parent
        package, root = install.parent, self.folder / "pg"
        target = root / package.name / install.name
        parts = [(install / part, target / part) for part in ("bin", "lib", "share")]
        parts.append((package.parent / f"{package.name}.libs", root / f"{package.name}.libs"))
        user = self._user.pw_name if self._user is not None else "the server's user"

        def link_or_copy(src: str, dst: str) -> None:
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)

        try:
            for source, copy in parts:
                if source.is_dir():
                    shutil.copytree(source, copy, symlinks=True, copy_function=link_or_copy)
        except OSError as exc:
            raise StoreError(f"PostgreSQL runs as {user!r} (it refuses root), who cannot reach {self.bin_dir}; "
                             f"copying it into {self.folder} failed: {exc}") from None
        self.bin_dir = target / "bin"
        if not self._reachable():
            raise StoreError(
                f"PostgreSQL runs as {user!r} (it refuses to run as root), who cannot reach its binaries, "
                f"not even a copy in {self.folder}; let that user into the temporary folder (TMPDIR), "
                "or give bin_dir= an installed PostgreSQL (Debian's: /usr/lib/postgresql/15/bin), "
                "or a server's URL (MEMKIT_PG_URL in the tests)"
            )
        return self.bin_dir

    def _run(self, program: str, *args: str) -> None:
        # Watched while it runs: this process killed meanwhile, the watchdog stops it (an orphaned
        # initdb would go on writing into the folder the watchdog removes).
        process = subprocess.Popen([str(self.bin_dir / program), *args], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True,
                                   **self._as_server_user())
        self._watchdog.watch(process.pid)
        try:
            out, err = process.communicate(timeout=self.startup_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            raise StoreError(f"{program} took longer than {self.startup_timeout} s") from None
        finally:
            self._watchdog.watch(None)
        if process.returncode != 0:
            raise StoreError(f"{program} failed ({process.returncode}): {(err or out).strip()[-800:]}")

    def start(self) -> None:
        """Start the server (again, after `stop()`) and wait until it accepts connections."""
        if self.running:
            return
        options = {"listen_addresses": "", "unix_socket_directories": str(self.folder), **self.settings}
        command = [str(self.bin_dir / "postgres"), "-D", str(self.data)]
        for name, value in options.items():
            command += ["-c", f"{name}={value}"]
        self._log = open(self.folder / "server.log", "ab")  # noqa: SIM115 - the server writes it until stop()
        # Killed between the start and `watch`, this process leaves the watchdog the postmaster's pid file.
        self._watchdog.starting(self.data / "postmaster.pid", name="postgres")
        self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                         start_new_session=True, **self._as_server_user())
        self._watchdog.watch(self._process.pid)
        deadline = time.monotonic() + self.startup_timeout
        while not self._accepts_connections():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop("immediate")
                tail = (self.folder / "server.log").read_text(errors="replace")[-800:]
                raise StoreError(f"PostgreSQL ({self.bin_dir}) did not start: {tail.strip()}")
            time.sleep(0.05)

    def _accepts_connections(self) -> bool:
        if not (self.folder / _SOCKET_NAME).exists():
            return False
        done = subprocess.run([str(self.bin_dir / "pg_isready"), "-q", "-h", str(self.folder), "-U", "postgres"],
                              capture_output=True, timeout=10)
        return done.returncode == 0

    def stop(self, mode: Literal["fast", "immediate"] = "fast") -> None:
        """Stop the server, keeping its data: `fast` rolls back open transactions and shuts down
        cleanly; `immediate` stops at once, as a crash would (the next start recovers from the WAL)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(_STOP_SIGNALS[mode])
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if process is not None:
            self._watchdog.watch(None)
        if self._log is not None:
            self._log.close()
            self._log = None

    def close(self) -> None:
        """Stop the server and remove its folder. Safe to call twice."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
        self._watchdog.disarm()
        atexit.unregister(self.close)

    def __enter__(self) -> EmbeddedPostgres:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EmbeddedPostgres({self.url!r}, running={self.running})"


def start_embedded_postgres(*, bin_dir: str | os.PathLike[str] | None = None,
                            settings: Mapping[str, str] | None = None,
                            startup_timeout: float = 60.0) -> EmbeddedPostgres:
    """Start a PostgreSQL server of its own in a new temporary folder; `close()` stops and removes it.

    Args:
        bin_dir: the PostgreSQL binaries to run (a folder with initdb, postgres, pg_isready);
            default: the `pgserver` wheel's PostgreSQL 16.
        settings: server settings (`{"fsync": "off"}` for a throw-away test server, for example).
        startup_timeout: how long initdb and the start may take, in seconds.

    Returns:
        The running server; pass its `url` to `open_store`.

    Raises:
        ImportError: no `bin_dir` and pgserver is not installed. StoreError: the server did not start.

    Example:
        >>> with start_embedded_postgres() as server, open_store(server.url) as store:   # doctest: +SKIP
        ...     store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        1
    """
    folder = Path(bin_dir) if bin_dir is not None else pgserver_bin_dir()
    if not (folder / "postgres").exists():
        raise StoreError(f"{folder} holds no PostgreSQL server (no 'postgres' program there)")
    return EmbeddedPostgres(folder, settings or {}, startup_timeout)
