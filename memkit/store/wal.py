"""Reading a SQLite write-ahead log (`-wal`) file as bytes, without SQLite and without changing it.

The format is SQLite's (https://www.sqlite.org/fileformat2.html#walformat): a 32-byte header, then
frames of a 24-byte header and one page. A frame counts only if its salts match the header's and its
checksum continues the chain; a transaction counts only once its commit frame (one with a database
size) is written. SQLite keeps no record of which database a WAL belongs to: the store's own row
(`store_meta`, written by every commit) is what tells.
"""

from __future__ import annotations

import struct
from array import array
from pathlib import Path
from sys import byteorder

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
