"""A notebook's own temporary folder, and fresh names for experiments that must not collide.

Each run of a notebook makes a new `Workspace`, so Run All twice starts from scratch twice. The
folder is removed when the kernel exits, not in a last cell: a widget the student is still using
(and a cell run again after Run All) keeps its files.
"""

from __future__ import annotations

import atexit
import itertools
import shutil
import tempfile
from pathlib import Path


class Workspace:
    """A temporary folder for one run of a notebook, removed when the Python process exits.

    Args:
        name: names the folder (`memkit-<name>-...` in the system's temporary directory).

    Example:
        >>> workspace = Workspace("02")
        >>> workspace.fresh("race"), workspace.fresh("race"), workspace.fresh("other")
        ('race-1', 'race-2', 'other-1')
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = Path(tempfile.mkdtemp(prefix=f"memkit-{name}-"))
        self._numbers: dict[str, itertools.count[int]] = {}
        atexit.register(shutil.rmtree, self.path, True)  # ignore_errors: a file may be gone already

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def fresh(self, stem: str) -> str:
        """A name not handed out before in this workspace: `stem-1`, `stem-2`, ...

        An experiment cell that takes its file, user or session name from here gives the same
        result however often it runs: each run starts from nothing.
        """
        number = next(self._numbers.setdefault(stem, itertools.count(1)))
        return f"{stem}-{number}"

    def __repr__(self) -> str:
        # No path: it differs on every run and every machine.
        return f"Workspace({self.name!r})"
