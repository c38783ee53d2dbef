"""A relation's disk partition: a sequence of blocks, each a file of tuples sorted on the join
key (DINER's Disk_A, Disk_B, paper 2.2).

A block is written once, appended to the relation's file as (key, tid, ATS, DTS, last) rows in
key order (``last``: the latest reactive pass that met the tuple in memory, XJoin's and RPJ's
duplicate check; -1 for none), and read whole from its offset; block ids count from 1 as in the paper's ReactiveNL.
The folder is the executor's scratch (the run's spill folder) or a temporary one. The operator
counts the blocks it reads and writes (its time model charges them).
"""

from __future__ import annotations

import os
import tempfile

import numpy as np


class BlockDisk:
    """Blocks of one relation of one worker, appended to one file in ``folder``."""

    DTYPE = np.dtype([("key", "f8"), ("tid", "i8"), ("ats", "i8"), ("dts", "i8"),
                      ("last", "i8")])

    def __init__(self, folder: str | None, name: str, keys: int = 1) -> None:
        """``keys``: join attributes per tuple (MINER's relations have one per edge: the
        first is ``key``, the others ``key2``, ``key3``...)."""
        self.dtype = np.dtype(self.DTYPE.descr + [(f"key{i}", "f8") for i in range(2, keys + 1)])
        self.keys = keys
        self.folder = folder
        self.name = name
        self.sizes: list[int] = []  # tuples per block, block id - 1
        self.starts: list[int] = []  # the block's first row in the file
        self.rows = 0  # tuples in the file (the next block's start)
        self._reader = None  # an open read handle (not carried when the state is pickled)
        self._writer = None  # an open append handle (likewise)

    def __getstate__(self) -> dict:
        self._flush()
        return {**self.__dict__, "_reader": None, "_writer": None}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update({"_writer": None, **state})  # states pickled without a writer

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def tuples(self) -> int:
        return self.rows

    @property
    def path(self) -> str:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="diner-")
        return os.path.join(self.folder, f"{self.name}.blocks")

    def append(self, key: np.ndarray, tid: np.ndarray, ats: np.ndarray, dts: np.ndarray,
               last: np.ndarray | None = None, more: np.ndarray | None = None) -> int:
        """Write a block (sorted here on the key, stable); returns its id (from 1). ``more``:
        the other join attributes, one column each (``keys`` - 1 of them)."""
        order = np.argsort(key, kind="stable")
        rows = np.empty(len(key), dtype=self.dtype)
        for i in range(2, self.keys + 1):
            rows[f"key{i}"] = more[order, i - 2]
        rows["key"], rows["tid"] = key[order], tid[order]
        rows["ats"], rows["dts"] = ats[order], dts[order]
        rows["last"] = -1 if last is None else last[order]
        if self._writer is None:
            self._writer = open(self.path, "ab")  # noqa: SIM115 (kept open, flushed by reads)
        self._writer.write(memoryview(rows).cast("B"))
        if self._reader is not None:
            self._reader.close()  # reopened at the next read: the file grew
            self._reader = None
        self.starts.append(self.rows)
        self.sizes.append(len(rows))
        self.rows += len(rows)
        return len(self.sizes)

    def _flush(self) -> None:
        """The blocks appended so far into the file (before a read, and the state's pickling)."""
        if self._writer is not None:
            self._writer.flush()

    def read(self, first: int, count: int = 1) -> np.ndarray:
        """Blocks ``first`` .. ``first + count - 1`` (ids from 1), concatenated, key-sorted."""
        rows = self.read_many(list(range(first, first + max(count, 0))))
        return rows[np.argsort(rows["key"], kind="stable")] if count > 1 else rows

    def read_many(self, ids: list[int]) -> np.ndarray:
        """Whole blocks ``ids`` (0: none), concatenated in the order given (each key-sorted,
        the whole not), read into one buffer through one handle."""
        ids = [i for i in ids if i]
        out = np.empty(sum(self.sizes[i - 1] for i in ids), dtype=self.dtype)
        if not len(out):
            return out
        self._flush()
        if self._reader is None:
            self._reader = open(self.path, "rb")  # noqa: SIM115 (kept open between reads)
        view, pos, width = memoryview(out).cast("B"), 0, self.dtype.itemsize
        for i in ids:
            n = self.sizes[i - 1] * width
            self._reader.seek(self.starts[i - 1] * width)
            self._reader.readinto(view[pos:pos + n])
            pos += n
        return out
