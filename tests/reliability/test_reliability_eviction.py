"""The reliability lab: a Redis whose maxmemory-policy evicts keys loses turns, so the window refuses it
unless the caller accepts the risk; under noeviction a full server refuses writes and loses none.

See `tests/_reliability.py` for the lab's sizes (`make reliability` sets MEMKIT_FULL=1) and
conftest.py for the `figures` fixture, whose table a full run writes to tests/reliability_results.md.
"""

from __future__ import annotations

from _reliability import scale
from lab import redis_faults


def test_a_server_that_evicts_keys_is_refused_and_noeviction_loses_no_acknowledged_turn(tmp_path, figures):
    turns = scale(800, 4000)
    runs = {policy: redis_faults.eviction_run(tmp_path / f"{policy}.sqlite3", policy=policy, turns=turns)
            for policy in (*redis_faults.EVICTING_POLICIES, "noeviction")}
    evicting = [runs[policy] for policy in redis_faults.EVICTING_POLICIES]
    safe = runs["noeviction"]
    figures("A Redis that evicts keys", **{
        "evicting policies refused": f"{sum(r['refused_without_accepting'] for r in evicting)} of {len(evicting)}",
        "noeviction refused": safe["refused_without_accepting"],
        "turns lost when the risk is accepted (allkeys-lru)": f"{runs['allkeys-lru']['dropped']} of {turns}",
        "turns lost when the risk is accepted (volatile-lru)": f"{runs['volatile-lru']['dropped']} of {turns}",
        "acknowledged turns lost under noeviction": safe["dropped"],
        "appends refused by a full noeviction server": safe["refused appends"],
    })
    assert all(r["refused_without_accepting"] for r in evicting) and not safe["refused_without_accepting"]
    assert safe["dropped"] == safe["doubled"] == 0 and safe["kept"] == safe["acknowledged"]
