"""The reliability lab: the embedded PostgreSQL runs from a clone in a folder only root may enter.

PostgreSQL refuses to run as root, so as root the embedded server runs as the `postgres` user (or
`nobody`). A fresh clone in a private folder (0700: `/root/...`, `mktemp -d`, a Docker image's
workdir) keeps the pgserver wheel inside its `.venv`, where that user cannot reach it: every
PostgreSQL test failed there. The server now runs from a linked copy of the installation in its own
folder. CI also runs the PostgreSQL tests from such a clone (`.ci/run`). See conftest.py for the
`figures` fixture.
"""

from __future__ import annotations

import os
import shutil
import stat
import time

import pytest

from memkit.store import open_store
from memkit.store.postgres import start_embedded_postgres
from memkit.store.postgres.server import pgserver_bin_dir

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="NOT TESTED: the case is root's (PostgreSQL refuses "
                                "root, so the server runs as another user); CI runs as root")


def test_the_embedded_server_starts_from_a_wheel_in_a_folder_only_root_may_enter(tmp_path, figures):
    private = tmp_path / "clone"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    # The wheel's layout as pip installs it into a virtualenv's site-packages.
    installed = pgserver_bin_dir().parent.parent
    site = private / ".venv" / "site-packages"
    (site / "pgserver").mkdir(parents=True)
    for part in ("bin", "lib", "share"):
        shutil.copytree(installed / "pginstall" / part, site / "pgserver" / "pginstall" / part, symlinks=True)
    shutil.copytree(installed.parent / "pgserver.libs", site / "pgserver.libs", symlinks=True)
    started = time.monotonic()
    with start_embedded_postgres(bin_dir=site / "pgserver" / "pginstall" / "bin") as server:
        seconds = time.monotonic() - started
        with open_store(server.url) as store:
            revision = store.put("alice", "s1", "preference", "drink", "tea")["revision"]
        ran_from = "a copy in the server's folder" if server.folder in server.bin_dir.parents else "the clone"
    figures("Root in a private folder: embedded PostgreSQL",
            **{"clone folder mode": f"{stat.S_IMODE(private.stat().st_mode):o}", "server started": True,
               "ran from": ran_from, "start (s)": round(seconds, 1), "a write": f"revision {revision}"})
    assert revision == 1 and ran_from == "a copy in the server's folder"
