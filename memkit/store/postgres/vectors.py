"""Vectors on PostgreSQL (retrieval by meaning): pgvector where the server has it, `real[]` read
fast where it has not.

With pgvector the user's rows are ranked by cosine distance in SQL; without it the user's vectors
are read as `array_send`'s bytes and ranked in Python (`embeddings.rank_in_python`), as on SQLite.
The answers are the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, cast

from ...errors import StoreError, ValidationError
from .schema import LOCK_CLASS
from ..statements import RECORD_SQL, Record, to_record

if TYPE_CHECKING:
    import numpy


class Database(Protocol):
    """What these functions use of a `PostgresDatabase` (named, not imported: backend.py imports this module)."""

    def fetch(self, sql: str, args: Sequence[Any] = ()) -> list[Any]: ...
    def transaction(self) -> AbstractContextManager[Any]: ...

VECTOR_SQL = "array_send(e.vector)"
"""How the Python path reads a stored vector: `array_send`'s bytes, a third of the time psycopg takes
to turn a real[] into a list of Python floats (64 vectors of 256: about 2 ms against 6)."""


def decode(stored: Any, dim: int) -> numpy.ndarray:
    """A vector read with `VECTOR_SQL`, as float32 (ValidationError if it is not `dim` numbers)."""
    import numpy

    # array_send: ndim, has-nulls flag, element type, then (length, lower bound) per dimension,
    # all big-endian int32; then each element as its length (4) and its float4.
    blob = bytes(stored)
    header = numpy.frombuffer(blob, dtype=">i4", count=5) if len(blob) >= 20 else None
    if header is None or header[0] != 1 or header[1] != 0 or header[3] != dim or len(blob) != 20 + 8 * dim:
        raise ValidationError(f"a stored vector is not a one-dimensional array of {dim} numbers")
    return numpy.frombuffer(blob, dtype=">f4", offset=20)[1::2].astype(numpy.float32)


def rank(pg: Database, vector_schema: str, user: str, vector: numpy.ndarray, model: str, dim: int,
         limit: int, kind: str | None, min_similarity: float) -> list[Record]:
    """`user`'s records ranked by pgvector: the user's rows first (WHERE user_id through the vectors'
    index), ranked by cosine distance in SQL; no approximate index, which would rank the whole
    table first."""
    vec = f'"{vector_schema}".vector'
    distance = f'OPERATOR("{vector_schema}".<=>)'  # cosine distance, wherever pgvector lives
    columns = ", ".join("m." + c.strip() for c in RECORD_SQL.split(","))
    rows = pg.fetch(
        f"SELECT * FROM (SELECT {columns}, m.seq, 1 - (e.vector::{vec} {distance} ?::{vec}) AS similarity"
        " FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
        " WHERE e.user_id = ? AND e.model = ? AND e.dim = ? AND m.user_id = ?"
        " AND (?::text IS NULL OR m.kind = ?)) AS ranked"
        " WHERE similarity >= ? ORDER BY round(similarity::numeric, 4) DESC, seq DESC LIMIT ?",
        ("[" + ",".join(repr(float(x)) for x in vector) + "]", user, model, dim, user, kind, kind,
         min_similarity, limit),
    )
    return [{**to_record(cast(Any, row)), "similarity": round(float(row["similarity"]), 4)} for row in rows]


def ensure_pgvector(pg: Database) -> str | None:
    """The schema of pgvector's `vector` type, installing the extension where the server offers it
    and this role may; None where it cannot (searches by meaning then rank in Python)."""
    find = ("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'vector'")
    found = pg.fetch(find)
    if found:
        return str(found[0][0])
    if not pg.fetch("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"):
        return None
    try:
        with pg.transaction() as conn:
            # One installer at a time: two concurrent CREATE EXTENSION IF NOT EXISTS can collide.
            conn.execute("SELECT pg_advisory_xact_lock(?, hashtext('pgvector'))", (LOCK_CLASS,))
            try:  # where a DBA puts it (public), not inside one store's schema, which may be dropped
                with pg.transaction() as nested:
                    nested.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            except StoreError:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except StoreError:
        return None  # no privilege to install it: rank in Python
    found = pg.fetch(find)
    return str(found[0][0]) if found else None
