"""A joiner's spilled tuples in an on-disk B-tree: the stand-in for Squall's BerkeleyDB.

Squall's joiners that outgrow their heap keep state in BerkeleyDB on local disk. Here the
store is an SQLite file (an embedded B-tree store, in the standard library) with an index on
the join key. The engine's ``spill="disk"`` writes overflowing tuples to it, and
``make calibrate`` times writes and probes against it (:func:`measure`), so the cost model
charges a spilled tuple and a probe into spilled state at costs measured on this machine
rather than at an assumed multiple of the in-memory costs.

Probes are batched (the micro-batch's probe keys go into a temporary table joined with the
stored tuples), as the in-memory kernel probes a whole micro-batch at once. The file is read
through the operating system's page cache, as a joiner with free RAM would read it: cold-disk
seeks are not part of the measurement.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from pathlib import Path

import numpy as np


class SpillStore:
    """Append-only spilled tuples of one worker (key, tuple id, arrival sequence number)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = sqlite3.connect(self.path)
        # one writer per file and the file is scratch: no journal, no fsync per commit
        self._db.execute("PRAGMA journal_mode = OFF")
        self._db.execute("PRAGMA synchronous = OFF")
        self._db.execute("CREATE TABLE IF NOT EXISTS spilled (key REAL, tid INTEGER, seq INTEGER)")
        self._db.execute("CREATE INDEX IF NOT EXISTS spilled_key ON spilled (key)")

    def append(self, key: np.ndarray, tid: np.ndarray, seq: np.ndarray) -> None:
        rows = zip(np.asarray(key, float).tolist(), np.asarray(tid, np.int64).tolist(),
                   np.asarray(seq, np.int64).tolist(), strict=True)
        with self._db:
            self._db.executemany("INSERT INTO spilled VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM spilled").fetchone()[0])

    def probe(self, keys: np.ndarray, band: float | None = None) -> int:
        """Stored tuples matching the probe keys (equal, or within ``band``), counted."""
        db = self._db
        db.execute("CREATE TEMP TABLE IF NOT EXISTS probe (k REAL)")
        with db:
            db.execute("DELETE FROM probe")
            db.executemany("INSERT INTO probe VALUES (?)",
                           ((k,) for k in np.asarray(keys, float).tolist()))
        if band is None:
            sql = "SELECT count(*) FROM probe JOIN spilled ON spilled.key = probe.k"
            found = db.execute(sql).fetchone()[0]
        else:
            sql = ("SELECT count(*) FROM probe JOIN spilled "
                   "ON spilled.key BETWEEN probe.k - ? AND probe.k + ?")
            found = db.execute(sql, (band, band)).fetchone()[0]
        return int(found)

    def close(self) -> None:
        self._db.close()


def measure(stored: int = 200_000, probes: int = 50_000, domain: int = 100_000,
            repeats: int = 3, seed: int = 0, directory: str | None = None) -> dict[str, float]:
    """Seconds per tuple written and per key probed, on this machine's local disk (median
    over ``repeats`` fresh stores of ``stored`` uniform keys probed with ``probes`` keys).

    ``directory``: where to put the stores; by default where the engine spills (the project's
    scratch folder), which need not be on the same device as the system's temporary folder.
    """
    if directory is None:
        from runtime.paths import ONLINE_SCRATCH

        directory = str(ONLINE_SCRATCH)
        os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    writes, reads = [], []
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        for i in range(repeats):
            key = rng.integers(0, domain, stored).astype(float)
            path = os.path.join(tmp, f"store{i}.sqlite")
            store = SpillStore(path)
            t0 = time.perf_counter()
            store.append(key, np.arange(stored), np.arange(stored))
            writes.append((time.perf_counter() - t0) / stored)
            t0 = time.perf_counter()
            store.probe(rng.integers(0, domain, probes).astype(float))
            reads.append((time.perf_counter() - t0) / probes)
            store.close()
    return {"per_spilled": float(np.median(writes)), "per_disk_probe": float(np.median(reads)),
            "spill_store": f"sqlite {sqlite3.sqlite_version}, {stored} stored, {probes} probes"}
