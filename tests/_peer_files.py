"""Other frameworks' memory files for the inspector's tests: the package's samples (see
`memkit.notebook.peer_samples` for how they follow each library's own schema)."""

from __future__ import annotations

from memkit.notebook.peer_samples import PEERS, make_peer_file

__all__ = ["PEERS", "make_peer_file"]
