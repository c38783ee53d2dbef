"""smalllarge: the AM-Join paper's Small-Large outer-join workload of Fig 9 (catalogue 4.2, E6).

Table ``L`` (large): ``large_rows`` records with keys uniform in [1, 2*key_range]. Table ``S``
(small): ``small_rows`` records with even keys. The paper's "50% selectivity" has two readings
(catalogue E6 note), chosen by ``reading``:

- ``keyspace`` (literal, default): small keys uniform over the even keys in [2, 2*key_range].
  Half of the large relation's key space (and records) can match; when ``large_rows`` is much
  larger than the key space, as in the paper (10^8 vs 2x10^5), virtually every small record
  matches.
- ``unmatched``: a ``unmatched_fraction`` share of the small records (0.5 = "50%") get even keys
  in (2*key_range, 4*key_range], which never occur in L, so they certainly have no match and
  exercise the outer join's anti-join path; the rest are drawn as in ``keyspace``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from datagen.chunks import (
    ChunkJob,
    chunk_bounds,
    chunk_rng,
    key_payload_table,
    n_chunks,
    payload_column,
    run_jobs,
    share,
    write_part,
)
from datagen.params import check, validate

NAME = "smalllarge"
READINGS = ("keyspace", "unmatched")
KEY_BYTES = 8


@dataclass(frozen=True)
class Params:
    large_rows: int = 100_000  # paper: 10^8
    small_rows: int = 1_000  # paper: 10^5 .. 10^6 (the x axis of Fig 9)
    key_range: int = 1_000  # large keys uniform in [1, 2*key_range] (paper: 10^5)
    size: int = 100  # record bytes (paper: 100)
    reading: str = "keyspace"  # which reading of "50% selectivity" (module docstring)
    unmatched_fraction: float = 0.5  # only for reading=unmatched
    seed: int = 0
    chunk_rows: int = 100_000
    payload: str = "random"

    def __post_init__(self) -> None:
        check(self.reading in READINGS,
              f"unknown reading {self.reading!r}; valid: {', '.join(READINGS)}")
        check(0.0 <= self.unmatched_fraction <= 1.0,
              f"unmatched_fraction must be in [0, 1], got {self.unmatched_fraction}")
        check(self.large_rows >= 0 and self.small_rows >= 0, "row counts must be >= 0")
        check(1 <= self.key_range <= 2**60, f"key_range must be >= 1, got {self.key_range}")
        check(self.size > KEY_BYTES, f"size must be >= {KEY_BYTES + 1}, got {self.size}")
        check(self.seed >= 0, f"seed must be >= 0, got {self.seed}")
        check(self.chunk_rows >= 1, f"chunk_rows must be >= 1, got {self.chunk_rows}")
        check(self.payload in ("random", "constant"),
              f"unknown payload {self.payload!r}; valid: random, constant")

    def rows(self, table: str) -> int:
        return self.large_rows if table == "L" else self.small_rows


def _small_keys(rng: np.random.Generator, p: Params, start: int, end: int) -> np.ndarray:
    n = end - start
    unmatched = 0
    if p.reading == "unmatched":
        unmatched = share(p.small_rows, round(p.unmatched_fraction * p.small_rows), start, end)
    r = p.key_range
    matched = 2 * rng.integers(1, r, size=n - unmatched, endpoint=True, dtype=np.int64)
    absent = 2 * rng.integers(r + 1, 2 * r, size=unmatched, endpoint=True, dtype=np.int64)
    return rng.permutation(np.concatenate([matched, absent]))


def write_chunk(job: ChunkJob) -> int:
    p = Params(**job.args)
    start, end = chunk_bounds(p.rows(job.table), p.chunk_rows, job.index)
    rng = chunk_rng(p.seed, NAME, job.table, job.index)
    if job.table == "L":
        keys = rng.integers(1, 2 * p.key_range, size=end - start, endpoint=True, dtype=np.int64)
    else:
        keys = _small_keys(rng, p, start, end)
    payload = payload_column(rng, len(keys), p.size - KEY_BYTES, p.payload)
    return write_part(key_payload_table(keys, payload), job.out, job.index)


def generate(params: dict, out: Path, spark=None, progress: bool = True) -> dict[str, int]:
    p = validate(Params, params, f"generator {NAME!r}")
    jobs = []
    for t in ("L", "S"):
        n = p.rows(t)
        for i in range(n_chunks(n, p.chunk_rows)):
            lo, hi = chunk_bounds(n, p.chunk_rows, i)
            jobs.append(ChunkJob(f"datagen.{NAME}:write_chunk", t, i, str(out / f"{t}.parquet"),
                                 rows=hi - lo, args=asdict(p)))
    run_jobs(jobs, spark, progress, desc=NAME)
    return {"L": p.large_rows, "S": p.small_rows}
