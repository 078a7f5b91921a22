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

