"""Helpers shared by the window tests: an embedded Redis server of a test's own, and waiting for a condition."""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Iterator

import pytest

from lab.workers import wait_for
from memkit.window import RedisHandle, start_embedded_redis
from memkit.servers.redis import _is_alive

__all__ = ["own_server", "wait_for"]


@pytest.fixture
def own_server() -> Iterator[Callable[..., RedisHandle]]:
    """Embedded servers of this test alone (persistence "none" unless asked), for tests that stop,
    kill or reconfigure them; each is stopped afterwards, and must really be gone."""
    handles = []

    def start(**options: Any) -> RedisHandle:
        options.setdefault("persistence", "none")
        handle = start_embedded_redis(**options)
        handles.append(handle)
        return handle

    yield start
    for handle in handles:
        pid = handle.pid
        handle.close()
        assert not (pid and _is_alive(pid))
