"""A window place's text, read back: `read_place` is what forgetting and `describe` both read it with."""

from __future__ import annotations

import json

import pytest

from memkit.errors import WindowError
from memkit.window.places import REDIS, WORKSPACE, Place, describe, read_place, url_place


def test_a_place_memkit_writes_reads_back_as_written(tmp_path):
    folder = tmp_path / "memory.sqlite3-window"
    older = json.dumps({"folder": str(folder.resolve()), "kind": "workspace", "prefix": "memkit"})  # an older memkit's
    assert read_place(older) == Place(WORKSPACE, "memkit", folder=str(folder.resolve()))
    assert read_place(url_place("redis://:secret@Host:6380/2", prefix="class")) == Place(
        REDIS, "class", url="redis://host:6380/2")
    assert describe(url_place("redis://:secret@Host:6380/2", prefix="class")) == (
        "Redis at redis://host:6380/2 (key prefix 'class')")
    assert describe(older) == f"the workspace window in {folder.resolve()}"


def test_a_place_of_a_kind_this_memkit_does_not_know_keeps_its_kind_and_describes_as_unknown():
    place = json.dumps({"kind": "memcached", "prefix": "memkit"})
    assert read_place(place) == Place("memcached", "memkit")
    assert read_place("{}").kind == "unknown"
    assert describe(place) == f"an unknown window place {place!r}"


@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"kind": "workspace"}', '{"kind": "redis", "url": 6379}'])
def test_a_text_memkit_did_not_write_is_refused_with_a_window_error_and_described_as_unknown(text):
    with pytest.raises(WindowError, match="did not write it"):
        read_place(text)
    assert describe(text) == f"an unknown window place {text!r}"
