"""Retrieval by meaning: an embedding model that works offline, and what the store keeps of it.

A record's text ("drink: espresso") becomes a vector; texts that mean similar things get vectors
that point the same way, so "coffee" finds "espresso" although no letter of one is in the other.
The similarity of two unit vectors is their dot product: 1 the same direction, 0 unrelated. The
model (WordLlama, inside its wheel: no download) comes with the `semantic` extra, imported only
when a store is given an embedder. Why this model and this threshold: docs/design/semantic.md.

Example:
    >>> embedder = load_embedder()                                   # doctest: +SKIP
    >>> store = MemoryStore(path, embedder=embedder)                 # doctest: +SKIP
    >>> store.search_by_meaning("alice", "coffee")[0]["key"]         # doctest: +SKIP
    'drink'
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, Protocol
from collections.abc import Sequence

from .errors import MemkitError, ValidationError, install_hint

if TYPE_CHECKING:
    import numpy

INSTALL_HINT = install_hint("semantic")
DEFAULT_MODEL = "wordllama/l2_supercat-256"
"""The model `load_embedder()` loads: WordLlama's l2_supercat weights at their full 256 dimensions."""

DEFAULT_MIN_SIMILARITY = 0.3
"""A by-meaning hit must be at least this similar to the question (chosen on bench/semantic_bench.py's
labelled set: docs/design/semantic.md)."""

_KEY_SEPARATORS = re.compile(r"[_.:-]+")


class SemanticUnavailableError(MemkitError, ImportError):
    """Retrieval by meaning was asked for but the `semantic` extra is not installed. Nothing was changed."""


class Embedder(Protocol):
    """What the store needs of an embedding model.

    Attributes:
        name: the model's name, kept beside every vector it made (a vector of another model is stale).
        dim: how many numbers each vector has.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        """One unit-length float32 vector per text, as a `(len(texts), dim)` array."""
        ...


class WordLlamaEmbedder:
    """WordLlama's `l2_supercat` model from the files inside its wheel (no download).

    `cache_dir` is the package's own folder: `WordLlama.load()` would look for the tokenizer where
    the wheel does not put it, and try to download it (docs/design/semantic.md).
    """

    def __init__(self, dim: int = 256) -> None:
        try:
            import wordllama
            from wordllama import WordLlama
        except ImportError:
            raise SemanticUnavailableError(
                f"retrieval by meaning needs the semantic extra (wordllama): {INSTALL_HINT}. "
                "Literal search works without it") from None
        from pathlib import Path

        if dim not in (64, 128, 256):
            raise ValidationError(f"dim is {dim!r}; l2_supercat offers 64, 128 or 256 dimensions")
        self.dim = dim
        self.name = f"wordllama/l2_supercat-{dim}"
        self._model: Any = WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True,
                                          trunc_dim=None if dim == 256 else dim)

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        """Unit-length float32 vectors, one row per text."""
        import numpy

        vectors = self._model.embed(list(texts), norm=True)
        return numpy.asarray(vectors, dtype=numpy.float32).reshape(len(texts), self.dim)

    def __repr__(self) -> str:
        return f"WordLlamaEmbedder({self.name!r})"


@functools.cache
def load_embedder(model: str = DEFAULT_MODEL) -> Embedder:
    """The embedding model named `model`, loaded once per process (about a second the first time).

    Raises:
        SemanticUnavailableError: the `semantic` extra is not installed (the message says how).
        ValidationError: `model` is not one this kit knows.
    """
    known = {f"wordllama/l2_supercat-{dim}": dim for dim in (64, 128, 256)}
    if model not in known:
        raise ValidationError(f"embedding model {model!r} is unknown; use one of {', '.join(known)}")
    return WordLlamaEmbedder(known[model])


def embedding_text(key: str, value: str) -> str:
    """The text a record is embedded from: its key in words, then its value ("flight seat: window").

    The key carries meaning a value alone may lack ("drink: tea" against "tea").
    """
    return f"{_KEY_SEPARATORS.sub(' ', key).strip()}: {value}"


def to_bytes(vector: numpy.ndarray) -> bytes:
    """A vector as the bytes SQLite keeps: little-endian float32, 4 bytes per dimension."""
    import numpy

    return numpy.asarray(vector, dtype="<f4").tobytes()


def from_bytes(blob: bytes, dim: int) -> numpy.ndarray:
    """The vector `to_bytes` wrote (refusing bytes of another length)."""
    import numpy

    if len(blob) != 4 * dim:
        raise ValidationError(f"a stored vector has {len(blob)} bytes; {dim} dimensions need {4 * dim}")
    return numpy.frombuffer(blob, dtype="<f4")


def similarities(query: numpy.ndarray, vectors: numpy.ndarray) -> list[float]:
    """The cosine similarity of `query` with each row of `vectors` (all unit length: dot products)."""
    if len(vectors) == 0:
        return []
    return [float(s) for s in vectors @ query]
