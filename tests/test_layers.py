"""Imports run one way: from the leaves up through the teaching core to the wings, with no circle.

The order is declared once, here. A module may import from its own layer (its own package
included) and from the layers below it, never from a layer above; every module of the package must
be declared, so a new module gets a place before it can be imported anywhere. The core (everything
but the wings) never imports a wing, with one declared exception: `open_store` reaches PostgreSQL
for a `postgresql://` URL only. Imports under `if TYPE_CHECKING:` count as well: a circle a type
checker needs is still a circle a reader has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import memkit

CORE: list[set[str]] = [
    {"errors", "limits", "limit_ranges", "clock", "jsonutil", "validators", "visible"},  # leaves: import nothing else
    {"servers"},                                 # processes, sockets, folders: no memory model
    {"codec", "transcript", "semantic", "remembering"},
    {"store"},
    {"window"},
    {"retrieval", "request", "forgetting", "consolidation"},
    {"budget", "approvals", "tokens"},
    {"tools", "models"},
    {"agent"},
]
WINGS: list[set[str]] = [  # a reader of the core can skip every one of them
    {"store.postgres"},
    {"inspector", "integrations"},
    {"cli"},
]
LAYERS = CORE + WINGS
ALLOWED_INTO_WINGS = {("memkit.store.opening", "memkit.store.postgres.store")}
"""The core's one way into a wing: `open_store(url)` imports PostgresStore inside the function."""

PACKAGE = Path(memkit.__file__).parent
LEVEL = {name: level for level, names in enumerate(LAYERS) for name in names}
WING_NAMES = set().union(*WINGS)


def concept(module: str) -> str:
    """`memkit.store.db` -> `store`, `memkit.store.postgres.pool` -> `store.postgres`."""
    parts = module.split(".")
    return "store.postgres" if parts[1:3] == ["store", "postgres"] else parts[1]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(("memkit", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def known_modules() -> set[str]:
    return {module_name(p) for p in PACKAGE.rglob("*.py")}


def imports_in(source: str, module: str, is_package: bool = False,
               known: set[str] | frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, imported memkit module) for every import in `source`: lazy ones inside functions and
    those under `if TYPE_CHECKING:` too. `from . import x` names the module `x` when it is one."""
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
            if not target.startswith("memkit"):
                continue
            for alias in node.names:
                named = f"{target}.{alias.name}"
                found.append((node.lineno, named if named in known or target == "memkit" else target))
    return [(line, target) for line, target in found if target != "memkit"]


def modules() -> list[Path]:
    """Every module of the package but its own `__init__`/`__main__` (the public API and `python -m
    memkit` sit above every layer: `__getattr__` gives PostgresStore lazily, `__main__` runs the CLI)."""
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.parent != PACKAGE or p.stem not in ("__init__", "__main__")]


def test_every_module_has_a_declared_layer():
    undeclared = {concept(module_name(p)) for p in modules()} - set(LEVEL)
    assert not undeclared, f"declare these modules in LAYERS: {sorted(undeclared)}"


def upward_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    own = concept(module)
    return [f"{module}:{line} ({own}) imports {target}" for line, target in imports_in(source, module, is_package)
            if LEVEL.get(concept(target), -1) > LEVEL[own] and (module, target) not in ALLOWED_INTO_WINGS]


def test_no_module_imports_from_a_layer_above_it():
    upward = [line for path in modules()
              for line in upward_imports(path.read_text(encoding="utf-8"), module_name(path), path.stem == "__init__")]
    assert not upward, "imports that point upward:\n" + "\n".join(upward)


def test_the_core_imports_no_wing():
    into_wings = [f"{module_name(p)}:{line} imports {target}" for p in modules()
                  if concept(module_name(p)) not in WING_NAMES
                  for line, target in imports_in(p.read_text(encoding="utf-8"), module_name(p), p.stem == "__init__")
                  if concept(target) in WING_NAMES and (module_name(p), target) not in ALLOWED_INTO_WINGS]
    assert not into_wings, "the core imports a wing:\n" + "\n".join(into_wings)


def test_the_check_catches_upward_imports_of_every_form():
    assert upward_imports("from ..agent import MemoryAgent\n", "memkit.store.db")
    assert upward_imports("def f():\n    from memkit.window import RedisWindow\n", "memkit.store.db")
    assert upward_imports("from . import cli\n", "memkit.codec")
    assert upward_imports("if TYPE_CHECKING:\n    from .postgres.store import PostgresStore\n", "memkit.store.health")
    assert not upward_imports("from .schema import MIGRATIONS\nfrom ..errors import StoreError\n", "memkit.store.db")
    assert not upward_imports("def f(url):\n    from .postgres.store import PostgresStore\n", "memkit.store.opening")


def import_graph() -> dict[str, set[str]]:
    """module -> the memkit modules it imports (a package's `__init__` only when named itself)."""
    known = known_modules()
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        name = module_name(path)
        targets = {t for _, t in imports_in(path.read_text(encoding="utf-8"), name, path.stem == "__init__", known)}
        graph[name] = {t for t in targets if t in known and t != name and not name.startswith(t + ".")}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_check_finds_a_circle_through_a_type_checking_import():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    known = {"memkit.store.store", "memkit.store.proposals"}
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .store import Store\n"
    assert imports_in(source, "memkit.store.proposals", known=known) == [(3, "memkit.store.store")]
