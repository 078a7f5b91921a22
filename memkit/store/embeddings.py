"""The records' vectors (retrieval by meaning): written in the write's transaction, read one user at a time.

Every read here is bound to one user by `WHERE user_id = ?` on the vectors' own index, before any
similarity is computed: a search by meaning never ranks the whole store and filters afterwards
(that order can hand one user's record to another, or return nothing when the nearest vectors
belong to others). A user's rows are bounded by the per-user quota, so ranking them all is cheap.

SQLite keeps a vector as little-endian float32 bytes, PostgreSQL as `real[]`; the store's backend
says which (`encode`/`decode` arguments), the SQL is the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Sequence

from ..semantic import similarities
from .statements import RECORD_SQL, Record, to_record

if TYPE_CHECKING:
    import numpy

    from .backend import Backend

WRITE_SQL = (
    "INSERT INTO memory_embeddings (memory_id, user_id, model, dim, vector)"
    " SELECT id, user_id, ?, ?, ? FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ? AND value = ?"
    " ON CONFLICT (memory_id) DO UPDATE SET model = excluded.model, dim = excluded.dim, vector = excluded.vector"
)
"""(model, dim, vector, user, kind, key, value): the vector of one record, written only if the record
still holds the value it was made from (a rebuild racing a put never keeps a vector of an old value)."""

USER_VECTORS_SQL = (
    f"SELECT {', '.join('m.' + c.strip() for c in RECORD_SQL.split(','))}, {{vector}} AS vector"
    " FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
    " WHERE e.user_id = ? AND e.model = ? AND e.dim = ? AND m.user_id = ? AND (? IS NULL OR m.kind = ?)"
)
"""(user, model, dim, user, kind, kind): one user's records that have a current vector, with it.
`{vector}` is how the backend reads a vector out (`e.vector` on SQLite)."""

STATUS_SQL = (
    "SELECT count(*) AS records,"
    " count(e.memory_id) FILTER (WHERE e.model = ? AND e.dim = ?) AS current,"
    " count(e.memory_id) FILTER (WHERE NOT (e.model = ? AND e.dim = ?)) AS stale"
    " FROM memories m LEFT JOIN memory_embeddings e ON e.memory_id = m.id WHERE m.user_id = ?"
)
"""(model, dim, model, dim, user): the user's records, those with a vector of this model, of another."""

TO_EMBED_SQL = (
    "SELECT m.user_id, m.kind, m.memory_key, m.value FROM memories m"
    " LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = ? AND e.dim = ?"
    " WHERE e.memory_id IS NULL AND (? IS NULL OR m.user_id = ?) ORDER BY m.user_id, m.kind, m.memory_key"
)
"""(model, dim, user, user): the records without a vector of this model (missing or stale)."""


def user_vectors(conn: Any, user: str, model: str, dim: int, kind: str | None,
                 decode: Callable[[Any, int], numpy.ndarray],
                 vector_sql: str = "e.vector") -> tuple[list[Record], numpy.ndarray]:
    """One user's records with a current vector (of `model`, `dim`), and those vectors as one array."""
    import numpy

    rows = conn.execute(USER_VECTORS_SQL.format(vector=vector_sql), (user, model, dim, user, kind, kind)).fetchall()
    records = [to_record(row) for row in rows]
    vectors = numpy.stack([decode(row["vector"], dim) for row in rows]) if rows else numpy.zeros((0, dim))
    return records, vectors


def status(conn: Any, user: str, model: str, dim: int) -> dict[str, Any]:
    """How many of `user`'s records have a vector of `model` (current), of another model (stale), none (missing)."""
    row = conn.execute(STATUS_SQL, (model, dim, model, dim, user)).fetchone()
    records, current, stale = int(row["records"]), int(row["current"]), int(row["stale"])
    return {"model": model, "dim": dim, "records": records, "current": current, "stale": stale,
            "missing": records - current - stale}


def to_embed(conn: Any, model: str, dim: int, user: str | None) -> list[tuple[str, str, str, str]]:
    """(user, kind, key, value) of every record (of `user`, or all) without a vector of this model."""
    return [(r["user_id"], r["kind"], r["memory_key"], r["value"])
            for r in conn.execute(TO_EMBED_SQL, (model, dim, user, user)).fetchall()]


def write(conn: Any, model: str, dim: int, vector: Any, user: str, kind: str, key: str, value: str) -> int:
    """Write one record's vector (inside the caller's transaction); 1 if written, 0 if the value changed."""
    return conn.execute(WRITE_SQL, (model, dim, vector, user, kind, key, value)).rowcount


def rank(records: Sequence[Record], sims: Sequence[float], min_similarity: float, limit: int) -> list[Record]:
    """The records at least `min_similarity` similar, most similar first (newest first among equals)."""
    scored = [{**record, "similarity": round(sim, 4)}
              for record, sim in zip(records, sims, strict=True) if sim >= min_similarity]
    scored.sort(key=lambda r: r["updated_at"], reverse=True)
    scored.sort(key=lambda r: r["similarity"], reverse=True)
    return scored[:limit]


def rank_in_python(db: Backend, user: str, vector: numpy.ndarray, model: str, dim: int, limit: int,
                   kind: str | None, min_similarity: float, decode: Callable[[Any, int], numpy.ndarray],
                   vector_sql: str = "e.vector") -> list[Record]:
    """A search by meaning without pgvector: `user`'s own vectors (bounded by the quota) read in one
    snapshot, then ranked here (`rank`)."""
    with db.reading() as conn:
        records, vectors = user_vectors(conn, user, model, dim, kind, decode, vector_sql)
    return rank(records, similarities(vector, vectors), min_similarity, limit)
