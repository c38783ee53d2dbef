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

    def __init__(self, folder: str | None, name: str) -> None:
        self.folder = folder
        self.name = name
        self.sizes: list[int] = []  # tuples per block, block id - 1
        self.starts: list[int] = []  # the block's first row in the file
        self.rows = 0  # tuples in the file (the next block's start)

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
               last: np.ndarray | None = None) -> int:
        """Write a block (sorted here on the key, stable); returns its id (from 1)."""
        order = np.argsort(key, kind="stable")
        rows = np.empty(len(key), dtype=self.DTYPE)
        rows["key"], rows["tid"] = key[order], tid[order]
        rows["ats"], rows["dts"] = ats[order], dts[order]
        rows["last"] = -1 if last is None else last[order]
        with open(self.path, "ab") as f:
            rows.tofile(f)
        self.starts.append(self.rows)
        self.sizes.append(len(rows))
        self.rows += len(rows)
        return len(self.sizes)

    def read(self, first: int, count: int = 1) -> np.ndarray:
        """Blocks ``first`` .. ``first + count - 1`` (ids from 1), concatenated, key-sorted."""
        if count < 1:
            return np.zeros(0, dtype=self.DTYPE)
        start, last = self.starts[first - 1], first + count - 2
        n = self.starts[last] + self.sizes[last] - start
        rows = np.fromfile(self.path, dtype=self.DTYPE, count=n,
                           offset=start * self.DTYPE.itemsize)
        return rows[np.argsort(rows["key"], kind="stable")] if count > 1 else rows
