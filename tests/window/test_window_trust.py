"""The workspace window trusts nothing it finds, and keeps its files private (issue 21, classes 3 and 4).

`server.json` may be planted, copied from another workspace, or outlive its server: memkit removes
only what it made, adopts only a server of its own (this Unix user's, started when recorded, on a
socket in a folder memkit made for this workspace, accepting the recorded password), and waits for a
stalled server instead of starting a second one on the same append-only file. Its folder is 0700 and
its files 0600 whatever the umask; a lock held by someone else ends in a clear error, not a hang.
Real processes throughout: `python -m memkit chat`, real redis-servers, SIGSTOP, flock.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from memkit.servers.watchdog import start_token
from memkit.servers.workspace import WorkspaceRedis, _redis_server_binary, window_folder


def _servers_on(folder: Path) -> list[int]:
    """Pids of redis-servers working in `folder` (on its append-only file), whatever any record says."""
    import psutil

    found = []
    for process in psutil.process_iter(["name"]):
        try:
            if process.info["name"] == "redis-server" and process.cwd() == str(folder.resolve()) \
                    and process.status() != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except psutil.Error:
            continue
    return found


def memkit(*argv: str, env: dict[str, str] | None = None, umask: int = -1,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memkit", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, umask=umask)


def base_env(**changes: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "MEMKIT_DB", "DATABASE_URL")}
    return {**env, **changes}


def chat(db: Path, message: str = "My ticket number is T-4471", **options) -> subprocess.CompletedProcess[str]:
    return memkit("chat", "--db", str(db), "--user", "alice", "--session", "s1", "--message", message, **options)


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "work" / "memory.sqlite3"
    path.parent.mkdir()
    yield path
    WorkspaceRedis.stop(window_folder(path))


def plant(folder: Path, **record) -> None:
    folder.mkdir(mode=0o700, exist_ok=True)
    (folder / "server.json").write_text(json.dumps(record), encoding="utf-8")


# -- class 3: the record is not trusted ---------------------------------------------------------------


def test_a_planted_record_naming_the_current_folder_or_another_deletes_nothing(db, tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "notes.txt").write_text("keep me", encoding="utf-8")
    assert chat(db).returncode == 0  # the database, beside the window folder
    for named in (db.parent / "redis.sock", victim / "redis.sock"):
        # Even the pid and start time of a live process of this user (this test) do not make it trusted.
        plant(window_folder(db), pid=os.getpid(), started=start_token(os.getpid()), socket=str(named), token="x")
        done = chat(db, "What was my ticket number?", env=base_env())
        assert done.returncode == 0, done.stderr
        assert "T-4471" in json.loads(done.stdout)["turns"][0]["reply"]
    assert (victim / "notes.txt").read_text(encoding="utf-8") == "keep me"
    assert db.exists()


def test_a_record_copied_from_another_workspace_is_not_adopted_and_its_server_is_left_alone(tmp_path):
    first, second = window_folder(tmp_path / "a.sqlite3"), window_folder(tmp_path / "b.sqlite3")
    try:
        with WorkspaceRedis(first) as a:
            a.client.set("a-only", "1")
            second.mkdir(mode=0o700)
            shutil.copy(first / "server.json", second / "server.json")
            with WorkspaceRedis(second) as b:
                assert b.pid != a.pid and b.client.get("a-only") is None
            assert a.client.get("a-only") == b"1"  # A's server and its socket folder are untouched
    finally:
        WorkspaceRedis.stop(first)
        WorkspaceRedis.stop(second)


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a server as another Unix user needs root")
def test_another_users_server_on_the_recorded_pid_and_socket_is_never_adopted(db):
    assert chat(db).returncode == 0
    nobody = 65534
    folder = Path(tempfile.mkdtemp(prefix="memkit-ws-"))  # even a folder named like memkit's
    # The other user runs a copy of the binary in their own folder: the clone's .venv may sit in a
    # folder only root may enter (`mktemp -d`, /root/...), where `nobody` cannot execute it.
    binary = folder / "redis-server"
    shutil.copy2(_redis_server_binary(), binary)
    binary.chmod(0o755)
    os.chown(folder, nobody, nobody)
    socket = folder / "redis.sock"
    stranger = subprocess.Popen([str(binary), "--port", "0", "--unixsocket", str(socket), "--unixsocketperm",
                                 "777", "--dir", str(folder), "--save", ""], user=nobody, group=nobody,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        deadline = time.monotonic() + 10
        while not socket.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        plant(window_folder(db), pid=stranger.pid, started=start_token(stranger.pid), socket=str(socket), token="")
        done = chat(db, "What was my ticket number?", env=base_env())
        assert done.returncode == 0, done.stderr
        assert "T-4471" in json.loads(done.stdout)["turns"][0]["reply"]  # its own server, with its own AOF
        assert redis.Redis(unix_socket_path=str(socket)).dbsize() == 0  # nothing was written to the stranger's
        assert stranger.poll() is None and socket.exists()  # and nothing of it was stopped or removed
    finally:
        stranger.kill()
        stranger.wait()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_stalled_server_is_waited_for_and_never_replaced(db):
    folder = window_folder(db)
    holder = WorkspaceRedis(folder)  # a first chat's server, kept running
    try:
        os.kill(holder.pid, signal.SIGSTOP)
        started = time.monotonic()
        done = chat(db, env=base_env(MEMKIT_WINDOW_WAIT="3"))
        waited = time.monotonic() - started
        assert done.returncode == 2
        assert f"redis-server (pid {holder.pid})" in done.stderr and "has not answered for 3 s" in done.stderr
        assert "Traceback" not in done.stderr and waited >= 3
        assert _servers_on(folder) == [holder.pid]  # no second server on the same append-only file
        # A chat that waits long enough goes on once the server does.
        late = subprocess.Popen([sys.executable, "-m", "memkit", "chat", "--db", str(db), "--user", "alice",
                                 "--session", "s1", "--message", "hello"], env=base_env(MEMKIT_WINDOW_WAIT="30"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(2)
        os.kill(holder.pid, signal.SIGCONT)
        _out, err = late.communicate(timeout=120)
        assert late.returncode == 0, err
        assert _servers_on(folder) == [holder.pid]
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.close()


# -- class 4: private files, and a lock that cannot hang chat -----------------------------------------


def test_the_window_folder_and_its_files_are_private_under_umask_022(tmp_path):
    workspace = tmp_path / "ws"
    done = memkit("chat", "--workspace", str(workspace), "--user", "alice", "--session", "s1", "--message", "hi",
                  env=base_env(), umask=0o022)
    assert done.returncode == 0, done.stderr
    folder = window_folder(workspace / "state" / "memory.sqlite3")
    try:
        modes = {p.name: stat.S_IMODE(p.stat().st_mode)
                 for p in [workspace, workspace / "state", folder, *folder.iterdir()]}
        assert modes.pop("appendonly.aof") == 0o600 and modes.pop("lock") == 0o600
        assert {name: mode for name, mode in modes.items() if mode & 0o077} == {}, modes
        old = os.umask(0o022)
        try:
            with WorkspaceRedis(folder) as handle:  # while a server runs: its record and socket folder
                assert stat.S_IMODE((folder / "server.json").stat().st_mode) == 0o600
                assert stat.S_IMODE(Path(handle.url[len("unix://"):]).parent.stat().st_mode) == 0o700
        finally:
            os.umask(old)
    finally:
        WorkspaceRedis.stop(folder)


def test_files_an_older_memkit_left_readable_are_made_private(tmp_path):
    folder = tmp_path / "w"
    folder.mkdir(mode=0o755)
    (folder / "appendonly.aof").write_text("", encoding="utf-8")
    os.chmod(folder, 0o755)
    os.chmod(folder / "appendonly.aof", 0o644)
    try:
        with WorkspaceRedis(folder):
            pass
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        assert stat.S_IMODE((folder / "appendonly.aof").stat().st_mode) == 0o600
    finally:
        WorkspaceRedis.stop(folder)


def test_a_lock_held_by_another_process_ends_in_a_clear_error_after_the_timeout(db):
    folder = window_folder(db)
    folder.mkdir(mode=0o700)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); "
                               "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); sys.stdin.read()",
                               str(folder / "lock")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        done = chat(db, env=base_env(MEMKIT_WINDOW_WAIT="2"), timeout=60)
        assert done.returncode == 2 and time.monotonic() - started >= 2
        assert f"the window's lock {folder / 'lock'} stayed held by another process for 2 s" in done.stderr
        assert "Traceback" not in done.stderr
    finally:
        holder.kill()
        holder.wait()


def test_no_process_is_left_behind_by_the_trust_checks(db):
    assert chat(db, env=base_env(MEMKIT_WINDOW_IDLE="0")).returncode == 0
    assert _servers_on(window_folder(db)) == []
