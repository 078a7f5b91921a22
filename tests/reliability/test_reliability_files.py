"""The reliability lab: SQLite files that do not belong together, and a clock that steps back.

A deleted database must not come back from its leftover `-wal`; a `-wal` of another database must
be refused with every file unchanged; a write the size cap refused must not leave a WAL past the
cap; half-made databases of killed creators are removed at the next open (a live creator's kept);
"newest first" follows commit order whatever the clock says. The experiments are in
`tests/lab/sidecars.py`; see `tests/_reliability.py` for the sizes (`make reliability` sets
MEMKIT_FULL=1) and conftest.py for the `figures` fixture.
"""

from __future__ import annotations

from _reliability import FULL, scale
import lab


def test_a_deleted_database_never_comes_back_from_its_leftover_wal(tmp_path, figures):
    result = lab.leftover_wal_experiment(tmp_path, trials=scale(4, 50), seed=1)
    figures("Leftover -wal: database deleted after its writer was killed",
            **{"trials": result["trials"], "commits left in the -wal": result["commits"],
               "refused naming the -wal": result["refused"], "opened": result["opened"],
               "records resurrected": result["resurrected"], "files changed by a refusal": result["changed"]})
    assert result["commits"] >= result["trials"]
    assert (result["refused"], result["opened"], result["resurrected"], result["changed"]) == (
        result["trials"], 0, 0, 0)


def test_a_wal_of_another_database_is_refused_with_every_file_unchanged(tmp_path, figures):
    result = lab.foreign_wal_experiment(tmp_path, pairs=scale(4, 50), seed=2)
    figures("Foreign -wal: another database's -wal beside a closed one",
            **{"pairs": result["pairs"], "refused": result["refused"],
               "opened with the other's records": result["mixed"], "files changed by a refusal": result["changed"],
               "own -wal after a kill opened": result["own_opened"],
               "acknowledged writes lost": result["own_lost"]})
    assert (result["refused"], result["mixed"], result["changed"]) == (result["pairs"], 0, 0)
    assert (result["own_opened"], result["own_lost"]) == (result["pairs"], 0)


def test_a_write_refused_by_the_size_cap_leaves_no_wal_past_the_cap(tmp_path, figures):
    caps = (262_144, 1_500_000, 4_000_000) if FULL else (262_144, 1_500_000)
    result = lab.refused_write_experiment(tmp_path, caps=caps, factors=(1.5, 3, 10) if FULL else (2, 5), seed=3)
    figures("Size cap: the -wal after a refused write",
            **{"refusals": result["refusals"], "caps (bytes)": f"{caps[0]}-{caps[-1]}",
               "largest -wal after a refusal (bytes)": result["largest_wal"],
               "largest database + -wal (share of the cap)": result["largest_share"],
               "over the cap on disk": result["over_cap"], "writes after a refusal": result["writes_after"]})
    assert result["refusals"] > 0 and result["over_cap"] == 0 and result["largest_share"] <= 1
    assert result["writes_after"] == result["refusals"]


def test_half_made_databases_of_killed_creators_are_removed_at_the_next_open(tmp_path, figures):
    result = lab.killed_creators_experiment(tmp_path, kills=scale(6, 100), seed=4)
    figures("Creators killed: half-made .creating files",
            **{"kills": result["kills"], "kills that left half-made files": result["kills_leaving_files"],
               "half-made files found": result["found"], "removed at the next open": result["removed"],
               "left after it": result["left"], "a live creator's file kept": result["live_kept"]})
    assert (result["removed"], result["left"], result["live_kept"]) == (result["found"], 0, 1)


def test_newest_first_follows_commit_order_when_the_clock_steps_back(tmp_path, figures):
    result = lab.clock_experiment(tmp_path, writes=scale(150, 2000), seed=5)
    figures("Clock steps back: newest first and created <= updated",
            **{"writes": result["writes"], "clock steps back": result["steps_back"],
               "largest step back (s)": result["largest_step_back_s"], "searches compared": result["searches"],
               "out of commit order": result["out_of_order"],
               "created after updated": result["created_after_updated"]})
    assert result["steps_back"] > 0
    assert (result["out_of_order"], result["created_after_updated"]) == (0, 0)
