"""The lines of the library behind what a notebook just ran, printed in a cell beside it.

A notebook that shows code by copying it goes stale the day the code changes; `show_source` reads
the running library itself (`inspect.getsource`), so what the student reads is what just ran.
"""

from __future__ import annotations

import inspect
from typing import Any


def source_lines(obj: Any, start: str | None = None, stop: str | None = None) -> list[str]:
    """The source of `obj` from the first line containing `start` to the next containing `stop`.

    Args:
        obj: a function, class or method of an importable module.
        start: text of the first line to show (None: the definition's first line).
        stop: text of the last line to show (None: the definition's last line).

    Raises:
        ValueError: `start` or `stop` is not in the source (the code moved: update the notebook).
    """
    lines = inspect.getsource(obj).splitlines()
    first = _find(lines, start, 0, obj) if start is not None else 0
    last = _find(lines, stop, first, obj) if stop is not None else len(lines) - 1
    return lines[first:last + 1]


def _find(lines: list[str], text: str, after: int, obj: Any) -> int:
    for number in range(after, len(lines)):
        if text in lines[number]:
            return number
    raise ValueError(f"{obj.__qualname__} has no line containing {text!r} (after line {after + 1}): "
                     "the code changed, so point the notebook at the lines that carry the idea now")


def show_source(obj: Any, start: str | None = None, stop: str | None = None) -> None:
    """Print `source_lines(obj, start, stop)` under the file and the name they come from.

    Example:
        >>> show_source(build_server, "user = store", "memory = Memory")  # doctest: +SKIP
        # memkit/integrations/mcp_server.py, build_server
        user = store.limits.check_id("user", user)
        ...
    """
    lines = source_lines(obj, start, stop)
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    print(f"# {obj.__module__.replace('.', '/')}.py, {obj.__qualname__}")
    print("\n".join(line[indent:] for line in lines))
