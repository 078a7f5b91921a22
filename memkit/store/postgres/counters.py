"""PostgreSQL's counters and the quota and size checks made on them inside each write.

Each user's row of `user_counts` is their lock and their per-user quota (`lock_user`,
`check_quotas`). The store-wide counts are split into shards (`memkit_shards`, step 13), so writers
of different users commit side by side: a write settles its change into a shard no one holds whose
allowance takes it (`settle`), and only at a cap's edge do writers take turns to rebalance the
shards on the exact totals (`rebalance`). How and why: docs/design/postgres.md.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...errors import LockedError
from ...limits import Limits
from ..backend import refuse_past_quotas, refuse_past_size

if TYPE_CHECKING:
    from .connection import PgConnection

SHARDS = 16
"""How many rows the store-wide counters are split into (step 13, `memkit_shards`)."""

SHARD_LOCK_CLASS = 0x6D6D73
"""The first key of the advisory lock a rebalance of the shards takes ("mms"; the second: a hash of
the store's schema): one rebalance at a time, and none beside a writer that bypasses memkit."""

USER_LOCK_CLASS = 0x6D6D75
"""The first key of the advisory lock a writer of a user without a counter row takes ("mmu"; the
second: a hash of the schema and the user), after the proposal lock and before any counter row."""

PAGE_BYTES = 8192
"""The size cap counts whole PostgreSQL pages: the stored rows' bytes (see `store_size` in
steps.py), rounded up to 8 KiB."""

MEASURED_BYTES_SQL = "(" + " + ".join(
    f"(SELECT coalesce(sum(24 + octet_length(r::text)), 0) FROM {table} AS r)"
    for table in ("memories", "memory_events", "transcript", "proposals", "memory_embeddings", "agent_items")) + ")"
"""The bytes of the rows the size triggers count, measured the way they count them."""

PENDING = "coalesce(nullif(current_setting('memkit_tx.pending_{0}', true), ''), '0')::bigint"
"""A transaction's record or byte change not yet settled into a shard (the triggers add to it)."""


CHECK_USER_SQL = (f"SELECT records, set_config('memkit_tx.pending_checking',"
                  f" ({PENDING.format('checking')} + ?)::text, true) FROM user_counts WHERE user_id = ? FOR UPDATE")
"""The per-user quota's read under the user's row lock, noting `?` records for the global check at the settle."""
ADD_CHECKING = f"SELECT set_config('memkit_tx.pending_checking', ({PENDING.format('checking')} + ?)::text, true)"
SETTLED_SQL = ("SELECT set_config('memkit_tx.pending_records', '0', true),"
               " set_config('memkit_tx.pending_bytes', '0', true),"
               " set_config('memkit_tx.pending_checking', '0', true), set_config('memkit_tx.shard', ?, true)")
SETTLE_SQL = "SELECT * FROM memkit_settle(?, ?, ?)"
"""The fast path of `settle` (`memkit_settle`, step 13), given the caps: the pending changes, the
shard this transaction took before (if any), and the shard that took them now (None: none did)."""
REBALANCE_SQL = (
    "UPDATE memkit_shards AS s SET records = v.records, bytes = v.bytes, records_cap = ?, bytes_cap = ?,"
    " records_allowed = v.records_allowed, bytes_allowed = v.bytes_allowed"
    " FROM unnest(?::integer[], ?::bigint[], ?::bigint[], ?::bigint[], ?::bigint[])"
    " AS v(shard, records, bytes, records_allowed, bytes_allowed) WHERE s.shard = v.shard")


def db_bytes(conn: PgConnection) -> int:
    """The store's size as the cap counts it: its rows' bytes (the shards', plus this transaction's
    changes not yet settled into one), in whole 8 KiB pages."""
    stored = conn.value(f"SELECT (SELECT sum(bytes) FROM memkit_shards) + {PENDING.format('bytes')}")
    return math.ceil(stored / PAGE_BYTES) * PAGE_BYTES


def caps(limits: Limits) -> tuple[int, int]:
    """The global quota and the size cap as shards count them: records, and bytes whose whole
    pages fit within `max_db_bytes`."""
    return limits.max_records_total, limits.max_db_bytes // PAGE_BYTES * PAGE_BYTES


def shares(used: list[int], shards: list[int], target: int, room: int) -> list[int | None]:
    """Each shard's allowance: what it uses plus an equal part of the `room` left under the cap (the
    rest of the division to `target`, the shard that asked); none at all where no room is left."""
    if room < 0:
        return [None] * len(used)
    part, rest = divmod(room, len(used))
    return [n + part + (rest if shard == target else 0) for n, shard in zip(used, shards, strict=True)]


def lock_user(conn: PgConnection, user: str, creating: bool, where: str) -> int:
    """Lock `user`'s counter row until the transaction ends; return their record count.

    Every write of a user takes this lock before it reads that user's rows, so the rows it reads
    stay as read until it commits. A user without records has no row: such writers (a session's
    items, the first put, which makes the row at 0 when `creating`) take the user's advisory lock
    instead, and read again holding it, so they exclude each other and whoever made the row meanwhile.

    Raises:
        LockedError: the row kept vanishing and coming back (`where` names the store).
    """
    advised = False
    for _ in range(4):  # the row may vanish under us once: its last record deleted by the holder
        row = conn.execute("SELECT records FROM user_counts WHERE user_id = ? FOR UPDATE", (user,)).fetchone()
        if row is not None:
            return int(row[0])
        if not advised:  # then read again: a writer holding it may have made the row
            conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(current_schema() || '/' || ?))",
                         (USER_LOCK_CLASS, user))
            advised = True
            continue
        if not creating:
            return 0
        conn.execute("INSERT INTO user_counts VALUES (?, 0) ON CONFLICT (user_id) DO NOTHING", (user,))
    raise LockedError(f"the counter row of user {user!r} in {where} kept changing; try again")


