"""Where a store's Redis windows live, written down in the store so that forgetting reaches them.

A `RedisWindow` records its server (`Store.note_window`), so `memkit.forgetting.forget_user` can
clear it later from any shell. A place is a small JSON text with sorted keys, never the password:
`{"kind": "redis", "prefix": "memkit", "url": "redis://user@host:6379/0"}`. Stores made by an older
memkit may also hold `{"kind": "workspace", "folder": ...}` (the redis-server its CLI kept beside
the store). Neither the store's own window nor a temporary embedded server is a place.
"""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import WindowError
from ..servers.redis_client import check_redis_url

WORKSPACE = "workspace"
REDIS = "redis"


class Place(NamedTuple):
    """A recorded window place, read: its `kind` (`WORKSPACE`, `REDIS`, another, or "unknown"), its key
    `prefix`, a workspace's `folder` and a Redis server's `url` without its password ("" otherwise)."""

    kind: str
    prefix: str
    folder: str = ""
    url: str = ""


def read_place(place: str) -> Place:
    """A place's JSON text, read.

    Raises:
        WindowError: not a JSON object, or a workspace place without a folder or a Redis place without
            a URL: a text this memkit did not write, which forgetting counts as a window it cannot reach.
    """
    try:
        data = json.loads(place)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise WindowError(f"the window place {place!r} is not a JSON object: this memkit did not write it")
    kind = str(data.get("kind", "unknown"))
    folder = data.get("folder") if kind == WORKSPACE else ""
    url = data.get("url") if kind == REDIS else ""
    if not isinstance(folder, str) or not isinstance(url, str):
        what = "folder" if kind == WORKSPACE else "URL"
        raise WindowError(f"the {kind} window place {place!r} names no {what}: this memkit did not write it")
    return Place(kind, str(data.get("prefix", "memkit")), folder, url)


def url_place(url: str, prefix: str = "memkit") -> str:
    """The place of the Redis server at `url`, named without its password (see `server_url`)."""
    return json.dumps({"kind": REDIS, "url": server_url(url), "prefix": prefix}, sort_keys=True)


def server_url(url: str) -> str:
    """`url` (a Redis URL) without its password or options: what names the server and database.

    `redis://:secret@Host:6379/0` -> `redis://host:6379/0`; `unix://u:secret@/run/r.sock?db=2` ->
    `unix://u@/run/r.sock?db=2`.

    Raises:
        WindowError: `url` is not a Redis URL (`check_redis_url`).
    """
    parts = urllib.parse.urlsplit(check_redis_url(url))
    scheme = parts.scheme.lower()
    user = f"{urllib.parse.unquote(parts.username)}@" if parts.username else ""
    database = urllib.parse.parse_qs(parts.query).get("db", ["0"])[0]
    if scheme == "unix":
        return f"unix://{user}{parts.path}?db={database}"
    host = (parts.hostname or "").lower()
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{user}{host}:{parts.port or 6379}/{parts.path.lstrip('/') or database}"


def client_place(client: Any, prefix: str = "memkit") -> str | None:
    """The place of the server a redis-py client talks to, or None when it cannot be told (a client
    of an unusual kind)."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", None)
    if not isinstance(kwargs, dict):
        return None
    user = f"{urllib.parse.quote(str(kwargs['username']))}@" if kwargs.get("username") else ""
    database = int(kwargs.get("db") or 0)
    if kwargs.get("path"):
        path = str(kwargs["path"])
        if Path(path).parent.name.startswith("memkit-sock-") and _temporary_data(client):
            return None  # another process's embedded server without a folder: its owner archives it all
        return url_place(f"unix://{user}{path}?db={database}", prefix)
    host, port = kwargs.get("host"), kwargs.get("port")
    if not host:
        return None
    scheme = "rediss" if "ssl" in str(getattr(client.connection_pool, "connection_class", "")).lower() else "redis"
    host = f"[{host}]" if ":" in str(host) else host
    return url_place(f"{scheme}://{user}{host}:{port or 6379}/{database}", prefix)


def _temporary_data(client: Any) -> bool:
    """True if an embedded server (`start_embedded_redis`) keeps its data in a temporary folder: the
    process that started it archives every window before it stops, and nothing of it outlives it."""
    try:
        folder = client.config_get("dir")
    except Exception:  # a server that refuses CONFIG: count it as a place
        return False
    value = next(iter(folder.values()), b"") if isinstance(folder, dict) else b""
    text = value.decode() if isinstance(value, bytes) else str(value)
    return Path(text).name.startswith("memkit-redis-")


def describe(place: str) -> str:
    """A place as a person reads it: "the workspace window in /path" or "Redis at redis://host:6379/0"."""
    try:
        read = read_place(place)
    except WindowError:
        return f"an unknown window place {place!r}"
    prefix = f" (key prefix {read.prefix!r})" if read.prefix != "memkit" else ""
    if read.kind == WORKSPACE:
        return f"the workspace window in {read.folder}{prefix}"
    if read.kind == REDIS:
        return f"Redis at {read.url}{prefix}"
    return f"an unknown window place {place!r}"
