"""The lab's one worker protocol: another process, started fresh, told what to do in one JSON line.

`start_worker(MODE, payload)` starts it (the test suite's experiments from another entry module:
`entry=`). The worker answers with lines on stdout: JSON lines (`answer`) for handshakes ("ready",
"locked") and results, and plain progress lines where a stream is read as it happens (`ack N
REVISION`, `turn N ...`). A parent may send further lines on stdin ("go"). Nothing is simulated
inside the calling process. A function written in a notebook cell runs through the same protocol
(mode `function`, `classroom.processes`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO, Any
from collections.abc import Callable, Sequence

from memkit.limits import Limits

PathLike = str | os.PathLike[str]

WORKER_TIMEOUT_S = 120.0
"""How long a parent waits for a worker that should finish by itself."""

ROOMY_LIMITS: dict[str, int] = {"max_records_per_user": 1_000_000, "max_records_total": 1_000_000,
                                "max_db_bytes": 1 << 30, "max_events_per_user": 1_000_000,
                                "max_archived_turns_per_user": 1_000_000}
"""Limits out of an experiment's way (a crash or lock experiment is not about quotas)."""

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
"""The folder that holds `classroom` (notebooks/), put on a worker's path so it imports this very kit."""
_KIT_ROOT = str(Path(__file__).resolve().parents[3])


@dataclasses.dataclass(frozen=True)
class Entry:
    """Where a worker process starts: `python -m MODULE MODE`, with `folder` first on its path.

    The module's `__main__` must import every module that registers a worker, then call `main`.
    """

    module: str
    folder: str


LAB = Entry("classroom.lab", _PACKAGE_PARENT)
"""The kit's own workers (`python -m classroom.lab MODE`), run from this very memkit, installed or not."""

Worker = Callable[[dict[str, Any]], Any]
WORKERS: dict[str, Worker] = {}
"""Mode -> the function a worker process runs with its payload (its return value is its last answer)."""


def worker(mode: str) -> Callable[[Worker], Worker]:
    """Register a function as the worker of `mode`."""
    def register(function: Worker) -> Worker:
        WORKERS[mode] = function
        return function
    return register


def limits_from(changes: dict[str, int] | None) -> Limits:
    """`Limits()` with some fields replaced; `changes` is a plain dict so it can cross a process boundary."""
    return Limits().replace(**(changes or {}))


# -- the parent's side ---------------------------------------------------------------------------------


def _worker_env(entry: Entry) -> dict[str, str]:
    # The worker must import this very memkit, installed or not: put the package's folder first.
    env = dict(os.environ)
    folders = dict.fromkeys((entry.folder, _PACKAGE_PARENT, _KIT_ROOT, env.get("PYTHONPATH", "")))
    env["PYTHONPATH"] = os.pathsep.join(p for p in folders if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_worker(mode: str, payload: dict[str, Any], *, capture_stderr: bool = True,
                 entry: Entry = LAB) -> subprocess.Popen[str]:
    """Start `python -m classroom.lab MODE` and send it its payload (one JSON line).

    Args:
        mode: a registered worker (see `WORKERS`).
        payload: what the worker needs; plain JSON values only.
        capture_stderr: pipe the worker's stderr (read it with `read_answer`'s error or
            `communicate`); False lets it through to this process's stderr (a long-running worker
            whose stderr nobody reads must not fill a pipe).
        entry: the module whose workers to run (default: the kit's, `classroom.lab`).

    Returns:
        The running process, with text pipes for stdin and stdout.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", entry.module, mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE if capture_stderr else None,
        text=True, encoding="utf-8", env=_worker_env(entry),
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(payload) + "\n")
    process.stdin.flush()
    return process


def send(process: subprocess.Popen[str], line: str) -> None:
    """Send a worker one more line on its stdin (a start signal)."""
    assert process.stdin is not None
    process.stdin.write(line + "\n")
    process.stdin.flush()


def read_answer(process: subprocess.Popen[str]) -> Any:
    """The worker's next line, as JSON.

    Raises:
        RuntimeError: the worker exited without answering (with the last line of its stderr).
    """
    stream: IO[str] | None = process.stdout
    assert stream is not None
    line = stream.readline()
    if not line:
        process.wait(timeout=WORKER_TIMEOUT_S)
        raise RuntimeError(f"worker exited with code {process.returncode} before answering: {stderr_tail(process)}")
    return json.loads(line)


def expect(process: subprocess.Popen[str], word: str) -> None:
    """Wait for a worker's handshake line (`"ready"`, `"locked"`); fail clearly if it says anything else."""
    answer_ = read_answer(process)
    if answer_ != word:
        raise RuntimeError(f"worker said {answer_!r} where {word!r} was expected")


def finish(process: subprocess.Popen[str], what: str) -> Any:
    """Wait for a worker to end by itself and return its last JSON line.

    Raises:
        RuntimeError: it failed, or did not end within `WORKER_TIMEOUT_S`.
    """
    try:
        out, err = process.communicate(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise RuntimeError(f"the {what} worker did not finish within {WORKER_TIMEOUT_S} s") from None
    if process.returncode != 0:
        raise RuntimeError(f"the {what} worker failed (exit {process.returncode}): {last_line(err or '')}")
    return json.loads(out.strip().splitlines()[-1])


def run_worker(mode: str, payload: dict[str, Any], *, entry: Entry = LAB) -> Any:
    """Run a worker to completion and return its one (last) JSON answer."""
    return finish(start_worker(mode, payload, entry=entry), mode)


def stop(process: subprocess.Popen[str]) -> None:
    """Kill a worker that is still running (after a failure in the parent) and reap it."""
    if process.poll() is None:
        process.kill()
        process.communicate()


def stderr_tail(process: subprocess.Popen[str]) -> str:
    """The last line a finished worker wrote to its (captured) stderr, to say why it failed."""
    return last_line(process.stderr.read() if process.stderr else "") or "(no error output)"


def last_line(text: str) -> str:
    """The last line of `text` that is not blank ("" if none): the error a failed process ended with."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# -- the worker's side ---------------------------------------------------------------------------------


def answer(value: Any) -> None:
    """Write one JSON line to the parent, at once."""
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def wait_for_go() -> None:
    """Block until the parent sends "go" (so that several workers start together)."""
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no start signal")


def main(argv: Sequence[str] | None = None, module: str = LAB.module) -> None:
    """Worker entry point: `python -m classroom.lab MODE`, one JSON payload line on stdin."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in WORKERS:
        raise SystemExit(f"usage: python -m {module} {{{','.join(sorted(WORKERS))}}} < payload.json")
    result = WORKERS[args[0]](json.loads(sys.stdin.readline()))
    if result is not None:
        answer(result)


def skip_iri_grammar() -> None:
    """Spare a worker process the seconds jsonschema spends compiling a grammar it never uses.

    jsonschema loads the optional rfc3987_syntax package only to check the "iri" format, which the
    memory tools' schemas never use and Draft 2020-12 does not assert by default. A process started
    per session would pay that every time, so a worker process (only it) declares the package
    absent; validation behaves exactly the same.
    """
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]


@worker("function")
def _function_worker(payload: dict[str, Any]) -> None:
    """Run `name(*arguments)` from `source` (a function written in a notebook cell, see
    `classroom.processes`); with `wait`, say "ready" and begin only on "go".

    The source runs as the main module would, so the function imports what it needs itself.
    """
    skip_iri_grammar()
    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(payload["source"], f"<function {payload['name']}>", "exec"), namespace)
    if payload["wait"]:
        answer("ready")
        wait_for_go()
    namespace[payload["name"]](*payload["arguments"])
