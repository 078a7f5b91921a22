"""The reliability lab: REDIS_URL values that are not Redis URLs are refused with a WindowError that
names the problem and never the password; a server that accepts and never answers costs one timeout.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

from lab import redis_faults
from memkit.servers.redis_client import DEFAULT_TIMEOUT_S

BAD_URLS = [
    "localhost:6379", "127.0.0.1:6379", "redis", "//localhost:6379", "http://localhost:6379/0",
    "https://memkit:hunter2@localhost/", "tcp://localhost:6379", "redis://h:notaport/0", "redis://h:99999/0",
    "redis://h:0/0", "redis://h:-1/0", " redis://localhost:6379/0", "redis://localhost:6379/0 ",
    "redis://localhost:6379/0\n", "redis://local host:6379/0", "redis://[::1", "redis://memkit:hunter2@[::1",
    "redis://[::1:6379/0", "redis://localhost:6379/zero", "redis://localhost:6379/0/1", "redis:///0",
    "redis://memkit:hunter2@:6379/0", "unix://", "unix://memkit:hunter2@", "redis://memkit:hunter2@h:port/0",
    "redis://localhost:6379/0?socket_timeout=soon", "",
]


def test_a_redis_url_that_is_not_one_is_refused_by_name_in_one_timeout(figures, monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    rows = redis_faults.url_refusals([url for url in BAD_URLS if url])
    seconds = {timeout: redis_faults.silent_server_seconds(timeout)[0] for timeout in (0.5, DEFAULT_TIMEOUT_S)}
    refused = sum(row["outcome"] == "refused" for row in rows)
    figures("REDIS_URL values", **{
        "values tried": len(rows), "refused with a WindowError naming the problem": refused,
        "other exceptions": sum(row["outcome"] not in ("refused", "connected") for row in rows),
        "passwords shown": sum(row["password shown"] for row in rows),
        "seconds for a server that never answers (timeout 0.5 s)": round(seconds[0.5], 2),
        f"seconds for a server that never answers (default {DEFAULT_TIMEOUT_S:g} s)":
            round(seconds[DEFAULT_TIMEOUT_S], 2),
    })
    assert refused == len(rows), [row for row in rows if row["outcome"] != "refused"]
    assert not any(row["password shown"] for row in rows)
    for timeout, elapsed in seconds.items():
        assert elapsed < 2 * timeout + 0.5  # one wait, not one per retry
