"""The export bundle: one user's records, event history and session items as JSON Lines, sealed
with a SHA-256.

A header line, one line per record, per event and per openai-agents session item, and a checksum
line. Each kind of line has a JSON Schema (`LINE_SCHEMAS`); the importing store's limits are checked
after it, so an imported entry meets the same rules as a live write. Every refusal names the line,
the field and what was wrong. A bundle without session items is format version 1, as before them
(an older memkit imports it); one with items is version 2, which an older memkit refuses by name.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any
from collections.abc import Callable, Iterable

from ..errors import StoreError, ValidationError
from ..validators import import_jsonschema
from ..visible import visible_json
from ..limits import Limits, check_text
from .agent_items import trim_agent_items
from .files import write_private
from .schema import SCHEMA_VERSION
from .statements import RECORD_SQL, prune_history, to_record

if TYPE_CHECKING:
    from .backend import Backend

EXPORT_FORMAT = "memkit-export"
EXPORT_FORMAT_VERSION = 2
"""The newest format: version 2 adds session items (`item` lines, the header's `items`)."""

_TEXT = {"type": "string", "x-message": "bundle field {name!r} is a {type}, not text"}
_TEXT_OR_NULL = {"type": ["string", "null"], "x-message": "bundle field {name!r} is a {type}, not text"}
_TIME = {"type": "string", "minLength": 1, "maxLength": 64,
         "x-message": "bundle field {name!r} is {value!r}; expected a timestamp"}
# At most 2**63 - 1: SQLite's INTEGER; a larger one would fail half-way through the import.
_REVISION = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1,
             "x-message": "bundle entry revision {value!r} is not a positive 64-bit integer"}
_POSITION = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1,
             "x-message": "bundle item position {value!r} is not a positive 64-bit integer"}
_ENTRY_MESSAGE = "bundle entry has fields {fields}; expected {expected}"


def _entry(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False, "x-message": _ENTRY_MESSAGE}


LINE_SCHEMAS: dict[str, dict[str, Any]] = {
    "header": {
        "type": "object",
        "required": ["format", "format_version", "schema_version", "user", "records", "events"],
        "x-message": "bundle does not start with a memkit export header", "x-missing": "field",
        "properties": {
            "format": {"const": EXPORT_FORMAT, "x-message": "bundle does not start with a memkit export header"},
            "format_version": {"enum": [1, EXPORT_FORMAT_VERSION], "x-message":
                               "bundle format version {value!r} is not 1 or " + str(EXPORT_FORMAT_VERSION)
                               + "; use the memkit that made it"},
            # Record and event lines have had the same fields since version 1: any older bundle imports.
            "schema_version": {"type": "integer", "minimum": 1, "maximum": SCHEMA_VERSION, "x-message":
                               "bundle was made with schema version {value!r}; this memkit imports versions 1 to "
                               + str(SCHEMA_VERSION)},
            "user": _TEXT,
            "records": {"type": "integer", "minimum": 0, "x-message": "bundle line counts do not match its header"},
            "events": {"type": "integer", "minimum": 0, "x-message": "bundle line counts do not match its header"},
            "items": {"type": "integer", "minimum": 0, "x-message": "bundle line counts do not match its header"},
        },
    },
    "record": _entry({
        "type": {"const": "record", "x-message": _ENTRY_MESSAGE}, "kind": _TEXT, "key": _TEXT, "value": _TEXT,
        "source_session": _TEXT, "revision": _REVISION, "created_at": _TIME, "updated_at": _TIME,
    }),
    "event": _entry({
        "type": {"const": "event", "x-message": _ENTRY_MESSAGE}, "kind": _TEXT, "key": _TEXT,
        "action": {"enum": ["create", "update", "delete"], "x-message": "bundle event action {value!r} is unknown"},
        "revision": _REVISION, "session": _TEXT_OR_NULL, "old_value": _TEXT_OR_NULL, "new_value": _TEXT_OR_NULL,
        "confirmation": _TEXT_OR_NULL, "at": _TIME,
    }),
    "item": _entry({
        "type": {"const": "item", "x-message": _ENTRY_MESSAGE}, "session": _TEXT, "position": _POSITION,
        "item": _TEXT, "at": _TIME,
    }),
    "checksum": {
        "type": "object", "required": ["type", "sha256"],
        "x-message": "bundle has no checksum line at its end; it may be truncated", "x-missing": "field",
        "properties": {"type": {"const": "checksum", "x-message":
                                "bundle has no checksum line at its end; it may be truncated"},
                       "sha256": {"type": "string", "x-message":
                                  "bundle checksum does not match its content; it was changed or damaged"}},
    },
}
"""The JSON Schema (draft 2020-12) of each kind of bundle line. `x-message` (ignored by validators)
is the refusal shown when that part fails, with `{name}`, `{value}`, `{type}`, `{fields}` and
`{expected}` filled in; `x-missing` says whether a missing field reports as the field or the line."""


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def seal_bundle(lines: Iterable[dict[str, Any]]) -> str:
    """Export bundle text: one JSON line per item (sorted keys, UTF-8 kept), then their SHA-256.

    Hidden characters are `\\u` escapes (`visible_json`), so a bundle shown in a terminal (`memkit
    export` prints it) hides nothing and breaks no line; it parses to the same data. `export_user`
    writes bundles with it, and `import_records` checks the same checksum. The checksum finds damage,
    not forgery: anyone can seal an edited bundle again.
    """
    body = "".join(visible_json(json.dumps(line, ensure_ascii=False, sort_keys=True)) + "\n" for line in lines)
    return body + json.dumps({"type": "checksum", "sha256": _digest(body)}) + "\n"


