"""What a store target names: a SQLite path, or a PostgreSQL database in any of its spellings.

A PostgreSQL database is named by a URL (`postgresql://`, `postgres://`, `postgresql+psycopg://`, in
any letter case) or a libpq `key=value` string. Any other URL (`mysql://`, a misspelt scheme) is
refused, never taken for a file name: a file named after a URL would carry its password into a
directory listing. No message made here shows a password.
"""

from __future__ import annotations

import os
import re

from ..errors import StoreError

_SCHEME = re.compile(r"^\s*(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
_POSTGRES_SCHEMES = {"postgresql", "postgres"}
_POSTGRES_DRIVERS = re.compile(r"^postgres(?:ql)?\+[a-z0-9_]+$")
_LIBPQ_KEYWORDS = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "connect_timeout",
    "client_encoding", "options", "application_name", "sslmode", "sslrootcert", "sslcert", "sslkey",
    "service", "target_session_attrs", "require_auth", "channel_binding", "gssencmode", "krbsrvname",
    "sslpassword",
})
_KEYWORD_PAIR = re.compile(r"(?P<key>[A-Za-z_]+)\s*=\s*(?:'(?:[^'\\]|\\.)*'|[^\s']*)")
# A URL's password runs to the `@` before the host, whatever it holds (an unescaped `/`, `?` or `#`
# included): masking too much is harmless, printing a piece of a password is not.
_URL_SECRET = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/?#@\s]*:)(?P<secret>[^@\s]*)@")
# `password=` and libpq's `sslpassword=` (the client key's passphrase), as pairs or URL parameters.
_KEYWORD_SECRET = re.compile(r"(?P<head>\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s&]*)", re.IGNORECASE)


def masked(text: str) -> str:
    """`text` with the password of every URL (any scheme) or `password=` pair shown as `***`.

    Example:
        >>> masked("POSTGRESQL+psycopg://ann:s3cret@db/memkit")
        'POSTGRESQL+psycopg://ann:***@db/memkit'
        >>> masked("host=db password='s 3' dbname=m")
        'host=db password=*** dbname=m'
    """
    text = _URL_SECRET.sub(lambda m: m["head"] + "***@", text)
    return _KEYWORD_SECRET.sub(lambda m: m["head"] + "***", text)


def url_password(text: str) -> str | None:
    """The password of the first URL in `text` (as `masked` finds it), or None."""
    match = _URL_SECRET.search(text)
    return match["secret"] if match and match["secret"] else None


def is_keyword_conninfo(text: str) -> bool:
    """Whether `text` is a libpq `key=value` connection string: only pairs, every key a libpq keyword."""
    stripped = text.strip()
    if "=" not in stripped or "/" in stripped.split("=", 1)[0]:
        return False
    pairs = list(_KEYWORD_PAIR.finditer(stripped))
    rest = _KEYWORD_PAIR.sub("", stripped).strip()
    return bool(pairs) and not rest and all(m["key"].lower() in _LIBPQ_KEYWORDS for m in pairs)


def postgres_conninfo(target: object) -> str | None:
    """The connection string psycopg takes, when `target` names a PostgreSQL database; else None.
    `POSTGRES://`, `postgresql+psycopg://` and the like become `postgresql://`.

    Raises:
        StoreError: `target` is a URL of another scheme (named in the message, its password masked).
    """
    if not isinstance(target, str):
        return None
    stripped = target.strip()
    match = _SCHEME.match(stripped)
    if match is None:
        return stripped if is_keyword_conninfo(stripped) else None
    scheme = match["scheme"].lower()
    if scheme in _POSTGRES_SCHEMES or _POSTGRES_DRIVERS.match(scheme):
        return "postgresql://" + stripped[match.end():]
    raise StoreError(
        f"{masked(stripped)} is a {match['scheme']}:// URL; memkit opens a SQLite file (a path) or a "
        "PostgreSQL database (postgresql://..., or a key=value connection string)"
    )


def is_database_url(target: object) -> bool:
    """Whether `target` names a PostgreSQL database (a URL of another scheme does not)."""
    try:
        return postgres_conninfo(target) is not None
    except StoreError:
        return False


def check_sqlite_target(path: str | os.PathLike[str]) -> None:
    """Refuse a `path` that is in fact a URL or a connection string, before it is taken for a file name.

    Raises:
        StoreError: naming what it is (the password masked) and how to open it.
    """
    text = os.fspath(path)
    if isinstance(text, bytes):
        return
    if postgres_conninfo(text) is not None:
        raise StoreError(
            f"{masked(text.strip())} names a PostgreSQL database, not a SQLite file; open it with "
            "open_store(...) or PostgresStore(...) (the `postgres` extra)"
        )
