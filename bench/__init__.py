"""memkit's benchmarks: the kit beside the raw SQLite limit, the naive way, its peers and its waits.

One runner, `python -m bench [SUITE ...]` (`make bench`; `--list` names every suite, `--quick` is a
smoke run; the peers need the `bench` extra and are skipped with a note without it). Modules:

* `suites`          the registry: each suite's name, what it measures, how it runs, where it reports
* `report`          RESULTS.md (every section, the targets), results.png and pg_writers.png
* `timing`          alternating rounds and medians, the garbage collector paused, for a noisy machine
* `data`            the deterministic data set (many users of uneven size) and its workload
* `contenders`      raw sqlite3 (the limit), the naive textbook way, and memkit, behind one interface
* `store_bench`     store operations at 1k, 10k and 100k records, and agreement checks
* `budget_bench`    the budget wrapper against sending a request unmeasured
* `peers`           langgraph's `SqliteStore` as a contender, PRAGMA checks, the disk's fsync probe
* `peer_bench`      memkit against `SqliteStore`: operations, writer processes, a write's pages and parts
* `window_bench`    the window's latency, its AOF policy, and openai-agents' sessions beside it
* `pg_store_bench`  `PostgresStore` against raw psycopg; `pg_bench` the writer curve and isolation
* `chat_bench`, `notebook_bench`, `inspector_bench`, `semantic_bench`   the waits a person feels

`NOTES.md` holds the design changes the benchmark led to; it is copied into RESULTS.md.
"""
