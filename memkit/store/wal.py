"""The write-ahead log (`-wal`) beside a SQLite store: kept within the size cap, and read as bytes.

`WalCap` (a part of `SqliteDatabase`) refuses a write while the log is past the cap and cuts it back
after a write the cap refused; a reader of db.py can skip it. `WalLog` reads the file without SQLite
(https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header, then frames of a 24-byte
header and one page, counted only when their salts and checksum chain hold and their transaction's
commit frame is written. It tells whose commits a log holds (files.check_wal).
"""

from __future__ import annotations

import os
import sqlite3
import struct
from array import array
from pathlib import Path
from sys import byteorder
from typing import TYPE_CHECKING

from ..errors import QuotaError
from .backend import SqlitePart

if TYPE_CHECKING:
    from ..limits import Limits

_MAGIC_LITTLE, _MAGIC_BIG = 0x377F0682, 0x377F0683
_HEADER, _FRAME = 32, 24


def _checksum(data: bytes, s0: int, s1: int, big_endian: bool) -> tuple[int, int]:
    words = array("I", data)
    if big_endian != (byteorder == "big"):
        words.byteswap()
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def file_size(path: str | os.PathLike[str]) -> int:
    """The file's size, 0 if there is none: another process's last connection removes the -wal when it closes."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


class WalLog:
    """What a WAL file holds: its page size and the committed versions of a page, as SQLite reads them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.page_size = 0
        self.valid = False
        with path.open("rb") as handle:
            header = handle.read(_HEADER)
        if len(header) < _HEADER:
            return
        magic, _version, page_size, _sequence, *self._salts_and_sums = struct.unpack(">8I", header)
        if magic not in (_MAGIC_LITTLE, _MAGIC_BIG):
            return
        self._big = magic == _MAGIC_BIG
        self._salts = tuple(self._salts_and_sums[:2])
        sums = tuple(self._salts_and_sums[2:])
        if _checksum(header[:24], 0, 0, self._big) != sums:
            return  # SQLite ignores a WAL whose header is damaged: it holds nothing
        self.page_size, self._start = page_size, sums
        self.valid = True

    def committed_versions(self, page_number: int) -> list[bytes]:
        """Every committed version of page `page_number` in the log, oldest first.

        Frames are read header by header; only those of the page are checksummed, each from the
        sums stored in the frame before it (the chain SQLite verifies), so a long log costs little.
        """
        if not self.valid:
            return []
        versions: list[bytes] = []
        pending: list[bytes] = []
        previous = self._start
        with self.path.open("rb") as handle:
            handle.seek(_HEADER)
            while True:
                frame = handle.read(_FRAME)
                if len(frame) < _FRAME:
                    break
                number, commit, salt1, salt2, sum1, sum2 = struct.unpack(">6I", frame)
                if (salt1, salt2) != self._salts:
                    break  # a frame of an older generation of the log: SQLite stops here too
                if number == page_number or commit:
                    page = handle.read(self.page_size)
                    if len(page) < self.page_size:
                        break  # cut short: a commit never completed
                    if number == page_number:
                        if _checksum(frame[:8] + page, *previous, self._big) != (sum1, sum2):
                            break
                        pending.append(page)
                else:
                    handle.seek(self.page_size, 1)
                previous = (sum1, sum2)
                if commit:
                    versions += pending
                    pending = []
        return versions


class WalCap(SqlitePart):
    """The size cap applied to the `-wal` file too (a part of `SqliteDatabase`, db.py)."""

    @staticmethod
    def _cap_wal(conn: sqlite3.Connection, limits: Limits, page_size: int) -> None:
        """The cap bounds the WAL too: at most as many pages between checkpoints as the cap holds, and a
        log that grew past it is cut back to it."""
        conn.execute(f"PRAGMA wal_autocheckpoint = {max(1, min(1000, limits.max_db_bytes // page_size))}")
        conn.execute(f"PRAGMA journal_size_limit = {int(limits.max_db_bytes)}")

    def _wal_bytes(self) -> int:
        return file_size(self._wal_path)

    def _check_wal(self) -> None:
        """Refuse (QuotaError) a write while the `-wal` is past the size cap (inside the transaction).

        A reader holding an older snapshot stops checkpoints, and every commit then makes the log
        longer. Refused before this write adds its pages, the log stays within the cap plus one
        write's pages, and the database plus its log within about twice the cap.
        """
        wal = self._wal_bytes()
        if wal > self.limits.max_db_bytes:
            raise QuotaError(
                f"the write-ahead log {self.path.name}-wal holds {wal} bytes, past the size cap of "
                f"{self.limits.max_db_bytes} bytes, and cannot be written back into the database: another "
                "connection holds an older snapshot (an unfinished SELECT, or a transaction left open). "
                "Nothing was written; finish or close that reader and try again"
            )

    def _shrink_wal(self, conn: sqlite3.Connection) -> None:
        """After a write refused by the size cap (its pages spilled into the WAL first): checkpoint and
        truncate the WAL, without waiting: a reader in the way postpones the cut to the next checkpoint."""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        except sqlite3.Error:
            pass  # best effort: the write was refused and rolled back either way
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.limits.busy_timeout_ms)}")