@functools.cache
def _validators() -> dict[str, Any]:
    jsonschema = import_jsonschema()  # slow to import: only when a bundle is read

    base = jsonschema.Draft202012Validator
    # JSON Schema counts 2.0 as an integer; a revision or a count must be a real int, and never a bool.
    strict = base.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool))
    validator = jsonschema.validators.extend(base, type_checker=strict)
    return {name: validator(schema) for name, schema in LINE_SCHEMAS.items()}


def _check_line(kind: str, item: Any) -> None:
    """Validate one line against its schema; refuse with the message of the first part that fails.

    Parts are taken in the schema's order, the line as a whole (its type, missing or extra fields)
    first. A missing field reports the schema's `x-missing-message`, or else that field's own message.
    """
    errors = list(_validators()[kind].iter_errors(item))
    if not errors:
        return
    schema = LINE_SCHEMAS[kind]
    order = list(schema["properties"])

    def part(error: Any) -> tuple[int, str | None]:
        if error.path and error.path[0] in order:
            return order.index(error.path[0]), str(error.path[0])
        if error.validator == "required" and schema.get("x-missing") == "field":
            name = next(name for name in order if name not in item)
            return order.index(name), name
        return -1, None

    _, name = min((part(error) for error in errors), key=lambda found: found[0])
    template = schema["x-message"] if name is None else schema["properties"][name]["x-message"]
    value = item.get(name) if name is not None else item
    raise ValidationError(template.format(
        name=name, value=value, kind=kind, type=type(value).__name__,
        fields=sorted(item) if isinstance(item, dict) else item, expected=sorted(order),
    ))


