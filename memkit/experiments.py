"""Experiments with real processes: restarts, racing writers, a held write lock, SIGKILL mid-stream.

The notebooks call these functions so their cells stay short, and a reliability lab can call them
with bigger numbers. Every experiment that involves "another process" starts a real one:
`python -m memkit.experiments MODE` with `sys.executable`, fed one JSON payload on stdin and
answering with JSON lines on stdout. Nothing here is simulated inside the calling process.

Public functions return plain dicts and lists (easy to put in a pandas DataFrame or to assert on):

- `run_session` / `run_goldfish_session`: one session step of an agent in a fresh process, with a
  persistent `MemoryStore` or with memory in a dict of that process (the "goldfish").
- `race_writers`: several processes write new keys at the quota edge at the same moment, either
  through the kit's store (check and insert in one `BEGIN IMMEDIATE` transaction) or through a
  deliberately naive check-then-insert writer.
- `holding_write_lock`: another process holds the database's write lock while you try things.
- `kill_writer` / `check_writes` / `crash_experiment`: a writer that prints an acknowledgement
  after each committed write is killed with SIGKILL; the checker proves every acknowledged write
  survived and nothing is half-written.
- `spawn_instance` / `kill_experiment`: agent instances as real processes sharing one Redis
  session; killed between the SQLite commit and the Redis trim, every turn is still kept once.
- `attempt_puts`, `try_open`, `sha256_file`: small helpers for tables of refusals.

Error messages handed back for display have the workspace folder removed (only file names remain),
so notebook outputs carry no machine paths.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Sequence

from .errors import MemkitError, QuotaError, StoreError, ValidationError
from .limits import Limits
from .models import REMEMBER_RULE
from .store import MemoryStore, inspect_file, sqlite_uri
from .transcript import TURN_ROLES, Turn
from .window import DEFAULT_SIZE, DEFAULT_TTL_SECONDS, RedisWindow

PathLike = str | os.PathLike[str]

_PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
_WORKER_TIMEOUT_S = 120.0


# -- small helpers ---------------------------------------------------------------------------------


def sha256_file(path: PathLike) -> str:
    """The SHA-256 of a file's bytes, as hex: equal before and after means the file is untouched."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def scrub(message: str, *paths: PathLike) -> str:
    """Remove the folders of `paths` from a message, leaving bare file names.

    Error messages name the file they are about; in a notebook the folder is a temporary one that
    differs on every run and on every machine, so only the file name is worth showing.
    """
    for path in paths:
        folder = str(Path(path).absolute().parent)
        message = message.replace(folder + os.sep, "").replace(folder, "<workspace>")
    return message


def compare_prediction(predicted: Any, measured: Any) -> str:
    """Say how a student's prediction compares with what an exercise measured.

    Args:
        predicted: the prediction: a value, or a dict of values; None (or a dict holding a None)
            means it was not written yet.
        measured: what the experiment found.

    Returns:
        "no prediction written yet", "right", or "not quite: it was <measured>".
    """
    values = predicted.values() if isinstance(predicted, dict) else [predicted]
    if any(value is None for value in values):
        return "no prediction written yet"
    return "right" if predicted == measured else f"not quite: it was {measured!r}"


def limits_from(changes: dict[str, int] | None) -> Limits:
    """`Limits()` with some fields replaced; `changes` is a plain dict so it can cross a process boundary."""
    return Limits().replace(**(changes or {}))


