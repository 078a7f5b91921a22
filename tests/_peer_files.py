"""Other frameworks' memory files for the inspector's tests: the package's samples (see
`classroom.peer_samples` for how they follow each library's own schema)."""

from __future__ import annotations

from classroom.peer_samples import PEERS, make_peer_file

__all__ = ["PEERS", "make_peer_file"]
