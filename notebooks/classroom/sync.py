"""`run_sync`: an async call (the agent's `ask`) made from synchronous code: a widget callback, a
cell, a script."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


def run_sync(awaitable: Awaitable[T]) -> T:
    """Run a coroutine to completion from synchronous code, even inside Jupyter.

    Widget callbacks are plain functions, but the agent is async. Where no event loop runs in this
    thread (a script, a test) the coroutine runs with `asyncio.run`; where one does (a Jupyter
    kernel) it runs in a private event loop in a worker thread, which the store allows (its
    connection is shared across threads under a lock).
    """
    async def main() -> T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()

