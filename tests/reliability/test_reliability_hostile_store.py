"""The reliability lab: hostile input to every store method round-trips or is refused.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from _reliability import arguments, examples, hostile, ids, json_wrong_types, keys, kinds, repeated, texts, values
from _store_helpers import snapshot
from memkit.errors import QuotaError, StoreError, ValidationError
from memkit.limits import Limits
from memkit.store import MemoryStore, Store, seal_bundle
from memkit.store.archive import ArchiveConflictError


def round_trips(store: Store, name: str, args: tuple, result: Any) -> None:
    """What a call that was not refused must have done, checked by reading back."""
    if name == "put":
        user, _session, kind, key, value = args[:5]
        assert result["value"] == value and store.get(user, kind, key)["value"] == value
    elif name == "get":
        assert result is None or result["key"] == args[2]
    elif name == "delete":
        assert store.get(args[0], args[1], args[2]) is None
    elif name == "search":
        user, query = args[0], args[1].casefold()
        expected = [r for r in store.records(user) if query in r["key"].casefold() or query in r["value"].casefold()]
        assert len(result) == min(args[2], len(expected))
        assert all(r in expected for r in result)
    elif name == "archive_turns":
        kept = {t["turn"] for t in store.archived_turns(args[0], args[1])}
        assert all(t["turn"] in kept for t in args[2])


TURNS = st.lists(st.fixed_dictionaries({"turn": st.integers(1, 5),
                                        "role": st.sampled_from(["user", "assistant", "tool"]),
                                        "content": values, "at": st.just("2026-01-01T00:00:00Z")}), max_size=2)
STORE_CALLS = {
    "put": arguments(ids, ids, kinds, keys, values),
    "get": arguments(ids, kinds, keys),
    "delete": arguments(ids, kinds, keys),
    "search": arguments(ids, st.one_of(keys, values, st.just("")), st.integers(1, 50)),
    "records": arguments(ids),
    "history": arguments(ids, kinds, keys),
    "export_user": arguments(ids),
    "archive_turns": st.one_of(arguments(ids, ids, TURNS), st.tuples(ids, ids, st.lists(st.fixed_dictionaries(
        {"turn": hostile(st.integers(1, 5)), "role": hostile(st.sampled_from(["user", "assistant", "tool"])),
         "content": hostile(values), "at": hostile(st.just("2026-01-01T00:00:00Z"))}), min_size=1, max_size=2))),
    "archived_turns": arguments(ids, ids),
    "forget_user": arguments(st.sampled_from(["nobody", "ghost"])),
}
DOCUMENTED = (ValidationError, QuotaError)


def bundle_variants(bundle: str):
    """Exports bent in the ways an attacker could, each with a correct checksum (it is no MAC)."""
    lines = [json.loads(line) for line in bundle.splitlines()[:-1]]
    rebuild = seal_bundle

    def bend(field: str, value: Any, kind: str = "record") -> str:
        items = [dict(item, **{field: value}) if item.get("type") == kind else item for item in lines]
        return rebuild(items)

    return st.one_of(
        st.builds(bend, st.sampled_from(["revision", "value", "key", "kind", "created_at", "source_session"]),
                  st.one_of(json_wrong_types, texts, st.sampled_from([2**63, 2**64, -1, 0]))),
        st.builds(bend, st.sampled_from(["revision", "new_value", "action", "session", "confirmation", "at"]),
                  st.one_of(json_wrong_types, texts, st.sampled_from([2**63, 2**64, -1, 0])), st.just("event")),
        st.builds(lambda extra: rebuild([lines[0], *lines[1:], extra]),
                  st.dictionaries(st.text(max_size=5), texts, max_size=3)),
        st.builds(lambda depth: rebuild([lines[0]]).replace("\n", "\n" + repeated("[", depth) + "\n", 1),
              st.sampled_from([10, 5000, 100_000])),
        st.builds(lambda field, digits: bundle.replace(f'"{field}": ', f'"{field}": {digits}', 1),
                  st.sampled_from(["records", "revision"]),
                  st.builds(repeated, st.sampled_from(["9", "0"]), st.just(5000))),
        st.builds(lambda cut: bundle[:cut], st.integers(0, len(bundle))),
        texts,
    )


def test_hostile_input_to_every_store_method_round_trips_or_is_refused(tmp_path, figures):
    store = MemoryStore(tmp_path / "hostile.sqlite3", limits=Limits().replace(max_records_per_user=500))
    store.put("alice", "s1", "preference", "drink", "green tea")
    store.put("alice", "s1", "episode", "trip", "Kyoto in May ☕")
    bundle = store.export_user("alice")
    tally = {"calls": 0, "round-tripped": 0, "refused as documented": 0, "other exceptions": 0,
             "changed by a refusal": 0}

    @examples(150, 1500)
    @given(name=st.sampled_from([*STORE_CALLS, "import_records"]), data=st.data())
    def one_call(name, data):
        if name == "import_records":
            args: tuple = (data.draw(bundle_variants(bundle)), data.draw(hostile(st.sampled_from(["carol", "dave"]))))
            call_it = lambda: store.import_records(args[0], user=args[1])  # noqa: E731
        else:
            args = data.draw(STORE_CALLS[name])
            call_it = lambda: getattr(store, name)(*args)  # noqa: E731
        before = snapshot(store)
        tally["calls"] += 1
        try:
            result = call_it()
        except DOCUMENTED:
            tally["refused as documented"] += 1
            tally["changed by a refusal"] += snapshot(store) != before
            assert snapshot(store) == before
            return
        except StoreError as exc:  # import: the user already has data; archive: a turn number kept with other content
            assert (name == "import_records" and "already has memory" in str(exc)) or (
                name == "archive_turns" and isinstance(exc, ArchiveConflictError)), exc
            tally["refused as documented"] += 1
            assert snapshot(store) == before
            return
        except BaseException:
            tally["other exceptions"] += 1
            raise
        tally["round-tripped"] += 1
        round_trips(store, name, args, result)
        if name == "import_records":
            store.forget_user(args[1])

    # Crafted bundles that once escaped as OverflowError, ValueError and RecursionError (regressions).
    crafted = [bundle.replace('"revision": 1', f'"revision": {big}', 1) for big in (2**63, 2**64, "9" * 5000)]
    crafted += [bundle.replace("\n", "\n" + "[" * 100_000 + "\n", 1)]
    for text in crafted:
        before = snapshot(store)
        tally["calls"] += 1
        with pytest.raises(ValidationError, match=r"revision|decoded|checksum"):
            store.import_records(text, user="carol")
        tally["refused as documented"] += 1
        assert snapshot(store) == before
    for wrong in (None, 5, object()):  # turns that are not a list once escaped as TypeError (a regression)
        tally["calls"] += 1
        with pytest.raises(ValidationError, match="turns must be a list"):
            store.archive_turns("alice", "s1", wrong)
        tally["refused as documented"] += 1
    try:
        one_call()
    finally:
        store.close()
    figures("Hostile input: store methods", **tally)
    assert tally["other exceptions"] == tally["changed by a refusal"] == 0