def parse_bundle(text: str, limits: Limits) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]],
                                                     list[dict[str, Any]]]:
    """Check a whole bundle before anything is written; return its header, records, events and items.

    Raises:
        ValidationError: it is truncated, not JSON, its checksum or a version is wrong, a line breaks
            its schema, or an entry breaks one of `limits`.
    """
    # Split on "\n" only: JSON escapes it inside strings, but not U+2028, U+0085 and the other
    # characters str.splitlines() also breaks at, which a value may hold.
    if not text.endswith("\n"):
        raise ValidationError("bundle does not end with a newline; it may be truncated")
    lines = text[:-1].split("\n")
    if len(lines) < 2:
        raise ValidationError("bundle is empty or has no checksum line")
    parsed = []
    for number, line in enumerate(lines, start=1):
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValidationError(f"bundle line {number} is not JSON ({exc.msg}); it may be truncated") from None
        except (ValueError, RecursionError) as exc:
            # JSON that Python will not decode: a number of over 4300 digits, or very deep nesting.
            raise ValidationError(f"bundle line {number} cannot be decoded: {str(exc)[:120]}") from None
    _check_line("checksum", parsed[-1])
    if parsed[-1]["sha256"] != _digest("".join(line + "\n" for line in lines[:-1])):
        raise ValidationError("bundle checksum does not match its content; it was changed or damaged")
    header = parsed[0]
    _check_line("header", header)
    limits.check_id("bundle user", header["user"])
    entries = parsed[1:-1]
    records = [item for item in entries if isinstance(item, dict) and item.get("type") == "record"]
    events = [item for item in entries if isinstance(item, dict) and item.get("type") == "event"]
    # Version 1 had no items: its header has no count of them, and an item line there is a stray line.
    items = [item for item in entries if isinstance(item, dict) and item.get("type") == "item"
             and header["format_version"] > 1]
    counted = (len(records), len(events), len(items))
    if sum(counted) != len(entries) or (header["records"], header["events"], header.get("items", 0)) != counted:
        raise ValidationError("bundle line counts do not match its header")
    seen: set[tuple[str, str]] = set()
    for item in records:
        _check_line("record", item)
        limits.check_kind(item["kind"])
        limits.check_key(item["key"])
        limits.check_value(item["value"])
        limits.check_id("source_session", item["source_session"])
        check_text("created_at", item["created_at"])
        check_text("updated_at", item["updated_at"])
        if (item["kind"], item["key"]) in seen:
            raise ValidationError(f"bundle holds {item['kind']} {item['key']!r} twice")
        seen.add((item["kind"], item["key"]))
    for item in events:
        _check_line("event", item)
        # Events go into the history as they are, so they meet the same rules as live writes.
        limits.check_kind(item["kind"])
        limits.check_key(item["key"])
        if item["session"] is not None:
            limits.check_id("event session", item["session"])
        for name in ("old_value", "new_value"):
            if item[name] is not None:
                limits.check_value(item[name])
        if item["confirmation"] is not None:
            limits.check_confirmation(item["confirmation"])
        check_text("at", item["at"])
    _check_items(items, limits)
    return header, records, events, items


def _check_items(items: list[dict[str, Any]], limits: Limits) -> None:
    """Session item lines: each a session's item as its JSON text, numbered once per session."""
    seen: set[tuple[str, int]] = set()
    for item in items:
        _check_line("item", item)
        limits.check_id("item session", item["session"])
        check_text(f"item {item['position']} of session {item['session']!r}", item["item"])
        try:  # an openai-agents session reads every item back as JSON (MemkitSession.get_items)
            json.loads(item["item"])
        except (ValueError, RecursionError):
            raise ValidationError(f"bundle item {item['position']} of session {item['session']!r} is not JSON "
                                  "text") from None
        check_text("at", item["at"])
        if (item["session"], item["position"]) in seen:
            raise ValidationError(f"bundle holds item {item['position']} of session {item['session']!r} twice")
        seen.add((item["session"], item["position"]))


def export_user(db: Backend, user: str, path: str | os.PathLike[str] | None) -> str:
    """The bundle of `user` (already checked), read in one snapshot; also written to `path` when given.
    Version 1 when the user has no session items (the bundle an older memkit made and reads), else 2."""
    with db.reading() as conn:
        records = conn.execute(
            f"SELECT {RECORD_SQL} FROM memories WHERE user_id = ? ORDER BY kind, memory_key", (user,)
        ).fetchall()
        events = conn.execute(
            "SELECT kind, memory_key, action, revision, session_id, old_value, new_value, confirmation, at"
            " FROM memory_events WHERE user_id = ? ORDER BY id",
            (user,),
        ).fetchall()
        items = conn.execute("SELECT session_id, position, item, at FROM agent_items WHERE user_id = ?"
                             " ORDER BY session_id, position", (user,)).fetchall()
    header = {"format": EXPORT_FORMAT, "format_version": 1, "schema_version": SCHEMA_VERSION, "user": user,
              "records": len(records), "events": len(events)}
    if items:
        header.update(format_version=EXPORT_FORMAT_VERSION, items=len(items))
    lines = [header]
    lines += [{"type": "record", **to_record(row)} for row in records]
    lines += [{"type": "event", "kind": e["kind"], "key": e["memory_key"], "action": e["action"],
               "revision": e["revision"], "session": e["session_id"], "old_value": e["old_value"],
               "new_value": e["new_value"], "confirmation": e["confirmation"], "at": e["at"]}
              for e in events]
    lines += [{"type": "item", "session": i[0], "position": i[1], "item": i[2], "at": i[3]} for i in items]
    text = seal_bundle(lines)
    if path is not None:
        # Bytes, not text mode: the checksum covers "\n" line ends, which text mode may translate.
        write_private(Path(path), text.encode("utf-8"))
    return text


