"""Retrieval by meaning: the records' vectors, written in the write's transaction, read one user at a time.

Every read is bound to one user by `WHERE user_id = ?` before any similarity is computed: a search
by meaning never ranks the whole store and filters afterwards (that order can hand one user's
record to another). A user's rows are bounded by the quota, so ranking them all is cheap. SQLite
keeps a vector as float32 bytes, PostgreSQL as `real[]` (the backend's `encode_vector`); the SQL is
the same.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast
from collections.abc import Callable, Sequence

from ..errors import ValidationError, install_hint
from ..semantic import DEFAULT_MIN_SIMILARITY, Embedder, embedding_text, from_bytes, similarities, to_bytes
from .backend import Backend, StorePart
from .statements import RECORD_SQL, Record, to_record

if TYPE_CHECKING:
    import numpy

WRITE_SQL = (
    "INSERT INTO memory_embeddings (memory_id, user_id, model, dim, vector)"
    " SELECT id, user_id, ?, ?, ? FROM memories WHERE user_id = ? AND kind = ? AND memory_key = ? AND value = ?"
    " ON CONFLICT (memory_id) DO UPDATE SET model = excluded.model, dim = excluded.dim, vector = excluded.vector"
)
"""(model, dim, vector, user, kind, key, value): one record's vector, written only if the record still
holds the value it was made from (a reindex racing a put never keeps a vector of an old value)."""

USER_VECTORS_SQL = (
    f"SELECT {', '.join('m.' + c.strip() for c in RECORD_SQL.split(','))}, {{vector}} AS vector"
    " FROM memory_embeddings e JOIN memories m ON m.id = e.memory_id"
    " WHERE e.user_id = ? AND e.model = ? AND e.dim = ? AND m.user_id = ? AND (? IS NULL OR m.kind = ?)"
)
"""(user, model, dim, user, kind, kind): one user's records that have a current vector, with it.
`{vector}` is how the backend reads a vector out (`e.vector` on SQLite)."""

UNINDEXED_SQL = (
    f"SELECT {', '.join('m.' + c.strip() for c in RECORD_SQL.split(','))} FROM memories m"
    " LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = ? AND e.dim = ?"
    " WHERE m.user_id = ? AND e.memory_id IS NULL AND (? IS NULL OR m.kind = ?)"
)
"""(model, dim, user, kind, kind): one user's records without a vector of that model (written
without one, or holding another model's)."""

def user_vectors(conn: Any, user: str, model: str, dim: int, kind: str | None,
                 decode: Callable[[Any, int], numpy.ndarray],
                 vector_sql: str = "e.vector") -> tuple[list[Record], numpy.ndarray]:
    """One user's records with a current vector (of `model`, `dim`), and those vectors as one array."""
    import numpy

    rows = conn.execute(USER_VECTORS_SQL.format(vector=vector_sql), (user, model, dim, user, kind, kind)).fetchall()
    records = [to_record(row) for row in rows]
    vectors = numpy.stack([decode(row["vector"], dim) for row in rows]) if rows else numpy.zeros((0, dim))
    return records, vectors


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


class SqliteVectors:
    """`SqliteDatabase`'s vectors (db.py): float32 bytes, ranked in Python."""

    def encode_vector(self, vector: numpy.ndarray) -> bytes:
        """A vector as SQLite keeps it: little-endian float32 bytes."""
        return to_bytes(vector)

    def search_by_meaning(self, user: str, vector: numpy.ndarray, model: str, dim: int, limit: int,
                          kind: str | None, min_similarity: float) -> list[Record]:
        """The user's own vectors (bounded by the quota) ranked in Python."""
        return rank_in_python(cast(Backend, self), user, vector, model, dim, limit, kind, min_similarity,
                              from_bytes)


