"""Tables of refusals: several writes tried and each outcome reported, a file opened and its bytes
compared before and after.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any
from collections.abc import Iterable

from memkit.errors import MemkitError, StoreError
from memkit.store import MemoryStore, Store
from .display import scrub, shorten
from .workers import PathLike


def sha256_file(path: PathLike) -> str:
    """The SHA-256 of a file's bytes, as hex: equal before and after means the file is untouched."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def attempt_puts(store: Store, attempts: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Try several `store.put` calls and report each outcome instead of raising.

    Args:
        store: the store to write to.
        attempts: dicts with `user`, `kind`, `key`, `value` and optionally `session` (default "s1")
            and `label` (a short description for the table).

    Returns:
        One row per attempt: the inputs (long values shortened for display), `outcome` ("saved",
        "unchanged" or the error class name), `revision` (or None) and `message` ("" on success).
        Only memkit's own errors are caught; anything else is a bug and propagates.
    """
    rows = []
    for attempt in attempts:
        value: Any = attempt.get("value")
        row: dict[str, Any] = {}
        if "label" in attempt:
            row["attempt"] = attempt["label"]
        row.update({
            "user": attempt.get("user"), "kind": attempt.get("kind"), "key": shorten(attempt.get("key")),
            "value": shorten(value),
        })
        before = store.get(attempt["user"], attempt["kind"], attempt["key"]) if _valid_target(store, attempt) else None
        try:
            record = store.put(attempt["user"], attempt.get("session", "s1"), attempt["kind"], attempt["key"], value)
        except MemkitError as exc:
            row.update(outcome=type(exc).__name__, revision=None, message=scrub(str(exc), store.location))
        else:
            unchanged = before is not None and before["revision"] == record["revision"]
            row.update(outcome="unchanged" if unchanged else "saved", revision=record["revision"], message="")
        rows.append(row)
    return rows


def _valid_target(store: Store, attempt: dict[str, Any]) -> bool:
    try:
        store.limits.check_id("user", attempt["user"])
        store.limits.check_kind(attempt["kind"])
        store.limits.check_key(attempt["key"])
    except MemkitError:
        return False
    return True


def try_open(path: PathLike) -> dict[str, Any]:
    """Open `path` as a `MemoryStore`, close it again, and report whether the file was changed.

    Returns:
        `file`, `opened` (bool), `error` (the StoreError message, folder removed, or ""),
        `sha256_before`, `sha256_after` (None when the file did not exist) and `unchanged` (bool).
    """
    path = Path(path)
    before = sha256_file(path) if path.is_file() else None
    error = ""
    try:
        MemoryStore(path).close()
    except StoreError as exc:
        error = scrub(str(exc), path)
    after = sha256_file(path) if path.is_file() else None
    return {"file": path.name, "opened": not error, "error": error,
            "sha256_before": before, "sha256_after": after, "unchanged": before == after}
