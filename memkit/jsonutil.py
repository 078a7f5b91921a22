"""The one JSON form memkit measures, stores and sends: canonical JSON (a leaf: imports nothing of memkit).

Canonical here means: keys sorted, no spaces between tokens, non-ASCII text kept as is. Two equal
values always encode to the same text, so its length is a size anyone can recompute exactly.
"""

from __future__ import annotations

import json
from typing import Any

_CANONICAL = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
# One encoder for every call: json.dumps with options builds a new one each time, which costs as
# much as encoding a small message (the budget wrapper encodes many small ones).


def canonical_json(obj: Any) -> str:
    """The one JSON form memkit measures and sends: sorted keys, no spaces, UTF-8 text kept."""
    return _CANONICAL.encode(obj)


def json_chars(obj: Any) -> int:
    """The size of `obj` in code points of canonical JSON."""
    return len(canonical_json(obj))


def import_jsonschema() -> Any:
    """`import jsonschema`, without compiling the IRI grammar at import (seconds on a Jupyter install).

    jsonschema registers an "iri" format checker when the optional `rfc3987_syntax` package is
    installed (Jupyter's dependencies bring it), and importing that package compiles dozens of
    lark grammars: 1.8 s of every `memkit chat` on a 2-core machine. memkit's schemas use no
    format, yet every process that validated a tool call paid for it. Here jsonschema is imported
    with a stand-in for that package whose `is_valid_syntax` imports the real one on its first
    call, so the checker is still registered and behaves the same; only the cost moves to the first
    IRI ever checked, which memkit never asks for. Later imports of `rfc3987_syntax` get the real
    package. Nothing changes if jsonschema was imported already.

    Raises:
        ImportError: jsonschema is not installed.
    """
    import sys

    if "jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules:
        import jsonschema

        return jsonschema
    import importlib.util
    import types

    if importlib.util.find_spec("rfc3987_syntax") is None:  # not installed: nothing to defer
        import jsonschema

        return jsonschema

    def is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
        import rfc3987_syntax  # type: ignore[import-untyped]  # the real package, on the first IRI checked

        return rfc3987_syntax.is_valid_syntax(*args, **kwargs)

    stand_in = types.ModuleType("rfc3987_syntax", "memkit's deferred stand-in (see memkit.jsonutil.import_jsonschema)")
    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules["rfc3987_syntax"] = stand_in
    try:
        import jsonschema
    finally:
        if sys.modules.get("rfc3987_syntax") is stand_in:
            del sys.modules["rfc3987_syntax"]
    return jsonschema
