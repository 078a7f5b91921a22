"""The lab: experiments with real processes (restarts, racing writers, a held write lock, SIGKILL
mid-stream, agent instances sharing a Redis session), used by the notebooks and by tests/.

Every experiment that involves "another process" starts a real one through the one worker
protocol of `memkit.lab.workers` (`python -m memkit.lab MODE`, a JSON payload on stdin). Public
functions return plain dicts and lists, easy to put in a pandas DataFrame or to assert on:

- `sessions`: `run_session` / `run_goldfish_session`, one session step of an agent in a fresh
  process, with a persistent `MemoryStore` or with memory in a dict of that process (the goldfish).
- `races`: `race_writers`, the kit's writer against a naive check-then-insert one at the quota's
  edge; `run_racers`, the harness under it.
- `locks`: `holding_write_lock`, another process holding the database's write lock.
- `approving`: `approval_race`, processes racing to approve the same proposals near the quota;
  `proposal_race`, processes racing to propose for one user at the per-user bound;
  `approval_kill_experiment`, an approving process killed with SIGKILL (inside its transaction,
  or at a random moment): every approval whole or absent.
- `crashes`: `kill_writer` / `check_writes` / `crash_experiment`, a writer that acknowledges each
  committed write is killed with SIGKILL; the checker proves every acknowledged write survived.
- `instances`: `spawn_instance` / `kill_experiment`, agent instances sharing one Redis session,
  killed between the SQLite commit and the Redis trim.
- `conversation`: `conversation_crash_experiment`, `memkit chat` processes killed with SIGKILL
  between and inside asks; the next process must have every acknowledged exchange, none twice;
  `ticket_after_sigkill`, the seed scenario (the goldfish against the window), for notebook 05.
- `redis_faults`: the Redis window when Redis misbehaves: it restarts from an older snapshot, evicts
  keys, is named by a REDIS_URL that is not one, or the program ends without `close()`.
- `sidecars`: files that do not belong together: a leftover or foreign `-wal`, the WAL after a
  refused write, half-made databases of killed creators, a clock that steps back.
- `replicas`: agent instances behind a round-robin (`start_instance`, `round_robin`), each with
  its own store and window or sharing one Redis and one PostgreSQL; `isolation_scan` of every
  model request for another user's data; `reply_figures`, what an instance hands back (notebook
  09 writes its own instance and round-robin and wraps the process in an `Instance`).
- `scaling`: `writer_throughput` and `writer_curve`, SQLite and PostgreSQL with several writer
  processes; `quota_race`, writer processes racing one user at its quota on either backend.
- `refusals` and `display`: `attempt_puts`, `try_open`, `sha256_file`, `scrub`, `compare_prediction`
  for tables of refusals and exercise checks.

Error messages handed back for display have the workspace folder removed (only file names remain),
so notebook outputs carry no machine paths.
"""

from __future__ import annotations

from .approving import approval_kill_experiment, approval_race, proposal_race
from .conversation import (ask_in_new_process, conversation_crash_experiment, start_redis_server,
                           ticket_after_sigkill, told_then_killed)
from .crashes import check_writes, crash_experiment, crash_value, kill_writer, stream_writes
from .display import compare_prediction, scrub
from .instances import kill_experiment, spawn_instance
from .locks import holding_write_lock
from .races import race_writers, run_racers
from . import redis_faults  # noqa: F401  (registers its workers; its functions are used as redis_faults.*)
from .refusals import attempt_puts, sha256_file, try_open
from .sessions import GoldfishAgent, run_goldfish_session, run_session
from .replicas import HOP_SCRIPT, Instance, isolation_scan, reply_figures, round_robin, start_instance
from .scaling import quota_race, writer_curve, writer_throughput
from .sidecars import (clock_experiment, foreign_wal_experiment, killed_creators_experiment,
                       leftover_wal_experiment, refused_write_experiment)
from .workers import ROOMY_LIMITS, limits_from, read_answer, run_worker, start_worker

__all__ = [
    "HOP_SCRIPT",
    "ROOMY_LIMITS",
    "GoldfishAgent",
    "Instance",
    "approval_kill_experiment",
    "approval_race",
    "ask_in_new_process",
    "attempt_puts",
    "check_writes",
    "clock_experiment",
    "compare_prediction",
    "conversation_crash_experiment",
    "crash_experiment",
    "crash_value",
    "foreign_wal_experiment",
    "holding_write_lock",
    "isolation_scan",
    "kill_experiment",
    "kill_writer",
    "killed_creators_experiment",
    "leftover_wal_experiment",
    "limits_from",
    "proposal_race",
    "quota_race",
    "race_writers",
    "read_answer",
    "refused_write_experiment",
    "reply_figures",
    "round_robin",
    "run_goldfish_session",
    "run_racers",
    "run_session",
    "run_worker",
    "scrub",
    "sha256_file",
    "spawn_instance",
    "start_instance",
    "start_redis_server",
    "start_worker",
    "stream_writes",
    "ticket_after_sigkill",
    "told_then_killed",
    "try_open",
    "writer_curve",
    "writer_throughput",
]
