"""memkit's benchmark suite: the kit side by side with the raw SQLite limit and the naive way.

Run it with `make bench` (or `python -m bench`, `--quick` for a smoke run). Modules:

* `data`          the deterministic data set (many users of uneven size) and workload
* `contenders`    raw sqlite3 (the limit), the naive textbook way, and memkit, behind one interface
* `timing`        alternating rounds and medians, for a noisy machine
* `store_bench`   store operations at 1k, 10k and 100k records, plus agreement checks
* `budget_bench`  the budget wrapper against sending a request unmeasured
* `suite_extras`  the notebook suite's nbval wall time and the short-term window benchmark
* `report`        RESULTS.md (tables, targets) and results.png

`NOTES.md` holds the design changes the benchmark led to; it is copied into RESULTS.md.
"""
