"""Which life of a Redis server a window is talking to: the connect hook that notes it in `LIFE_KEY`.

A Redis restarted from an older state (an RDB snapshot, an AOF that lost its last second) hands out
turn numbers the archive already holds unless the window notices the restart (see
`memkit.window.numbering`). The server's `run_id` changes with every start; `note_server_life`
writes it into `LIFE_KEY` whenever a kit client connects, so the append script can compare it with
one GET, and `notes_server_life` tells whether a client has the hook.
"""

from __future__ import annotations

import re
from typing import Any

from .keys import LIFE_KEY, as_text


def note_server_life(connection: Any) -> None:
    """redis-py's connect hook on every client the kit makes: note the server's life in `LIFE_KEY`.

    A restarted Redis may have come back from an older state, with an older `LIFE_KEY` too; every
    restart breaks every connection, and a connection's first command waits for this hook. So
    before any command of a kit client runs on a server's life, `LIFE_KEY` holds that life's
    run_id, and the append script reads it (one GET) instead of asking `INFO server` on every call
    (7-21 µs of server time per append in our runs, quiet machine to busy one). Windows on other clients keep asking INFO.
    Pass `redis_connect_func=note_server_life` to a client of your own to give it the same check.
    """
    import redis  # only a client of redis-py calls this

    connection.on_connect()  # what redis-py does when no hook is given: HELLO, AUTH, SELECT
    connection.send_command("INFO", "server")
    match = re.search(r"^run_id:(\w+)", as_text(connection.read_response()), re.MULTILINE)
    if match is None:
        raise redis.ConnectionError("the server's INFO names no run_id; it is not a Redis the kit can use")
    connection.send_command("GET", LIFE_KEY)
    known = connection.read_response()
    if known is None or as_text(known) != match.group(1):
        connection.send_command("SET", LIFE_KEY, match.group(1))
        connection.read_response()


def notes_server_life(client: object) -> bool:
    """True if every connection of `client` runs `note_server_life` when it connects."""
    pool = getattr(client, "connection_pool", None)
    return getattr(pool, "connection_kwargs", {}).get("redis_connect_func") is note_server_life
