"""Imports run one way: from the leaves up to the command line, the notebooks and the lab.

The layer order is declared once, here. A module may import from its own layer (its own package
included) and from the layers below it, never from a layer above; every module of the package must
be declared, so a new module gets a place in the order before it can be imported anywhere.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memkit

LAYERS: list[set[str]] = [
    {"errors", "limits", "clock", "jsonutil"},   # leaves: import nothing else of memkit
    {"servers"},                                 # processes, sockets, folders: no memory model
    {"codec", "transcript", "semantic"},
    {"store"},
    {"window"},
    {"retrieval", "request", "forgetting"},
    {"budget", "approvals", "tokens"},
    {"tools", "models"},
    {"agent"},
    {"integrations"},
    {"cli", "demo", "notebook", "lab"},
]
PACKAGE = Path(memkit.__file__).parent
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}


def concept(module: str) -> str:
    """`memkit.store.db` -> `store`: the top-level module or package a module belongs to."""
    return module.split(".")[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("memkit", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def imports_in(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """(line, imported memkit module) for every import in `source`, lazy ones inside functions too."""
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("memkit.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target == "memkit":  # `from . import codec` names modules
                found += [(node.lineno, f"memkit.{a.name}") for a in node.names]
            elif target.startswith("memkit."):
                found.append((node.lineno, target))
    return found


def modules() -> list[Path]:
    """Every module of the package but its own `__init__`/`__main__` (the public API imports all)."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.parent != PACKAGE or p.stem not in ("__init__", "__main__")]


def test_every_module_has_a_declared_layer():
    undeclared = {concept(module_name(p)) for p in modules()} - set(LEVEL)
    assert not undeclared, f"declare these modules in LAYERS: {sorted(undeclared)}"


def upward_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    own = concept(module)
    return [f"{module}:{line} ({own}) imports {target}" for line, target in imports_in(source, module, is_package)
            if LEVEL.get(concept(target), -1) > LEVEL[own]]


def test_no_module_imports_from_a_layer_above_it():
    upward = [line for path in modules()
              for line in upward_imports(path.read_text(encoding="utf-8"), module_name(path), path.stem == "__init__")]
    assert not upward, "imports that point upward:\n" + "\n".join(upward)


def test_the_check_catches_upward_imports_of_every_form():
    assert upward_imports("from ..agent import MemoryAgent\n", "memkit.store.db")
    assert upward_imports("def f():\n    from memkit.window import RedisWindow\n", "memkit.store.db")
    assert upward_imports("from . import cli\n", "memkit.codec")
    assert not upward_imports("from .schema import MIGRATIONS\nfrom ..errors import StoreError\n", "memkit.store.db")
