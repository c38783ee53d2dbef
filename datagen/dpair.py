"""dpair: the AM-Join paper's D(alpha, S) pair of relations R and S (catalogue amjoin 4.1).

Each relation is the union of ``uniform_rows`` records with keys uniform in [1, uniform_range]
and ``rows`` records with Zipf(alpha) keys over K = ``keys`` key values; every record is
``size`` bytes (8-byte key + payload). Rank r maps to key value r by default, so rank 1 is the
same key in both relations and the hot keys are hot on both sides (the catalogue's inference
from Apache Commons' ZipfDistribution, which returns ranks). ``permute_keys`` maps ranks through
one seeded permutation of 1..K instead (still the same on both sides). R and S draw from
independent seeds. The two kinds of records are spread evenly over the chunks and shuffled
within each chunk, so file order is a stationary mix (it becomes the arrival order of streams).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from datagen.chunks import (
    ChunkJob,
    chunk_bounds,
    chunk_rng,
    key_payload_table,
    n_chunks,
    named_rng,
    payload_column,
    run_jobs,
    share,
    write_part,
)
from datagen.params import check, validate
from datagen.zipf import MAX_VALUES, sample_zipf

NAME = "dpair"
TABLES = ("R", "S")
KEY_BYTES = 8
PAYLOADS = ("random", "constant")


@dataclass(frozen=True)
class Params:
    alpha: float = 0.5  # Zipf exponent (0 = uniform); the paper sweeps 0..1
    size: int = 100  # record bytes S = 8 (key) + len(payload)
    keys: int = 1000  # K, the Zipf key domain 1..K (paper: 10^5)
    rows: int = 10_000  # N_z Zipf records per relation (paper: 10^7)
    uniform_rows: int = 10_000  # N_u uniform records per relation (paper: 10^9)
    uniform_range: int = 2**31 - 1  # uniform keys in [1, uniform_range]
    seed: int = 0
    chunk_rows: int = 100_000
    permute_keys: bool = False  # rank -> seeded permutation of 1..K instead of rank -> rank
    payload: str = "random"  # random letters, or constant (cheaper; compresses away)

    def __post_init__(self) -> None:
        check(np.isfinite(self.alpha) and self.alpha >= 0,
              f"alpha must be a number >= 0, got {self.alpha}")
        check(self.size > KEY_BYTES, f"size must be >= {KEY_BYTES + 1} bytes (8-byte key + "
              f"payload), got {self.size}")
        check(1 <= self.keys <= MAX_VALUES, f"keys (K) must be in 1..{MAX_VALUES}, got {self.keys}")
        check(self.rows >= 0 and self.uniform_rows >= 0, "rows and uniform_rows must be >= 0")
        check(1 <= self.uniform_range <= 2**62, f"uniform_range must be >= 1, got "
              f"{self.uniform_range}")
        check(self.seed >= 0, f"seed must be >= 0, got {self.seed}")
        check(self.chunk_rows >= 1, f"chunk_rows must be >= 1, got {self.chunk_rows}")
        check(self.payload in PAYLOADS,
              f"unknown payload {self.payload!r}; valid: {', '.join(PAYLOADS)}")


@lru_cache(maxsize=4)
def _key_of_rank(seed: int, keys: int) -> np.ndarray:
    """Shared by both relations (and all chunks): key value of rank r is perm[r - 1]."""
    return named_rng(seed, NAME, "key_permutation").permutation(keys).astype(np.int64) + 1


def _chunk_keys(p: Params, table: str, index: int) -> tuple[np.ndarray, np.random.Generator]:
    """The keys of one chunk in file order, and the chunk's generator positioned after them."""
    total = p.rows + p.uniform_rows
    start, end = chunk_bounds(total, p.chunk_rows, index)
    n_zipf = share(total, p.rows, start, end)
    rng = chunk_rng(p.seed, NAME, table, index)
    ranks = sample_zipf(rng, p.alpha, p.keys, n_zipf)
    zipf_keys = _key_of_rank(p.seed, p.keys)[ranks - 1] if p.permute_keys else ranks
    uniform = rng.integers(1, p.uniform_range, size=(end - start) - n_zipf, endpoint=True,
                           dtype=np.int64)
    return rng.permutation(np.concatenate([zipf_keys, uniform])), rng


def write_chunk(job: ChunkJob) -> int:
    p = Params(**job.args)
    keys, rng = _chunk_keys(p, job.table, job.index)
    payload = payload_column(rng, len(keys), p.size - KEY_BYTES, p.payload)
    return write_part(key_payload_table(keys, payload), job.out, job.index)


def table_keys(params: dict, table: str) -> np.ndarray:
    """The key column of one relation exactly as :func:`generate` writes it (same chunks, same
    draws; the payload is drawn after the keys, so the keys do not depend on ``size``), without
    drawing payloads or writing files: for models computed from key counts alone."""
    p = validate(Params, params, f"generator {NAME!r}")
    check(table in TABLES, f"unknown table {table!r}; valid: {', '.join(TABLES)}")
    total = p.rows + p.uniform_rows
    parts = [_chunk_keys(p, table, i)[0] for i in range(n_chunks(total, p.chunk_rows))]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def generate(params: dict, out: Path, spark=None, progress: bool = True) -> dict[str, int]:
    p = validate(Params, params, f"generator {NAME!r}")
    total = p.rows + p.uniform_rows
    jobs = [
        ChunkJob(f"datagen.{NAME}:write_chunk", t, i, str(out / f"{t}.parquet"),
                 rows=(lambda b: b[1] - b[0])(chunk_bounds(total, p.chunk_rows, i)),
                 args=asdict(p))
        for t in TABLES for i in range(n_chunks(total, p.chunk_rows))
    ]
    run_jobs(jobs, spark, progress, desc=NAME)
    return {t: total for t in TABLES}
