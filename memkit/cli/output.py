"""What a command reports, and how its exit code tells a script what happened.

A report that cannot be written after a change was committed is `ReportFailed`, never a plain
error: the change stands, and exit code 3 says so (see `memkit.cli`). A command that committed a
change and then failed (`CommittedThenFailedError`) exits with 4, never with 2 ("refused, nothing
changed").
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from typing import Any

from ..visible import visible_json

EXIT_REFUSED = 2
EXIT_COMMITTED_UNREPORTED = 3
EXIT_COMMITTED_THEN_FAILED = 4
"""Changes were committed, then the command failed before it finished (the model's next call, the
budget, the window): stderr names what was committed and what failed (`CommittedThenFailedError`)."""


class ReportFailed(Exception):
    """A change was committed but writing its report failed; `committed` says what was changed."""

    def __init__(self, committed: str, cause: BaseException) -> None:
        super().__init__(committed)
        self.committed, self.cause = committed, cause


def emit(value: Any, *, committed: str | None = None) -> None:
    """Print `value` as JSON, every hidden character a `\\u` escape (`visible_json`: the same data, and
    a value's U+2028 or U+202E cannot move the text a person reads). With `committed` (what the
    command changed), a failure to write the report is a `ReportFailed`, never a plain error: the
    change stands and the caller must know."""
    try:
        if sys.stdout is None:  # started with stdout closed (`>&-`)
            raise OSError("standard output is closed")
        print(visible_json(json.dumps(value, ensure_ascii=False, indent=2)), flush=True)
    except OSError as exc:
        if committed is None:
            raise
        raise ReportFailed(committed, exc) from None


def emit_line(value: Any, *, committed: str) -> None:
    """One JSON line, flushed at once (a person or a script sees each reply when it is stored); hidden
    characters escaped as `emit` does."""
    try:
        sys.stdout.write(visible_json(json.dumps(value, ensure_ascii=False)) + "\n")
        sys.stdout.flush()
    except OSError as exc:
        raise ReportFailed(committed, exc) from None


def discard_stdout() -> None:
    """Point stdout at /dev/null, so the unwritten report cannot fail again at exit (which would
    make Python exit with 120 instead of the code chosen here)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def complain(text: str) -> None:
    """Write to stderr; a closed stderr cannot change the exit code, which is the answer that counts."""
    with contextlib.suppress(OSError, ValueError):
        print(text, file=sys.stderr, flush=True)
