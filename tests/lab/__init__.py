"""The lab as the tests use it: the kit's experiments (`classroom.lab`, what the notebooks run) and the
test suite's own, which ship with the tests rather than the package.

The tests' own experiments, each with real processes through the lab's one worker protocol
(`lab.workers`: `python -m lab MODE`, a JSON payload on stdin):

- `races`: `race_writers`, the kit's writer against a naive check-then-insert one at the quota's
  edge; `run_racers`, the harness under it.
- `locks`: `holding_write_lock`, another process holding the database's write lock.
- `approving`: `approval_race`, processes racing to approve the same proposals near the quota;
  `proposal_race`, processes racing to propose for one user at the per-user bound;
  `approval_kill_experiment`, an approving process killed with SIGKILL (inside its transaction,
  or at a random moment): every approval whole or absent.
- `crashes`: `kill_writer` / `check_writes` / `crash_experiment`, a writer that acknowledges each
  committed write is killed with SIGKILL; the checker proves every acknowledged write survived.
- `conversation`: `conversation_crash_experiment`, `memkit chat` processes killed with SIGKILL
  between and inside asks; the next process must have every acknowledged exchange, none twice;
  `start_redis_server`, a separate redis-server process.
- `redis_faults`: the Redis window when Redis misbehaves: it restarts from an older snapshot, evicts
  keys, is named by a REDIS_URL that is not one, or the program ends without `close()`.
- `sidecars`: files that do not belong together: a leftover or foreign `-wal`, the WAL after a
  refused write, half-made databases of killed creators, a clock that steps back.
- `replicas`: `start_instance` / `round_robin`, the kit's own agent instance process behind a
  round-robin.
- `sessions`: `run_goldfish_session`, and the one-operation workers `put`, `get` and `dump`.
- `display`: `compare_prediction`, an exercise's verdict on a prediction.

`start_worker` and `run_worker` here start `python -m lab MODE`, which knows every mode (the
kit's and the tests'); the rest of `classroom.lab` is re-exported as it is.
"""

from __future__ import annotations

from classroom.lab import (HOP_SCRIPT, ROOMY_LIMITS, GoldfishAgent, Instance, attempt_puts, isolation_scan,
                           limits_from, quota_race, read_answer, reply_figures, run_session, scrub, sha256_file,
                           spawn_instance, try_open, writer_curve, writer_throughput)

from . import redis_faults
from .approving import approval_kill_experiment, approval_race, proposal_race
from .conversation import conversation_crash_experiment, start_redis_server
from .crashes import check_writes, crash_experiment, crash_value, kill_writer, stream_writes
from .display import compare_prediction
from .locks import holding_write_lock
from .races import race_writers, run_racers
from .replicas import round_robin, start_instance
from .sessions import run_goldfish_session
from .sidecars import (clock_experiment, foreign_wal_experiment, killed_creators_experiment, leftover_wal_experiment,
                       refused_write_experiment)
from .workers import run_worker, start_worker

__all__ = [
    "HOP_SCRIPT",
    "ROOMY_LIMITS",
    "GoldfishAgent",
    "Instance",
    "approval_kill_experiment",
    "approval_race",
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
    "kill_writer",
    "killed_creators_experiment",
    "leftover_wal_experiment",
    "limits_from",
    "proposal_race",
    "quota_race",
    "race_writers",
    "read_answer",
    "redis_faults",
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
    "try_open",
    "writer_curve",
    "writer_throughput",
]