def read_bundle(bundle: str | os.PathLike[str]) -> str:
    """The text of a bundle given as text or as a path to a bundle file."""
    if isinstance(bundle, os.PathLike):
        try:
            text: object = Path(bundle).read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValidationError(f"cannot read the bundle file {os.fspath(bundle)}: {exc}") from None
    else:
        text = bundle
    if not isinstance(text, str):
        raise ValidationError(f"bundle must be text or a path, not {type(text).__name__}")
    return text


def import_bundle(db: Backend, target: str, records: list[dict[str, Any]], events: list[dict[str, Any]],
                  items: list[dict[str, Any]], write_vectors: Callable[[Any], int] | None = None) -> dict[str, int]:
    """Insert a parsed bundle's records, events and session items under `target`, all or nothing, in
    one transaction. Returns the counts (`items` only when the bundle carries session items).

    `write_vectors`: called with the transaction's connection once the records are in (the store's
    embedder's vectors of them, `Store.import_records`); its count is returned as `vectors`.
    """
    with db.transaction() as conn:
        if _holds_data(conn, target, items=bool(items)):
            held = "memory or session items" if items else "memory"
            raise StoreError(
                f"user {target!r} already has {held} in this store; forget_user first, or import with another user id"
            )
        db.check_quotas(conn, target, adding=len(records))
        # Numbered from the sequence in the order they were last updated, so "newest first" holds
        # for imported records as it did where they were exported.
        first = db.take_sequence(conn, len(records)) - len(records) + 1
        ordered = sorted(records, key=lambda r: r["updated_at"])
        conn.executemany(
            db.statements.insert_memory,
            [(target, r["kind"], r["key"], r["value"], r["source_session"], r["revision"], r["created_at"],
              r["updated_at"], r["key"].casefold(), r["value"].casefold(), first + n) for n, r in enumerate(ordered)],
        )
        for e in events:  # each event's id is a number of the sequence (SQLite), taken in the bundle's order
            db.take_sequence(conn)
            conn.execute(db.statements.insert_event, (target, e["kind"], e["key"], e["action"], e["revision"],
                                                      e["session"], e["old_value"], e["new_value"],
                                                      e["confirmation"], e["at"]))
        conn.executemany("INSERT INTO agent_items (user_id, session_id, position, item, at) VALUES (?, ?, ?, ?, ?)",
                         [(target, i["session"], i["position"], i["item"], i["at"]) for i in items])
        # A bundle from a store with a larger limit arrives with its newest events.
        vectors = write_vectors(conn) if write_vectors is not None else None
        prune_history(conn, db.statements, target, db.limits.max_events_per_user)
        trim_agent_items(conn, target, db.limits.max_agent_item_chars_per_user)  # and its newest items
        db.check_size(conn)
    counts = {"records": len(records), "events": len(events), **({"items": len(items)} if items else {})}
    return counts if vectors is None else {**counts, "vectors": vectors}


def _holds_data(conn: Any, user: str, *, items: bool) -> bool:
    """Whether `user` has records or history here (or session items, when the bundle brings some)."""
    return bool(conn.execute(
        "SELECT (SELECT count(*) FROM memories WHERE user_id = ?) + (SELECT count(*) FROM memory_events"
        " WHERE user_id = ?) + (CASE WHEN ? THEN (SELECT count(*) FROM agent_items WHERE user_id = ?) ELSE 0 END)",
        (user, user, items, user)
    ).fetchone()[0])
