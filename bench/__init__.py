"""memkit's benchmark suite: the kit beside the raw SQLite limit, the naive way and its peers.

Run it with `make bench` (or `python -m bench`, `--quick` for a smoke run; the peers need the
`bench` extra, which `make bench` installs, and are skipped with a note without it). Modules:

* `data`          the deterministic data set (many users of uneven size) and workload
* `contenders`    raw sqlite3 (the limit), the naive textbook way, and memkit, behind one interface
* `timing`        alternating rounds and medians, for a noisy machine
* `store_bench`   store operations at 1k, 10k and 100k records, plus agreement checks
* `budget_bench`  the budget wrapper against sending a request unmeasured
* `suite_extras`  the notebook suite's nbval wall time and the short-term window benchmark
* `peers`         langgraph's `SqliteStore` behind the contender interface; PRAGMA checks of durability
* `disk`          the disk's fsync latency, timed beside the stores (the floor of a durable commit)
* `peer_bench`    memkit against `SqliteStore` (rollback journal and WAL) at FULL and NORMAL
* `writers`       four writer processes on one file: memkit against `SqliteStore` in WAL
* `window_peers`  the window against openai-agents `SQLiteSession` and `RedisSession`
* `report`        RESULTS.md (tables, targets) and results.png; `report_peers` its peers' part

`NOTES.md` holds the design changes the benchmark led to; it is copied into RESULTS.md.
"""
