"""The commands of retrieval by meaning: `memkit search --by-meaning` and `memkit reindex`.

Both load the embedding model of the `semantic` extra; without it they are refused (exit 2) with
the install hint, and every other command, literal search included, works as before.
"""

from __future__ import annotations

import argparse
import sys

from ..semantic import DEFAULT_MODEL, load_embedder
from .options import require_confirm, store_for
from .output import emit


def cmd_search_by_meaning(args: argparse.Namespace) -> None:
    """`memkit search --by-meaning`: the user's records closest in meaning to --query, with their similarity."""
    embedder = load_embedder(args.model or DEFAULT_MODEL)
    with store_for(args, embedder=embedder) as store:
        # Every record is compared, whichever way it was written: one without a stored vector (written
        # before the store kept vectors, or by a program without the model) gets one for this search.
        hits = store.search_by_meaning(args.user, args.query, limit=args.limit, kind=args.kind_filter,
                                       min_similarity=args.min_similarity, embed_missing=True)
        status = store.embedding_status(args.user)
        if status["stale"] or status["missing"]:
            print(f"note: {status['stale'] + status['missing']} of {status['records']} records of {args.user} "
                  f"have no stored vector of {status['model']}: compared with vectors made for this search; "
                  "`memkit reindex --confirm` keeps them", file=sys.stderr)
        emit(hits)


def cmd_reindex(args: argparse.Namespace) -> None:
    """`memkit reindex --confirm`: make every missing or stale vector with the model (for a new model too)."""
    require_confirm(args, "reindex")
    embedder = load_embedder(args.model or DEFAULT_MODEL)
    with store_for(args, embedder=embedder) as store:
        done = store.reindex(user=args.user)
        emit(done, committed=f"{done['embedded']} vectors of {done['model']} written" if done["embedded"] else None)