def attempt_puts(store: MemoryStore, attempts: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Try several `store.put` calls and report each outcome instead of raising.

    Args:
        store: the store to write to.
        attempts: dicts with `user`, `kind`, `key`, `value` and optionally `session` (default "s1")
            and `label` (a short description for the table).

    Returns:
        One row per attempt: the inputs (long values shortened for display), `outcome` ("saved",
        "unchanged" or the error class name), `revision` (or None) and `message` ("" on success).
        Only memkit's own errors are caught; anything else is a bug and propagates.
    """
    rows = []
    for attempt in attempts:
        value = attempt.get("value")
        row: dict[str, Any] = {}
        if "label" in attempt:
            row["attempt"] = attempt["label"]
        row.update({
            "user": attempt.get("user"), "kind": attempt.get("kind"), "key": _shorten(attempt.get("key")),
            "value": _shorten(value),
        })
        before = store.get(attempt["user"], attempt["kind"], attempt["key"]) if _valid_target(store, attempt) else None
        try:
            record = store.put(attempt["user"], attempt.get("session", "s1"), attempt["kind"], attempt["key"], value)
        except MemkitError as exc:
            row.update(outcome=type(exc).__name__, revision=None, message=scrub(str(exc), store.path))
        else:
            unchanged = before is not None and before["revision"] == record["revision"]
            row.update(outcome="unchanged" if unchanged else "saved", revision=record["revision"], message="")
        rows.append(row)
    return rows


def _valid_target(store: MemoryStore, attempt: dict[str, Any]) -> bool:
    try:
        store.limits.check_id("user", attempt["user"])
        store.limits.check_kind(attempt["kind"])
        store.limits.check_key(attempt["key"])
    except MemkitError:
        return False
    return True


def _shorten(value: Any, width: int = 24) -> Any:
    """A display form of a value: long strings cut with their length, control characters escaped."""
    if not isinstance(value, str):
        return value
    shown = value if len(value) <= width else f"{value[:width - 8]}… ({len(value)} chars)"
    return shown.encode("unicode_escape").decode("ascii") if any(ord(c) < 32 for c in shown) else shown


def try_open(path: PathLike, **store_options: Any) -> dict[str, Any]:
    """Open `path` as a `MemoryStore`, close it again, and report whether the file was changed.

    Returns:
        `file`, `opened` (bool), `error` (the StoreError message, folder removed, or ""),
        `sha256_before`, `sha256_after` (None when the file did not exist) and `unchanged` (bool).
    """
    path = Path(path)
    before = sha256_file(path) if path.is_file() else None
    error = ""
    try:
        MemoryStore(path, **store_options).close()
    except StoreError as exc:
        error = scrub(str(exc), path)
    after = sha256_file(path) if path.is_file() else None
    return {"file": path.name, "opened": not error, "error": error,
            "sha256_before": before, "sha256_after": after, "unchanged": before == after}


# -- running a worker process ----------------------------------------------------------------------


def _worker_env() -> dict[str, str]:
    # The worker must import this very memkit, installed or not: put the package's folder first.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_PARENT, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _start(mode: str, payload: dict[str, Any]) -> subprocess.Popen[str]:
    """Start `python -m memkit.experiments MODE` and send it its payload (one JSON line)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "memkit.experiments", mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, encoding="utf-8", env=_worker_env(),
    )
    assert process.stdin is not None
    process.stdin.write(json.dumps(payload) + "\n")
    process.stdin.flush()
    return process


def _read_json_line(stream: IO[str] | None, process: subprocess.Popen[str]) -> Any:
    assert stream is not None
    line = stream.readline()
    if not line:
        process.wait(timeout=_WORKER_TIMEOUT_S)
        raise RuntimeError(f"worker exited with code {process.returncode} before answering: {_stderr_tail(process)}")
    return json.loads(line)


def _expect(process: subprocess.Popen[str], word: str) -> None:
    """Wait for a worker's handshake line (`"ready"`, `"locked"`); fail clearly if it says anything else."""
    answer = _read_json_line(process.stdout, process)
    if answer != word:
        raise RuntimeError(f"worker said {answer!r} where {word!r} was expected")


def _stderr_tail(process: subprocess.Popen[str]) -> str:
    text = process.stderr.read() if process.stderr else ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "(no error output)"


