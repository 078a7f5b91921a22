"""The façade's retrieval by meaning: search by meaning, the vectors' status, reindexing.

Part of `MemoryStore` (see store_core.py); the vectors' SQL is embeddings.py's, the ranking the
backend's (`Backend.search_by_meaning`: in Python, or pgvector's on PostgreSQL).
"""

from __future__ import annotations

from typing import Any

from ..errors import ValidationError
from ..semantic import DEFAULT_MIN_SIMILARITY, embedding_text
from . import embeddings
from .statements import Record
from .store_core import StoreCore


class StoreMeaning(StoreCore):
    """`MemoryStore`'s search by meaning: search_by_meaning, embedding_status, embedding_models, reindex."""

    def search_by_meaning(self, user: str, query: str, limit: int = 5, kind: str | None = None,
                          min_similarity: float = DEFAULT_MIN_SIMILARITY) -> list[Record]:
        """Memories of `user` whose meaning is close to `query`, most similar first.

        The user filter comes first: the vectors read are `user`'s alone (through their index),
        and only they are ranked; a global nearest-neighbour search filtered afterwards could rank
        another user's records above theirs and drop them, or hand them out. Only vectors of this
        store's embedder are compared (`embedding_status` counts the others as stale).

        Args:
            user: whose memories to search.
            query: 1 to 256 code points, not blank.
            limit: 1 to `Limits.max_search_limit` results.
            kind: only this kind, or both when None.
            min_similarity: the least cosine similarity a hit needs, from -1 to 1.

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
        return self._db.search_by_meaning(user, vector, embedder.name, embedder.dim, limit, kind, float(min_similarity))

    def embedding_status(self, user: str) -> dict[str, Any]:
        """How many of `user`'s records have a vector of this store's embedder.

        Returns:
            model, dim, records, current (a vector of this model), stale (of another model: not
            compared until `reindex`), missing (none: written without an embedder).

        Raises:
            ValidationError: a bad user, or a store opened without an embedder.
        """
        self.limits.check_id("user", user)
        embedder = self._need_embedder("embedding status")
        with self._db.reading() as conn:
            return embeddings.status(conn, user, embedder.name, embedder.dim)

    def embedding_models(self) -> dict[str, int]:
        """The models whose vectors the store keeps, with how many each (an empty dict: none).

        Needs no embedder: a command that writes asks it to know which model keeps a store's
        vectors current (`memkit put` on a store searched by meaning).
        """
        rows = self._db.fetch(
            "SELECT model, count(*) FROM memory_embeddings GROUP BY model ORDER BY count(*) DESC, model")
        return {str(row[0]): int(row[1]) for row in rows}

    def reindex(self, user: str | None = None, *, batch: int | None = None) -> dict[str, Any]:
        """Make the vectors that are missing or stale (of another model) with this store's embedder.

        For a new model, or records written without an embedder. The vectors are made outside the
        write lock and written in one transaction (all or nothing), each only if its record still
        holds the value it was made from (a put meanwhile keeps its own vector). Safe to run again:
        a record with a current vector is left alone.

        Args:
            user: only this user's records (all users when None).
            batch: write this many records per transaction instead (1 to 1000), for stores too
                large to hold every vector in memory at once; a failure then keeps the batches
                written before it.

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
        with self._db.reading() as conn:
            todo = embeddings.to_embed(conn, embedder.name, embedder.dim, user)
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