class StoreEmbeddings(StorePart):
    """`Store`'s vectors: search_by_meaning, embedding_status, embedding_models, reindex."""

    def _need_embedder(self, doing: str) -> Embedder:
        if self.embedder is None:
            raise ValidationError(
                f"{doing} needs an embedding model: open the store with "
                f"embedder=memkit.semantic.load_embedder() ({install_hint('semantic')})")
        return self.embedder

    def _embed(self, texts: list[str]) -> numpy.ndarray:
        embedder = self._need_embedder("embedding")
        vectors = embedder.embed(texts)
        if getattr(vectors, "shape", None) != (len(texts), embedder.dim):
            raise ValidationError(f"embedder {embedder.name!r} returned vectors of shape "
                                  f"{getattr(vectors, 'shape', None)}; expected ({len(texts)}, {embedder.dim})")
        return vectors

    def _write_vector(self, conn: Any, vector: numpy.ndarray, user: str, kind: str, key: str, value: str) -> int:
        """Write one record's vector (inside the caller's transaction); 1 if written, 0 if the value changed."""
        embedder = self._need_embedder("embedding")
        return int(conn.execute(WRITE_SQL, (embedder.name, embedder.dim, self._db.encode_vector(vector),
                                            user, kind, key, value)).rowcount)

    def search_by_meaning(self, user: str, query: str, limit: int = 5, kind: str | None = None,
                          min_similarity: float = DEFAULT_MIN_SIMILARITY, *,
                          embed_missing: bool = False) -> list[Record]:
        """Memories of `user` whose meaning is close to `query`, most similar first.

        Only `user`'s vectors of this store's embedder are read and ranked. Arguments as `search`
        (`query` not blank); `min_similarity`: the least cosine similarity a hit needs, -1 to 1;
        `embed_missing`: also compare `user`'s records that have no vector of this model, with
        vectors made for this search and not kept (a read-only store can search them too).

        Returns:
            Records as `search` returns them, each with its `similarity` (rounded to 4 places).

        Raises:
            ValidationError: a bad argument, or a store opened without an embedder (the message says how).
        """
        self.limits.check_id("user", user)
        self.limits.check_query(query)
        if not query.strip():
            raise ValidationError("query is blank; a search by meaning needs some text")
        self.limits.check_limit(limit)
        if kind is not None:
            self.limits.check_kind(kind)
        if isinstance(min_similarity, bool) or not isinstance(min_similarity, (int, float)) \
                or not -1.0 <= min_similarity <= 1.0:
            raise ValidationError(f"min_similarity is {min_similarity!r}; use a number from -1 to 1")
        embedder = self._need_embedder("search by meaning")
        vector = self._embed([query])[0]
        hits = self._db.search_by_meaning(user, vector, embedder.name, embedder.dim, limit, kind, float(min_similarity))
        if not embed_missing:
            return hits
        # Bounded by the user's quota, as every read here; ranked with the stored hits.
        unindexed = [to_record(row) for row in self._db.fetch(UNINDEXED_SQL, (embedder.name, embedder.dim, user,
                                                                              kind, kind))]
        if not unindexed:
            return hits
        vectors = self._embed([embedding_text(r["key"], r["value"]) for r in unindexed])
        merged = hits + rank(unindexed, similarities(vector, vectors), float(min_similarity), limit)
        merged.sort(key=lambda r: r["updated_at"], reverse=True)  # as `rank` orders: newest first among equals
        merged.sort(key=lambda r: r["similarity"], reverse=True)
        return merged[:limit]

    def embedding_status(self, user: str) -> dict[str, Any]:
        """How many of `user`'s records have a vector of this store's embedder: model, dim, records,
        current, stale (of another model: not compared until `reindex`), missing (written without one).
        ValidationError: a bad user, or a store opened without an embedder."""
        self.limits.check_id("user", user)
        embedder = self._need_embedder("embedding status")
        model, dim = embedder.name, embedder.dim
        row = self._db.fetch(
            "SELECT count(*) AS records, count(e.memory_id) FILTER (WHERE e.model = ? AND e.dim = ?) AS current,"
            " count(e.memory_id) FILTER (WHERE NOT (e.model = ? AND e.dim = ?)) AS stale"
            " FROM memories m LEFT JOIN memory_embeddings e ON e.memory_id = m.id WHERE m.user_id = ?",
            (model, dim, model, dim, user))[0]
        records, current, stale = int(row["records"]), int(row["current"]), int(row["stale"])
        return {"model": model, "dim": dim, "records": records, "current": current, "stale": stale,
                "missing": records - current - stale}

    def embedding_models(self) -> dict[str, int]:
        """The models whose vectors the store keeps, with how many each (needs no embedder: `memkit put`
        asks it to know which model keeps a store's vectors current)."""
        rows = self._db.fetch(
            "SELECT model, count(*) FROM memory_embeddings GROUP BY model ORDER BY count(*) DESC, model")
        return {str(row[0]): int(row[1]) for row in rows}

    def reindex(self, user: str | None = None, *, batch: int | None = None) -> dict[str, Any]:
        """Make the vectors that are missing or stale (of another model) with this store's embedder.

        The vectors are made outside the write lock, each written only if its record still holds the
        value it was made from (a put meanwhile keeps its own vector). Safe to run again.

        Args:
            user: only this user's records (all users when None).
            batch: write this many records per transaction (1 to 1000) instead of all in one, for
                stores too large to hold every vector in memory; a failure keeps the batches before it.

        Returns:
            model, dim, embedded (vectors written), skipped (records changed meanwhile).

        Raises:
            ValidationError: a bad argument, or a store opened without an embedder.
        """
        if user is not None:
            self.limits.check_id("user", user)
        if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= 1000):
            raise ValidationError(f"batch is {batch!r}; use 1 to 1000 records per transaction, or None for one")
        embedder = self._need_embedder("reindex")
        # The records without a vector of this model (missing or stale).
        todo = [(r["user_id"], r["kind"], r["memory_key"], r["value"]) for r in self._db.fetch(
            "SELECT m.user_id, m.kind, m.memory_key, m.value FROM memories m"
            " LEFT JOIN memory_embeddings e ON e.memory_id = m.id AND e.model = ? AND e.dim = ?"
            " WHERE e.memory_id IS NULL AND (? IS NULL OR m.user_id = ?) ORDER BY m.user_id, m.kind, m.memory_key",
            (embedder.name, embedder.dim, user, user))]
        written = 0
        batch = batch or max(len(todo), 1)
        for start in range(0, len(todo), batch):
            part = todo[start:start + batch]
            vectors = self._embed([embedding_text(key, value) for _, _, key, value in part])
            with self.transaction() as conn:
                # The users' write locks first (in one order): on PostgreSQL a put of the same record
                # then either committed before (its value is what the write below compares) or waits.
                for owner in sorted({owner for owner, _, _, _ in part}):
                    self._db.lock_user(conn, owner, creating=False)
                for (owner, kind, key, value), vector in zip(part, vectors, strict=True):
                    written += self._write_vector(conn, vector, owner, kind, key, value)
                self._db.check_size(conn)
        return {"model": embedder.name, "dim": embedder.dim, "embedded": written, "skipped": len(todo) - written}
