"""memkit's benchmarks: the kit beside the raw SQLite limit, the naive way, its peers and its waits.

One runner, `python -m bench [SUITE ...]` (`make bench`; `--list` names every suite): `suites` is the
registry and the runner, `report` (with the prose of `sections.md`) writes RESULTS.md and the plots,
`timing` alternates contenders and takes medians, `data` is the data set. Each suite's module:
`store_bench` (with `contenders`), `budget_bench`, `peer_bench` (with `peers`), `window_bench`,
`pg_bench` (with `pg_store_bench`), `notebook_bench`, `chat_bench`, `inspector_bench` and
`semantic_bench`. `NOTES.md` (what the benchmark changed, and the retired measurements) is copied
into RESULTS.md.
"""

import sys
from pathlib import Path

# `pg_bench` repeats notebook 09's writer curve (`classroom.lab`), which lives beside the notebooks,
# not in the package: its folder goes on the path, as it is the notebooks' working folder.
_NOTEBOOKS = str(Path(__file__).resolve().parents[1] / "notebooks")
if _NOTEBOOKS not in sys.path:
    sys.path.append(_NOTEBOOKS)