def _run_once(mode: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Run a worker to completion and return its one JSON answer."""
    process = _start(mode, payload)
    try:
        out, err = process.communicate(timeout=_WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise RuntimeError(f"the {mode} worker did not finish within {_WORKER_TIMEOUT_S} s") from None
    if process.returncode != 0:
        tail = [line for line in err.strip().splitlines() if line.strip()]
        raise RuntimeError(f"the {mode} worker failed (exit {process.returncode}): {tail[-1] if tail else ''}")
    return json.loads(out.strip().splitlines()[-1])


# -- sessions in fresh processes -------------------------------------------------------------------


class GoldfishAgent:
    """An agent whose memory is a dict inside its own process: fine until the process ends.

    It follows the same phrases as `FixtureModel` ("remember my KEY is VALUE", a question naming
    a key), so the only difference from the kit's agent is where the memory lives.

    Example:
        >>> fish = GoldfishAgent()
        >>> fish.ask("Remember my drink is green tea")
        'Noted: drink = green tea.'
        >>> fish.ask("What is my drink?")
        'From memory: drink = green tea.'
    """


    def __init__(self) -> None:
        self.memory: dict[str, str] = {}

    def ask(self, task: str) -> str:
        """Save a "remember my ..." fact in the dict, or answer from the dict."""
        if match := REMEMBER_RULE.search(task.strip()):
            key = match.group(1).strip().lower().replace(" ", "_")
            self.memory[key] = match.group(2).strip()
            return f"Noted: {key} = {self.memory[key]}."
        words = set(re.findall(r"[a-z0-9_]+", task.lower()))
        facts = [f"{key} = {value}" for key, value in sorted(self.memory.items()) if key in words]
        return f"From memory: {'; '.join(facts)}." if facts else "I have nothing in memory about that yet."


def run_goldfish_session(tasks: Sequence[str]) -> dict[str, Any]:
    """Ask a `GoldfishAgent` the tasks in a fresh process, which then exits (and forgets).

    Returns:
        `pid` of the process and `replies`: one dict per task with `task` and `text`.
    """
    return _run_once("goldfish", {"tasks": list(tasks)})


def run_session(path: PathLike, user: str, session: str, tasks: Sequence[str], *,
                confirm_puts: Iterable[Sequence[str]] = (), confirm_deletes: Iterable[Sequence[str]] = (),
                limits: dict[str, int] | None = None) -> dict[str, Any]:
    """Run one session of `MemoryAgent` + `FixtureModel` over the store at `path` in a fresh process.

    The process opens the store, records the confirmations a person gave for this session, asks
    each task in turn, closes the store and exits: everything it knew in memory is gone, and only
    what reached the SQLite file is left for the next session.

    Args:
        path: the database file (created if missing).
        user: the user the session is bound to.
        session: the session id (kept as `source_session` of what it saves).
        tasks: what the user says, in order.
        confirm_puts: (kind, key, value) triples the person confirmed, each allowing one save.
        confirm_deletes: (kind, key) pairs the person confirmed, each allowing one delete.
        limits: `Limits` fields to change for this store.

    Returns:
        `pid`, `session` and `replies`: per task its `text`, `stop_reason` and `tools` (one row per
        tool call: `tool`, `ok`, and `error` or `result`).
    """
    payload = {"path": str(Path(path).absolute()), "user": user, "session": session, "tasks": list(tasks),
               "confirm_puts": [list(c) for c in confirm_puts],
               "confirm_deletes": [list(c) for c in confirm_deletes], "limits": limits}
    result = _run_once("session", payload)
    for reply in result["replies"]:
        for tool in reply["tools"]:
            if "error" in tool:
                tool["error"] = scrub(tool["error"], path)
    return result


def _session_worker(payload: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    # jsonschema loads the optional rfc3987_syntax package (seconds of grammar compiling) only to
    # check the "iri" format, which the memory tools' schemas never use and Draft 2020-12 does not
    # assert by default. A process started per session would pay that every time, so this worker
    # process (only it) declares the package absent; validation behaves exactly the same.
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

    from .agent import MemoryAgent
    from .approvals import Approvals
    from .models import FixtureModel

    approvals = Approvals(f"{payload['session']}-confirm")
    for kind, key, value in payload["confirm_puts"]:
        approvals.confirm_put(kind, key, value)
    for kind, key in payload["confirm_deletes"]:
        approvals.confirm_delete(kind, key)
    replies = []
    with MemoryStore(payload["path"], limits=limits_from(payload["limits"])) as store:
        agent = MemoryAgent(store, payload["user"], payload["session"], FixtureModel(), approvals=approvals)
        for task in payload["tasks"]:
            reply = asyncio.run(agent.ask(task))
            tools = []
            for row in reply.tool_results:
                outcome = row["outcome"]
                tools.append({"tool": row["name"], "ok": outcome["ok"],
                              **({"result": outcome["result"]} if outcome["ok"] else {"error": outcome["error"]})})
            replies.append({"task": task, "text": reply.text, "stop_reason": reply.stop_reason, "tools": tools})
    return {"pid": os.getpid(), "session": payload["session"], "replies": replies}


def _goldfish_worker(payload: dict[str, Any]) -> dict[str, Any]:
    fish = GoldfishAgent()
    return {"pid": os.getpid(), "replies": [{"task": t, "text": fish.ask(t)} for t in payload["tasks"]]}


# -- racing writers at the quota edge --------------------------------------------------------------


def race_writers(path: PathLike, *, naive: bool, writers: int = 4, new_keys_per_writer: int = 2,
                 updates_per_writer: int = 0, quota: int = 8, total_quota: int = 1024,
                 prefill: int | None = None, pause_s: float = 0.05, user: str = "racer",
                 seed: int = 0) -> dict[str, Any]:
    """Start `writers` processes that write for one user at the same moment, and count what got in.

    Before the race the user is filled to `prefill` records (`base-0`, `base-1`, ...), by default
    `quota - 1`: one free slot, many writers. Each writer then does `new_keys_per_writer` creates
    of its own keys (`w{i}-{n}`) and `updates_per_writer` updates of prefilled keys, in an order
    shuffled by `seed`, pausing `pause_s` before each write.

    The kit's writer (`naive=False`) calls `MemoryStore.put`, whose quota check and insert share
    one `BEGIN IMMEDIATE` transaction. The naive writer checks the count in one read, sleeps
    `pause_s`, then inserts in a separate write (through a store whose own quota is out of the way).
    The sleep widens the gap between check and insert: the gap exists in any check-then-insert,
    the sleep only makes the race show up reliably instead of now and then.

    All writers open their store, report ready, and start only when every one of them is ready.

    Args:
        path: the database file; created if missing. Use a fresh file per race.
        naive: which writer to race.
        writers: how many processes.
        new_keys_per_writer: creates per writer.
        updates_per_writer: updates of existing (prefilled) keys per writer; needs `prefill >= 1`.
        quota: the per-user record quota. total_quota: the global one.
        prefill: records the user holds before the race (default `quota - 1`).
        pause_s: the pause before each write (for the naive writer: between check and insert).
        user: the racing user. seed: orders each writer's creates and updates.

    Returns:
        A dict: `writer` ("naive" or "kit"), the parameters, `accepted_creates`,
        `refused_creates`, `accepted_updates`, `refused_updates`, `errors` (locked or failed
        writes), `stored` (records the user holds afterwards), `over_quota` (how far above the
        quota), `exceeded` (bool), `counters_consistent` and `integrity` (from the file
        afterwards), and `outcomes` (per writer, per write: op, key, outcome).
    """
    prefill = quota - 1 if prefill is None else prefill
    if updates_per_writer and prefill < 1:
        raise ValueError("updates need existing keys: set prefill >= 1")
    path = Path(path).absolute()
    limits = {"max_records_per_user": quota, "max_records_total": total_quota, "busy_timeout_ms": 30_000}
    with MemoryStore(path, limits=limits_from(limits).replace(max_records_per_user=max(quota, prefill),
                                                                 max_records_total=max(total_quota, prefill))) as store:
        for number in range(prefill):
            store.put(user, "prefill", "preference", f"base-{number}", f"prefilled {number}")
    rng = random.Random(seed)
    processes = []
    for index in range(writers):
        ops = [["create", f"w{index}-{n}"] for n in range(new_keys_per_writer)]
        ops += [["update", f"base-{rng.randrange(prefill)}"] for _ in range(updates_per_writer)]
        rng.shuffle(ops)
        payload = {"path": str(path), "user": user, "writer": index, "ops": ops, "naive": naive,
                   "pause_s": pause_s, "limits": limits}
        processes.append(_start("race", payload))
    try:
        for process in processes:
            _expect(process, "ready")
        for process in processes:  # the start signal, as close together as the pipes allow
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outcomes = []
        for process in processes:
            out, err = process.communicate(timeout=_WORKER_TIMEOUT_S)
            if process.returncode != 0:
                raise RuntimeError(f"a race writer failed (exit {process.returncode}): {err.strip()[-300:]}")
            outcomes.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
    flat = [o for writer_outcomes in outcomes for o in writer_outcomes]

    def count(op: str, outcome: str) -> int:
        return sum(1 for o in flat if o["op"] == op and o["outcome"] == outcome)

    state = inspect_file(path)
    with MemoryStore(path, limits=limits_from({"max_records_per_user": 10**6, "max_records_total": 10**6})) as store:
        stored = store.users().get(user, 0)
    return {
        "writer": "naive" if naive else "kit", "writers": writers, "quota": quota, "total_quota": total_quota,
        "prefill": prefill, "new_keys_per_writer": new_keys_per_writer, "updates_per_writer": updates_per_writer,
        "pause_s": pause_s, "seed": seed,
        "accepted_creates": count("create", "ok"), "refused_creates": count("create", "quota"),
        "accepted_updates": count("update", "ok"), "refused_updates": count("update", "quota"),
        "errors": sum(1 for o in flat if o["outcome"] not in ("ok", "quota")),
        "stored": stored, "over_quota": max(0, stored - quota), "exceeded": stored > quota,
        "counters_consistent": state["counters_consistent"], "integrity": state["integrity"],
        "outcomes": outcomes,
    }


def _race_worker(payload: dict[str, Any]) -> list[dict[str, Any]]:
    user, limits, naive, pause = payload["user"], limits_from(payload["limits"]), payload["naive"], payload["pause_s"]
    # The naive writer's store has its quota out of the way: the naive check below is the only guard.
    store_limits = limits.replace(max_records_per_user=10**6, max_records_total=10**6) if naive else limits
    outcomes = []
    with MemoryStore(payload["path"], limits=store_limits, synchronous="NORMAL", check_integrity=False) as store:
        _answer("ready")
        if sys.stdin.readline().strip() != "go":
            raise SystemExit("no start signal")
        for op, key in payload["ops"]:
            value = f"writer {payload['writer']} {op} {key}"
            try:
                if naive:
                    # Check (one read) ... then write (another transaction): the classic race.
                    exists = store.get(user, "preference", key) is not None
                    counts = store.users()
                    full = (counts.get(user, 0) >= limits.max_records_per_user
                            or sum(counts.values()) >= limits.max_records_total)
                    time.sleep(pause)
                    if full and not exists:
                        raise QuotaError(f"user {user!r} is at the quota")
                    store.put(user, f"w{payload['writer']}", "preference", key, value)
                else:
                    time.sleep(pause)
                    store.put(user, f"w{payload['writer']}", "preference", key, value)
                outcome = "ok"
            except QuotaError:
                outcome = "quota"
            except StoreError as exc:
                outcome = "locked" if "locked" in str(exc) else "error"
            outcomes.append({"op": op, "key": key, "outcome": outcome})
    return outcomes


# -- another process holding the write lock --------------------------------------------------------


@contextlib.contextmanager
def holding_write_lock(path: PathLike, *, seconds: float = 60.0, exclusive: bool = False,
                       overwrite_user: str | None = None) -> Iterator[dict[str, Any]]:
    """While the `with` block runs, another process holds the write lock of the database at `path`.

    The holder takes `BEGIN IMMEDIATE` (or `BEGIN EXCLUSIVE`) with plain sqlite3, writes one row it
    never commits (user `holder`, key `half-written`) and, with `overwrite_user`, overwrites that
    user's values without committing either. It keeps the lock for `seconds` (then exits without
    committing) or until the block ends, when it is killed with SIGKILL, like a crashed writer.

    Yields:
        `{"pid": ...}` of the holder. `info["exited"]` is set afterwards.
    """
    process = _start("hold", {"path": str(Path(path).absolute()), "seconds": seconds, "exclusive": exclusive,
                              "overwrite_user": overwrite_user})
    info: dict[str, Any] = {"pid": process.pid}
    try:
        _expect(process, "locked")
        yield info
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.communicate()
        info["exited"] = process.returncode


def _hold_worker(payload: dict[str, Any]) -> None:
    conn = sqlite3.connect(payload["path"], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE" if payload.get("exclusive") else "BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO memories (user_id, kind, memory_key, value, source_session, revision, created_at,"
        " updated_at, key_fold, value_fold) VALUES ('holder', 'preference', 'half-written', 'never committed',"
        " 'hold', 1, 'x', 'x', 'half-written', 'never committed')"
    )
    if payload.get("overwrite_user"):
        conn.execute("UPDATE memories SET value = 'overwritten, never committed' WHERE user_id = ?",
                     (payload["overwrite_user"],))
    _answer("locked")
    time.sleep(payload["seconds"])
    os._exit(0)  # no commit, no rollback, no close: the way a process dies holding a lock


# -- SIGKILL in the middle of a stream of confirmed writes ----------------------------------------


_CRASH_LIMITS = {"max_records_per_user": 1_000_000, "max_records_total": 1_000_000, "max_db_bytes": 1 << 30}


def crash_value(key: str, value_chars: int = 64) -> str:
    """The value the crash writer stores under `key`: derived from the key, so a checker can verify it."""
    seed = f"{key}|"
    return (seed * (value_chars // len(seed) + 1))[:value_chars]


def kill_writer(path: PathLike, *, prefix: str, kill_after_acks: int, user: str = "crash",
                synchronous: str = "FULL", value_chars: int = 64, delay_s: float = 0.0,
                max_writes: int = 100_000) -> dict[str, Any]:
    """Start a writer that streams confirmed writes, and kill it with SIGKILL mid-stream.

    The writer puts episodes `{prefix}-000000`, `{prefix}-000001`, ... (value `crash_value(key)`)
    and prints `ack KEY` right after each `put` returned, i.e. after the commit. Once this function
    has read `kill_after_acks` acknowledgements it waits `delay_s` and sends SIGKILL: the writer is
    then busy with its next write (often inside a commit). Acknowledgements that were already in the
    pipe when it died still count: the writer said them, so a user could have seen them.

    Args:
        path: the database file (created by the writer if missing).
        prefix: names this round's keys and session; use a new one per round.
        kill_after_acks: acknowledgements to read before the kill.
        user: the user written to.
        synchronous: "FULL" or "NORMAL" (both survive a process kill; only FULL survives power loss).
        value_chars: size of each value.
        delay_s: extra time between the last read acknowledgement and the kill.
        max_writes: the writer stops by itself after this many (a safety bound).

    Returns:
        `prefix`, `pid`, `acked` (the acknowledged keys, in order), `acks` (their number),
        `returncode` (-9 when killed) and `killed` (bool; False if the writer finished first).
    """
    payload = {"path": str(Path(path).absolute()), "user": user, "prefix": prefix, "synchronous": synchronous,
               "value_chars": value_chars, "max_writes": max_writes, "limits": _CRASH_LIMITS}
    process = _start("crash", payload)
    acked: list[str] = []
    assert process.stdout is not None
    try:
        _expect(process, "ready")
        while len(acked) < kill_after_acks:
            line = process.stdout.readline()
            if not line:
                break
            acked.append(line.split()[1])
        if delay_s:
            time.sleep(delay_s)
        killed = process.poll() is None
        if killed:
            process.send_signal(signal.SIGKILL)
        # Read the rest through the same buffered file that readline() used: communicate() reads the
        # pipe directly and would skip acknowledgements readline() had already buffered, leaving them
        # unchecked (a fast writer, e.g. synchronous="NORMAL", puts many lines in one read).
        out = process.stdout.read()
        process.stderr.read()
        process.wait(timeout=_WORKER_TIMEOUT_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    acked += [line.split()[1] for line in out.splitlines() if line.startswith("ack ")]
    return {"prefix": prefix, "pid": process.pid, "acked": acked, "acks": len(acked),
            "returncode": process.returncode, "killed": killed and process.returncode == -signal.SIGKILL}


def _crash_worker(payload: dict[str, Any]) -> None:
    prefix, user = payload["prefix"], payload["user"]
    with MemoryStore(payload["path"], limits=limits_from(payload["limits"]), synchronous=payload["synchronous"],
                     check_integrity=False) as store:
        _answer("ready")
        for number in range(payload["max_writes"]):
            key = f"{prefix}-{number:06d}"
            store.put(user, prefix, "episode", key, crash_value(key, payload["value_chars"]))
            # Only now, after the commit, may the writer tell anyone the write is done.
            sys.stdout.write(f"ack {key}\n")
            sys.stdout.flush()


def check_writes(path: PathLike, acked: Iterable[str], *, user: str = "crash",
                 prefixes: Iterable[str] | None = None, value_chars: int = 64) -> dict[str, Any]:
    """After the crash: is every acknowledged write there, whole, and is the file sound?

    Opens the file the way the next session would (a new `MemoryStore`, which runs `quick_check`),
    then compares the crash writer's records of `user` with the acknowledgements.

    Args:
        path: the database file.
        acked: every key the writers acknowledged.
        user: the crash writers' user.
        prefixes: the rounds to look at (default: the prefixes of the acknowledged keys).
        value_chars: the writers' value size, to recompute the expected values.

    Returns:
        `acknowledged`, `present` (acknowledged and found with the right value), `lost`
        (acknowledged but missing or wrong), `unacknowledged_commits` (committed but killed before
        the ack: allowed, at most one per kill), `half_written` (a record without its create event,
        an event without its record, or a value that is not what the writer wrote), `integrity`
        (`PRAGMA integrity_check`) and `counters_consistent`, plus `lost_keys` and `half_written_keys`.
    """
    acked = list(acked)
    rounds = set(prefixes) if prefixes is not None else {key.rsplit("-", 1)[0] for key in acked}
    with MemoryStore(path, limits=limits_from(_CRASH_LIMITS)) as store:
        records = {r["key"]: r for r in store.records(user, "episode") if r["key"].rsplit("-", 1)[0] in rounds}
        events = {
            row[0]: row[1] for row in store.connection.execute(
                "SELECT memory_key, count(*) FROM memory_events WHERE user_id = ? AND kind = 'episode' "
                "AND action = 'create' GROUP BY memory_key", (user,)
            ) if row[0].rsplit("-", 1)[0] in rounds
        }
    lost = [key for key in acked if key not in records or records[key]["value"] != crash_value(key, value_chars)]
    half = sorted(
        {key for key, record in records.items() if events.get(key) != 1 or record["value"] != crash_value(key, value_chars)}
        | {key for key in events if key not in records}
    )
    state = inspect_file(path)
    acked_set = set(acked)
    return {
        "acknowledged": len(acked), "present": len(acked) - len(lost), "lost": len(lost),
        "unacknowledged_commits": sum(1 for key in records if key not in acked_set),
        "half_written": len(half), "integrity": state["integrity"],
        "counters_consistent": state["counters_consistent"], "lost_keys": lost, "half_written_keys": half,
    }


def crash_experiment(path: PathLike, *, kills: int = 5, seed: int = 0, min_acks: int = 3, max_acks: int = 30,
                     max_delay_s: float = 0.005, user: str = "crash", synchronous: str = "FULL",
                     value_chars: int = 64) -> dict[str, Any]:
    """Kill a streaming writer `kills` times on the same file, checking the file after every restart.

    Round `i` writes keys `k{i:04d}-NNNNNN` and is killed after a number of acknowledgements drawn
    from [`min_acks`, `max_acks`] plus a delay from [0, `max_delay_s`] (both from `seed`, so a run
    can be repeated; the exact moment the kill lands still depends on the machine).

    Returns:
        A summary: `kills`, `acknowledged`, `lost`, `half_written`, `unacknowledged_commits`,
        `integrity` ("ok" if every check said ok) and `counters_consistent` (all rounds), and
        `rounds`: per round the `kill_writer` result (without the key list) and its `check_writes`
        counts.
    """
    rng = random.Random(seed)
    rounds, all_acked = [], []
    for number in range(kills):
        prefix = f"k{number:04d}"
        crash = kill_writer(path, prefix=prefix, kill_after_acks=rng.randint(min_acks, max_acks), user=user,
                            synchronous=synchronous, value_chars=value_chars, delay_s=rng.uniform(0, max_delay_s))
        all_acked += crash["acked"]
        check = check_writes(path, crash["acked"], user=user, prefixes=[prefix], value_chars=value_chars)
        rounds.append({"round": number + 1, "prefix": prefix, "killed": crash["killed"],
                       "returncode": crash["returncode"], "acks": crash["acks"],
                       **{k: v for k, v in check.items() if not k.endswith("_keys")}})
    final = check_writes(path, all_acked, user=user, prefixes=[r["prefix"] for r in rounds], value_chars=value_chars)
    return {
        "kills": sum(1 for r in rounds if r["killed"]), "acknowledged": final["acknowledged"],
        "lost": final["lost"], "half_written": final["half_written"],
        "unacknowledged_commits": final["unacknowledged_commits"],
        "integrity": "ok" if all(r["integrity"] == "ok" for r in rounds) and final["integrity"] == "ok" else "damaged",
        "counters_consistent": all(r["counters_consistent"] for r in rounds) and final["counters_consistent"],
        "rounds": rounds,
    }


# -- the worker side -------------------------------------------------------------------------------


# -- the short-term window: agent instances sharing a Redis session, killed mid-archive ---------------


def spawn_instance(url: str, db: str | os.PathLike[str], user: str, session: str, *, name: str,
                   turns: int, role: str = "user", size: int = DEFAULT_SIZE, ttl: float = DEFAULT_TTL_SECONDS,
                   prefix: str = "memkit", alternate: bool = False, first: bool = False,
                   inline_archive: bool = False, pause_after_archive: float = 0.0,
                   pause_from_turn: int = 1) -> subprocess.Popen[str]:
    """Start another agent instance as a real process sharing the Redis at `url` and the store `db`.

    The instance appends `turns` turns (content "<name> #<i>") to one session and prints
    `turn <number> <name> <i>` once each append has returned (a promise: that turn must never be
    lost). With `alternate`, it waits until the newest turn in the shared window is someone
    else's before each append (two instances then take turns; `first` starts). With
    `inline_archive`, it flushes after every append; `pause_after_archive` makes it sleep between
    the SQLite commit and the Redis trim (printing `archived <highest turn>` first) once it has
    appended `pause_from_turn` turns, so a demonstration can kill it exactly there.

    Returns:
        The running process (stdout is a text pipe).
    """
    args = [
        "--url", url, "--db", os.fspath(db), "--user", user, "--session", session, "--name", name,
        "--turns", str(turns), "--role", role, "--size", str(size), "--ttl", str(ttl), "--prefix", prefix,
        "--pause-after-archive", str(pause_after_archive), "--pause-from-turn", str(pause_from_turn),
    ]
    args += ["--alternate"] if alternate else []
    args += ["--first"] if first else []
    args += ["--inline-archive"] if inline_archive else []
    code = "import sys; from memkit.experiments import window_instance_main; sys.exit(window_instance_main(sys.argv[1:]))"
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, bufsize=1)


def kill_experiment(window: RedisWindow, user: str, session: str, *, kills: int = 5, seed: int = 1,
                    url: str | None = None) -> list[dict[str, Any]]:
    """Kill instances with SIGKILL between the SQLite commit and the Redis trim, and count turns.

    Each round starts an instance (`spawn_instance`, archiving after every append and pausing
    after each commit), lets it append a few turns (a random number from `seed`), kills it while
    it pauses, and inspects the session through `window`: before an archiver pass (some turns are
    then in both places, which `load_session` counts once) and after one pass of `window.flush()`.
    The next round's instance continues the same session.

    Returns:
        One row per kill: turns promised so far (printed by instances after `append` returned),
        turns stored, turns in two places before the pass, whether `load_session` had each turn
        once, and whether after the pass every turn was in exactly one place with none missing.
    """
    url = url or window.url
    if url is None:
        raise ValidationError("the window was given a client; pass the server's url for the instances")
    rng = random.Random(seed)
    promised: set[int] = set()
    rows = []
    for kill in range(1, kills + 1):
        proc = spawn_instance(url, window.store.path, user, session, name=f"i{kill}", turns=1_000_000,
                              size=window.size, prefix=window.prefix, inline_archive=True,
                              pause_after_archive=30.0, pause_from_turn=rng.randint(1, 4))
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("turn "):
                promised.add(int(line.split()[1]))
            elif line.startswith("archived"):
                break
        os.kill(proc.pid, signal.SIGKILL)
        rest = proc.communicate()[0]
        promised.update(int(line.split()[1]) for line in rest.splitlines() if line.startswith("turn "))
        before = window.snapshot(user, session)
        numbers = [row["turn"] for row in before]
        loaded = [t["turn"] for t in window.load_session(user, session)]
        window.flush()
        after = window.snapshot(user, session)
        rows.append({
            "kill": kill,
            "turns promised": len(promised),
            "turns stored": len(numbers),
            "in two places before the pass": sum("+" in row["place"] for row in before),
            "load_session has each once": loaded == numbers,
            "exactly once after the pass": [row["turn"] for row in after] == list(range(1, len(numbers) + 1))
            and promised <= set(numbers) and all("+" not in row["place"] for row in after),
        })
    return rows


def window_instance_main(argv: list[str] | None = None) -> int:
    """The instance process started by `spawn_instance`."""
    parser = argparse.ArgumentParser(prog="memkit-window-instance")
    for flag in ("--url", "--db", "--user", "--session", "--name", "--prefix"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--turns", type=int, required=True)
    parser.add_argument("--role", default="user", choices=TURN_ROLES)
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE)
    parser.add_argument("--ttl", type=float, default=DEFAULT_TTL_SECONDS)
    parser.add_argument("--alternate", action="store_true")
    parser.add_argument("--first", action="store_true")
    parser.add_argument("--inline-archive", action="store_true")
    parser.add_argument("--pause-after-archive", type=float, default=0.0)
    parser.add_argument("--pause-from-turn", type=int, default=1)
    opts = parser.parse_args(argv)
    appended = 0

    def archived(user: str, session: str, turns: list[Turn]) -> None:
        if opts.pause_after_archive and appended >= opts.pause_from_turn:
            print(f"archived {turns[-1]['turn']}", flush=True)
            time.sleep(opts.pause_after_archive)

    with MemoryStore(opts.db) as store, RedisWindow(
        store, url=opts.url, size=opts.size, ttl=opts.ttl, prefix=opts.prefix, background=not opts.inline_archive,
        on_archived=archived,
    ) as window:
        mine = opts.name + " #"
        for i in range(1, opts.turns + 1):
            if opts.alternate:
                deadline = time.monotonic() + 20
                while True:
                    last = window.recent(opts.user, opts.session)
                    if (not last and opts.first) or (last and not last[-1]["content"].startswith(mine)):
                        break
                    if time.monotonic() > deadline:
                        print("gave up waiting for the other instance", file=sys.stderr)
                        return 3
                    time.sleep(0.002)
            turn = window.append(opts.user, opts.session, opts.role, f"{opts.name} #{i}")
            appended = i
            print(f"turn {turn['turn']} {opts.name} {i}", flush=True)
            if opts.inline_archive:
                window.flush()
    return 0


def _answer(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


_WORKERS = {"session": _session_worker, "goldfish": _goldfish_worker, "race": _race_worker,
            "hold": _hold_worker, "crash": _crash_worker}


def main(argv: Sequence[str] | None = None) -> None:
    """Worker entry point: `python -m memkit.experiments MODE`, one JSON payload line on stdin."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in _WORKERS:
        raise SystemExit(f"usage: python -m memkit.experiments {{{','.join(_WORKERS)}}} < payload.json")
    payload = json.loads(sys.stdin.readline())
    result = _WORKERS[args[0]](payload)
    if result is not None:
        _answer(result)


if __name__ == "__main__":
    main()
