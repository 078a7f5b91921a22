"""JSON-Schema validation without the wait, kept out of `tools.py` so that file reads as the lesson.

Two costs a person waited for (bench/RESULTS.md) are paid here once: importing jsonschema compiled
an optional IRI grammar (1.8 s of every `memkit chat`), and every Confirm of the inspector compiled
the four tool validators again (issue 20). Nothing here changes what is valid.
"""

from __future__ import annotations

import functools
import json
from typing import Any


def validator(schema: dict[str, Any]) -> Any:
    """The jsonschema validator of `schema`: compiled at its first use, then shared by the process.

    Every `MemoryTools` with the same limits (each user's, the inspector's after a reopen) gets the
    very same validator; a store with other limits has other schemas, so validators of its own.
    """
    return _compiled(json.dumps(schema, sort_keys=True))


@functools.lru_cache(maxsize=64)  # a process sees a few sets of limits, not thousands
def _compiled(schema_json: str) -> Any:
    return import_jsonschema().Draft202012Validator(json.loads(schema_json))


def first_error(validator: Any, instance: Any) -> Any | None:
    """The error jsonschema finds most relevant (`best_match`) in `instance`, or None when it is valid."""
    return import_jsonschema().exceptions.best_match(validator.iter_errors(instance))


def import_jsonschema() -> Any:
    """`import jsonschema`, without compiling the IRI grammar at import (seconds on a Jupyter install).

    jsonschema registers an "iri" format checker when the optional `rfc3987_syntax` package is
    installed (Jupyter's dependencies bring it), and importing that package compiles dozens of lark
    grammars. memkit's schemas use no format, so jsonschema is imported beside a stand-in for that
    package whose `is_valid_syntax` imports the real one on its first call: the checker is still
    registered and behaves the same. Later imports of `rfc3987_syntax` get the real package.

    Raises:
        ImportError: jsonschema is not installed.
    """
    import importlib.util
    import sys
    import types

    if ("jsonschema" in sys.modules or "rfc3987_syntax" in sys.modules
            or importlib.util.find_spec("rfc3987_syntax") is None):  # nothing to defer
        import jsonschema

        return jsonschema

    def is_valid_syntax(*args: Any, **kwargs: Any) -> Any:
        import rfc3987_syntax  # type: ignore[import-untyped]  # the real package, on the first IRI checked

        return rfc3987_syntax.is_valid_syntax(*args, **kwargs)

    stand_in = types.ModuleType("rfc3987_syntax", "memkit's deferred stand-in (see memkit.validators)")
    stand_in.is_valid_syntax = is_valid_syntax  # type: ignore[attr-defined]
    sys.modules["rfc3987_syntax"] = stand_in
    try:
        import jsonschema
    finally:
        if sys.modules.get("rfc3987_syntax") is stand_in:
            del sys.modules["rfc3987_syntax"]
    return jsonschema
