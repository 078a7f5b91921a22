"""The servers the kit starts, adopts or connects to, and how each one stops.

None of this is the memory model: these modules know processes, sockets and folders, never users,
turns or records (`memkit.window` and `memkit.store` re-export what a student calls). From the
leaves up:

* `watchdog`: a process of its own that stops a server when its starter dies, SIGKILL included.
* `redis_client`: the URL check, the kit's Redis client (with its life hook) and its errors.
* `redis`: `connect_redis` (a URL, `REDIS_URL`, or an embedded redis-server) and `RedisHandle`.
* `workspace_folder`, `workspace`, `keeper`: the redis-server a workspace keeps beside its
  SQLite file, shared by every process that uses it, and the process that stops it once idle.
* `postgres`: an embedded PostgreSQL (`pgserver`'s binaries, or an installed PostgreSQL).
"""

from __future__ import annotations
