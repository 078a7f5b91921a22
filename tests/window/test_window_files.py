"""Chat's window is in the store's own file: private whatever the umask, and nothing else is left behind.

(The kept redis-server's trust tests went with it: issue 32. What remains of them is this: the
folder 0700 and the files 0600 under umask 022, and no process outliving the command.)
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

from _cli_helpers import env_with


def test_chat_makes_the_workspace_private_under_umask_022_and_leaves_no_process(tmp_path):
    workspace = tmp_path / "ws"
    done = subprocess.run([sys.executable, "-m", "memkit", "chat", "--workspace", str(workspace), "--user", "alice",
                           "--session", "s1", "--message", "My ticket number is T-4471"], capture_output=True,
                          text=True, env=env_with(), umask=0o022, timeout=120)
    assert done.returncode == 0, done.stderr
    paths = [workspace, workspace / "state", *(workspace / "state").iterdir()]
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in paths}
    assert {name: mode for name, mode in modes.items() if mode & 0o077} == {}, modes
    assert modes["memory.sqlite3"] == 0o600 and modes["state"] == 0o700
    # No server of the window's own: nothing else in the folder, no process naming it left running.
    assert {p.name for p in (workspace / "state").iterdir()} <= {"memory.sqlite3", "memory.sqlite3-wal",
                                                                  "memory.sqlite3-shm"}
    assert [pid for pid in _pids() if str(workspace).encode() in _cmdline(pid)] == []


def _pids() -> list[str]:
    return [name for name in os.listdir("/proc") if name.isdigit()]


def _cmdline(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:  # gone meanwhile, or not ours to read
        return b""
