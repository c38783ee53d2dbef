"""A relation's disk partition: a sequence of blocks, each a file of tuples sorted on the join
key (DINER's Disk_A, Disk_B, paper 2.2).

A block is written once, as one ``.npy`` file of (key, tid, ATS, DTS) rows in key order, and
read whole; block ids count from 1 as in the paper's ReactiveNL. The folder is the executor's
scratch (the run's spill folder) or a temporary one. Reads and writes are counted: the time
model charges them.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

FIELDS = ("key", "tid", "ats", "dts")


class BlockDisk:
    """Blocks of one relation of one worker, as files in ``folder``."""

    def __init__(self, folder: str | None, name: str) -> None:
        self.folder = folder
        self.name = name
        self.sizes: list[int] = []  # tuples per block, block id - 1
        self.reads = 0
        self.writes = 0

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def tuples(self) -> int:
        return sum(self.sizes)

    def _path(self, block: int) -> str:
        if self.folder is None:
            self.folder = tempfile.mkdtemp(prefix="diner-")
        return os.path.join(self.folder, f"{self.name}-{block:07d}.npy")

    def append(self, key: np.ndarray, tid: np.ndarray, ats: np.ndarray, dts: np.ndarray) -> int:
        """Write a block (sorted here on the key, stable); returns its id (from 1)."""
        order = np.argsort(key, kind="stable")
        rows = np.empty(len(key), dtype=[("key", "f8"), ("tid", "i8"), ("ats", "i8"),
                                         ("dts", "i8")])
        rows["key"], rows["tid"] = key[order], tid[order]
        rows["ats"], rows["dts"] = ats[order], dts[order]
        self.sizes.append(len(rows))
        np.save(self._path(len(self.sizes)), rows, allow_pickle=False)
        self.writes += 1
        return len(self.sizes)

    def read(self, first: int, count: int = 1) -> np.ndarray:
        """Blocks ``first`` .. ``first + count - 1`` (ids from 1), concatenated, key-sorted."""
        parts = [np.load(self._path(b), allow_pickle=False)
                 for b in range(first, first + count)]
        self.reads += count
        rows = np.concatenate(parts) if parts else np.zeros(0, dtype=[(f, "f8") for f in FIELDS])
        return rows[np.argsort(rows["key"], kind="stable")] if count > 1 else rows
