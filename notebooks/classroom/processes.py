"""Run a function written in a notebook cell in new Python processes: to race them, or to kill one.

The idea a notebook teaches (a writer's transaction, where it acknowledges a write) stays in a cell
where a student can read and change it; this module only starts processes that run it. The function
runs in a fresh interpreter, so it imports what it needs itself, and it is given its arguments as
JSON (strings, numbers, lists). What it prints comes back line by line.

A process here is one of the lab's workers (`classroom.lab.workers`, mode `function`): the same
protocol, handshake and timeout as every other process the kit starts.

Example:
    >>> def greet(name):
    ...     print("hello", name)
    >>> run_together(greet, [["alice"], ["bob"]])[1].lines   # doctest: +SKIP
    ['hello bob']
"""

from __future__ import annotations

import dataclasses
import inspect
import signal
import subprocess
import textwrap
from typing import IO, Any
from collections.abc import Callable, Sequence

from .lab.workers import WORKER_TIMEOUT_S, expect, last_line, send, start_worker


def _source(function: Callable[..., Any]) -> str:
    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        raise ValueError(f"the source of {function!r} cannot be read; define it with `def` in a cell or a file"
                         ) from None


@dataclasses.dataclass
class Finished:
    """What one process did: the lines it printed, its exit code, and its last error line if it failed."""

    lines: list[str]
    returncode: int
    error: str = ""


class Process:
    """One new process running `function(*arguments)`.

    Args:
        function: a function defined with `def` (its source is sent to the new process).
        arguments: its arguments (anything JSON can carry).
        wait: start it, but let the function begin only on `go()` (to start several at one moment).
    """

    def __init__(self, function: Callable[..., Any], *arguments: Any, wait: bool = False) -> None:
        self.popen = start_worker("function", {"source": _source(function), "name": function.__name__,
                                               "arguments": list(arguments), "wait": wait})
        self.lines: list[str] = []
        if wait:
            try:
                expect(self.popen, "ready")  # the handshake, not the function's output
            except BaseException:
                self.kill()
                self.finish()
                raise

    @property
    def pid(self) -> int:
        """The process id."""
        return self.popen.pid

    def _stdout(self) -> IO[str]:
        assert self.popen.stdout is not None
        return self.popen.stdout

    def readline(self) -> str | None:
        """The next line the function printed (without its newline), or None once it has exited."""
        line = self._stdout().readline()
        if not line:
            return None
        self.lines.append(line.rstrip("\n"))
        return self.lines[-1]

    def expect(self, word: str) -> None:
        """Wait until the function prints a line starting with `word`; fail if it exits first."""
        while (line := self.readline()) is not None:
            if line.startswith(word):
                return
        raise RuntimeError(f"the process exited before it printed {word!r}: {self.finish().error}")

    def go(self) -> None:
        """Let a process started with `wait=True` begin."""
        send(self.popen, "go")

    def kill(self) -> None:
        """SIGKILL: no `finally`, no rollback, no close; the way a crashed process dies."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)

    def finish(self) -> Finished:
        """Wait for the process to end (killed after `WORKER_TIMEOUT_S`); every line it printed, and
        its last error line if it failed."""
        try:
            # The rest through the same buffered file readline() used, so no line is skipped.
            rest = self._stdout().read()
            assert self.popen.stderr is not None
            errors = self.popen.stderr.read()
            self.popen.wait(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
            self.popen.wait()
            raise RuntimeError(f"the process did not finish within {WORKER_TIMEOUT_S} s and was killed") from None
        finally:
            for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
                if stream is not None:
                    stream.close()
        self.lines += rest.splitlines()
        return Finished(self.lines, self.popen.returncode, last_line(errors) if self.popen.returncode else "")


def run_together(function: Callable[..., Any], argument_lists: Sequence[Sequence[Any]]) -> list[Finished]:
    """Start one process per argument list, let them all begin at the same moment, wait for all.

    Raises:
        RuntimeError: a process failed (its last error line is in the message) or hung.
    """
    processes = [Process(function, *arguments, wait=True) for arguments in argument_lists]
    for process in processes:
        process.go()
    finished = [process.finish() for process in processes]
    for number, result in enumerate(finished, start=1):
        if result.returncode != 0:
            raise RuntimeError(f"process {number} of {function.__name__} failed: {result.error}")
    return finished
