"""The JSON codec of structured turn content: plain JSON plus a few tagged Python types.

A tool turn may carry a price, a date or a set of tags; JSON has no type for those, so `dumps`
writes each as a one-key object with a `$` tag (`{"$decimal":"9.99"}`) and `loads` reads it back as
the same type. What cannot come back as it was (NaN, a non-string key) is refused, never changed.
The output is canonical, so equal values give equal text. The table of tags and why decoding has a
fast path: docs/design/codec.md.

Example:
    >>> from decimal import Decimal
    >>> text = dumps({"price": Decimal("9.99"), "tags": {"tea", "green"}})
    >>> text
    '{"price":{"$decimal":"9.99"},"tags":{"$set":["green","tea"]}}'
    >>> loads(text) == {"price": Decimal("9.99"), "tags": {"tea", "green"}}
    True
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from decimal import Decimal
from typing import Any
from collections.abc import Sequence

from .jsonutil import canonical_json
from .errors import ValidationError

TAGS = ("$datetime", "$decimal", "$bytes", "$set", "$object")
"""The tag keys the codec writes; a user dict with one of them as its only key is escaped."""


def dumps(value: Any) -> str:
    """Encode `value` as canonical JSON text, tagging datetime, Decimal, bytes and sets.

    Raises:
        ValidationError: the value holds something the codec cannot bring back as it was
            (NaN, an infinity, a non-string dict key, an unknown type).
    """
    # _to_json has already refused NaN and infinities, so the shared canonical encoder is enough.
    return canonical_json(_to_json(value, "value"))


def loads(text: str | bytes) -> Any:
    """Decode text written by `dumps` back into Python values (tags become their types again).

    Raises:
        ValidationError: the text is not JSON, or a tag holds a malformed value.
    """
    try:
        if _untagged(text):
            return json.loads(text)  # no key can be a tag, so the hook would change nothing
        return json.loads(text, object_hook=_from_json)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"not JSON text: {exc.msg} at position {exc.pos}") from None


def loads_many(texts: Sequence[str | bytes]) -> list[Any]:
    """`[loads(text) for text in texts]`, decoded as one JSON array when no text can hold a tag.

    For texts `dumps` wrote (a window's turns); decode text from elsewhere with `loads`. Why it is
    exact for those and what it cannot detect: docs/design/codec.md.

    Raises:
        ValidationError: as `loads`, for the first text that is not JSON or holds a malformed tag.
    """
    if len(texts) > 1:
        if all(isinstance(text, bytes) for text in texts):
            joined: str | bytes = b"[" + b",".join(texts) + b"]"  # type: ignore[arg-type]
        elif all(isinstance(text, str) for text in texts):
            joined = "[" + ",".join(texts) + "]"  # type: ignore[arg-type]
        else:
            joined = ""
        if joined and _untagged(joined):
            try:
                values = json.loads(joined)
            except json.JSONDecodeError:
                values = None
            if isinstance(values, list) and len(values) == len(texts):
                return values
    return [loads(text) for text in texts]


def _untagged(text: str | bytes) -> bool:
    """True when no key of `text` can be a tag (no '$', no escape that could spell one): then plain
    decoding gives what the tag hook gives, at under half the cost."""
    if isinstance(text, str):
        return "$" not in text and "\\u" not in text
    return b"$" not in text and b"\\u" not in text


def _to_json(value: Any, where: str) -> Any:
    # bool before int (bool is an int); datetime before date (datetime is a date).
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValidationError(f"{where} is {value!r}; JSON has no NaN or infinity")
        return value
    if isinstance(value, _dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValidationError(f"{where} is Decimal({str(value)!r}); only finite decimals are encoded")
        return {"$decimal": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        items = [_to_json(item, f"{where} item") for item in value]
        return {"$set": sorted(items, key=lambda item: json.dumps(item, sort_keys=True, ensure_ascii=False))}
    if isinstance(value, (list, tuple)):
        return [_to_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{where} has a {type(key).__name__} key {key!r}; JSON keys are strings")
            out[key] = _to_json(item, f"{where}[{key!r}]")
        if len(out) == 1 and next(iter(out)) in TAGS:
            # Escaped as a list of one [key, value] pair, so the decoder never mistakes it for a tag.
            return {"$object": [[key, item] for key, item in out.items()]}
        return out
    raise ValidationError(
        f"{where} is a {type(value).__name__}; the codec encodes JSON types, datetime, Decimal, bytes and sets"
    )


def _from_json(obj: dict[str, Any]) -> Any:
    if len(obj) != 1:
        return obj
    (tag, inner), = obj.items()
    try:
        if tag == "$datetime":
            return _dt.datetime.fromisoformat(inner)
        if tag == "$decimal":
            return Decimal(inner)
        if tag == "$bytes":
            return base64.b64decode(inner.encode("ascii"), validate=True)
        if tag == "$set":
            return {tuple(item) if isinstance(item, list) else item for item in inner}
        if tag == "$object":
            return {key: item for key, item in inner}
    except (ValueError, TypeError, ArithmeticError, AttributeError) as exc:
        raise ValidationError(f"malformed {tag} value {inner!r}: {exc}") from None
    return obj
