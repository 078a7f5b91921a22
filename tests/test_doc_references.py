"""Every dotted `memkit.` name the package's docstrings and the README mention still exists.

A restructuring moves modules and functions; a docstring that still sends the reader to the old
name is a dead end. Each name must import as a module, or be an attribute reached from one.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"\bmemkit(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def _resolves(name: str) -> bool:
    parts = name.split(".")
    if "__main__" in parts:  # importing it would run the program; its package must exist
        parts = parts[:parts.index("__main__")]
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as exc:
            if exc.name is not None and ".".join(parts[:i]).startswith(exc.name):
                continue  # this prefix is not a module: try a shorter one and read attributes
            return True  # an optional extra is missing: the module exists
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_memkit_name_in_the_docstrings_and_the_readme_exists():
    files = [*sorted((ROOT / "memkit").rglob("*.py")), ROOT / "README.md"]
    missing = sorted({
        f"{path.relative_to(ROOT)}:{number}: {name}"
        for path in files
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for name in NAME.findall(line)
        if not _resolves(name.rstrip("."))
    })
    assert not missing, "names that no longer exist (rename them to where the code went):\n" + "\n".join(missing)
