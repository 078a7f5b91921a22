"""What the tests that run the `memkit` command share: running it, and an environment that names no store."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def memkit(*argv: str, cwd: Path | None = None, env: dict | None = None, stdin: str | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess:
    """`python -m memkit ARGV...` in a fresh process of this interpreter (`stdin` its input), its output
    captured as text."""
    return subprocess.run([sys.executable, "-m", "memkit", *argv], input=stdin, capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout)


def env_with(**changes: str | None) -> dict[str, str]:
    """This process's environment without a store or Redis named by it, plus `changes` (None: left out)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MEMKIT_DB", "DATABASE_URL", "REDIS_URL")}
    env.update({k: v for k, v in changes.items() if v is not None})
    return env


def new_pg_database(pg_url: str, prefix: str) -> str:
    """A fresh database `prefix_<random>` on the server of `pg_url` (its `postgres` database), and its URL."""
    import uuid

    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_url.replace("/postgres?", f"/{name}?", 1)
