"""`Store.import_records` keeps the imported records findable by meaning, on every backend.

Only `memkit import` made vectors (a reindex after the import): an import through the API into a
store opened with an embedder left the records without one, and `search_by_meaning` did not find
them. The vectors are now made before the import's transaction and written inside it, with the
records: all or nothing. The model is the real one (wordllama, the `semantic` extra).
"""

from __future__ import annotations

import pytest

from _store_helpers import open_store
from memkit.semantic import load_embedder

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(scope="module")
def embedder():
    return load_embedder()


def test_records_imported_through_the_api_are_found_by_meaning(tmp_path, embedder):
    with open_store(tmp_path / "from.sqlite3") as plain:  # a store that keeps no vectors
        plain.put("alice", "s1", "preference", "drink", "espresso")
        plain.put("alice", "s1", "preference", "flight_seat", "window seat")
        bundle = plain.export_user("alice")
    with open_store(tmp_path / "to.sqlite3", embedder=embedder) as store:
        assert store.import_records(bundle, user="carol") == {"records": 2, "events": 2, "vectors": 2}
        assert store.embedding_status("carol")["current"] == 2
        assert [h["value"] for h in store.search_by_meaning("carol", "coffee", limit=1)] == ["espresso"]
    with open_store(tmp_path / "plain.sqlite3") as store:  # without an embedder: no vectors, none promised
        assert store.import_records(bundle) == {"records": 2, "events": 2}
