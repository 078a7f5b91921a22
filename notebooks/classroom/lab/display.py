"""Showing an experiment's results in a notebook: messages without machine paths, short values."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .workers import PathLike


def scrub(message: str, *paths: PathLike) -> str:
    """Remove the folders of `paths` from a message, leaving bare file names.

    Error messages name the file they are about; in a notebook the folder is a temporary one that
    differs on every run and on every machine, so only the file name is worth showing.
    """
    for path in paths:
        folder = str(Path(path).absolute().parent)
        message = message.replace(folder + os.sep, "").replace(folder, "<workspace>")
    return message


def shorten(value: Any, width: int = 24) -> Any:
    """A display form of a value: long strings cut with their length, control characters escaped."""
    if not isinstance(value, str):
        return value
    shown = value if len(value) <= width else f"{value[:width - 8]}… ({len(value)} chars)"
    return shown.encode("unicode_escape").decode("ascii") if any(ord(c) < 32 for c in shown) else shown