def check_quotas(conn: PgConnection, limits: Limits, user: str, adding: int, where: str) -> None:
    """Refuse (QuotaError) `adding` new records of `user` past the per-user quota now, and past
    the global quota when the write settles (`settle`: the size check, or the commit).

    The per-user figure is read holding the user's counter row, so no racing writer of the user
    passes the same check with the same room. The global one is checked where the write's records
    are moved into a shard (`settle`): before then, a writer holds no row other users need.
    """
    # One round trip where the user's row exists (a put locked it already): read it and note
    # the global check for the settle; a refusal below rolls the note back with the write.
    row = conn.execute(CHECK_USER_SQL, (adding, user)).fetchone()
    if row is None:
        mine = lock_user(conn, user, creating=True, where=where)
        conn.execute(ADD_CHECKING, (adding,))
    else:
        mine = int(row[0])
    if mine + adding > limits.max_records_per_user:
        refuse_past_quotas(limits, user, mine, 0, adding)


def settle(conn: PgConnection, limits: Limits, schema: str, where: str, check_size: bool) -> None:
    """Move the transaction's pending record and byte changes into one shard it locks.

    The fast path is one call (`memkit_settle`, step 13): lock a shard no other transaction holds
    whose allowances take the changes, and add them there. When none does, this writer, holding no
    shard it tried, rebalances (`rebalance`), where a checked write past a cap is refused on the
    exact totals (docs/design/postgres.md).

    Args:
        conn: the write transaction's connection.
        limits: the store's limits (the caps, and what a refusal names).
        schema: the store's PostgreSQL schema (the second key of the rebalance lock).
        where: the store's masked URL, for messages.
        check_size: refuse past the size cap (the write's size check), not only past the quota.

    Raises:
        QuotaError: past the global quota (if `check_quotas` asked) or the size cap.
        LockedError: this transaction holds a shard and another writer is rebalancing.
    """
    records, size, checking, held, taken = conn.execute(SETTLE_SQL, (*caps(limits), check_size)).fetchall()[0]
    if taken is None and (records or size or checking):
        rebalance(conn, limits, schema, where, (records, size, checking), held, check_size)
    conn.settled_at = conn.sent  # nothing pending now; a later statement may add some


def rebalance(conn: PgConnection, limits: Limits, schema: str, where: str, pending: tuple[int, int, int],
              held: int | None, check_size: bool) -> None:
    """The slow path of `settle`: the rebalance lock, then every shard in shard order; refuse on the
    exact totals, or apply the `pending` (records, bytes, checking) changes and share the room left
    among the shards (none where a total is past its cap: every later write that grows it comes here
    and is refused)."""
    records, size, checking = pending
    cap_records, cap_bytes = caps(limits)
    key = (SHARD_LOCK_CLASS, schema)
    if held is None:
        conn.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", key)
    elif not conn.value("SELECT pg_try_advisory_xact_lock(?, hashtext(?))", key):
        # This transaction holds a shard from an earlier write of its own, and the writer that
        # rebalances now may be waiting for it: waiting here would close the cycle.
        raise LockedError(
            f"{where}: another writer is rebalancing the store's counters, and this transaction "
            "holds one of them from an earlier write; it was rolled back and nothing was written. "
            "Try again")
    rows = conn.execute("SELECT shard, records, bytes FROM memkit_shards ORDER BY shard FOR UPDATE").fetchall()
    total_records = sum(row[1] for row in rows) + records
    total_bytes = sum(row[2] for row in rows) + size
    if checking and total_records > cap_records:
        # The per-user quota was checked under the user's lock (`check_quotas`): the global
        # one only here (mine = -checking keeps the per-user check of this call quiet).
        refuse_past_quotas(limits, "", -checking, total_records - checking, checking)
    if check_size:
        refuse_past_size(limits, math.ceil(total_bytes / PAGE_BYTES) * PAGE_BYTES)
    target = held if held is not None else int(conn.value(f"SELECT pg_backend_pid() % {SHARDS}"))
    numbers = [row[0] for row in rows]
    used_records = [row[1] + (records if row[0] == target else 0) for row in rows]
    used_bytes = [row[2] + (size if row[0] == target else 0) for row in rows]
    conn.execute(REBALANCE_SQL, (cap_records, cap_bytes, numbers, used_records, used_bytes,
                                 shares(used_records, numbers, target, cap_records - total_records),
                                 shares(used_bytes, numbers, target, cap_bytes - total_bytes)))
    conn.execute(SETTLED_SQL, (str(target),))
