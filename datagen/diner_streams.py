"""diner_streams: two relations R and S of timed arrivals, the DINER paper's synthetic inputs.

Each relation has ``n_r`` (``n_s``) tuples with a join key and an arrival time: exponential
gaps of rate ``lam`` per time unit (the paper's lambda = 0.1), so the two relations arrive
interleaved in time. Keys: ``zipf`` on the integers [1, ``domain``] with exponent ``s`` (value
1 the most frequent; the paper: [1, 999], s = 1..5), or ``normal`` with ``mean`` and
``variance`` rounded to integers (S's mean and variance are R's plus ``mean_shift`` and
``variance_shift``: the paper's Figs 11-12). ``pauses`` inserts silent periods: a list of
[fraction of the stream, length] applied to both relations (the delay workloads).

Tables ``R`` and ``S``: ``key`` (int64), ``t`` (float64 arrival time), ``rid`` (the tuple's
number in its relation). The paper's sizes (2 x 100K tuples) are small: generated on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from datagen.chunks import write_part
from datagen.params import check

NAME = "diner_streams"


@dataclass(frozen=True)
class Params:
    n_r: int = 100_000
    n_s: int = 100_000
    keys: str = "zipf"  # zipf | normal
    s: float = 1.0  # Zipf exponent
    domain: int = 999  # Zipf keys 1..domain
    mean: float = 500.0  # normal keys
    variance: float = 50.0
    mean_shift: float = 0.0  # S's mean - R's
    variance_shift: float = 0.0  # S's variance - R's
    lam: float = 0.1  # arrivals per time unit, per relation
    pauses: list = field(default_factory=list)  # [[fraction, length], ...]
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.n_r >= 0 and self.n_s >= 0, "n_r and n_s must be >= 0")
        check(self.keys in ("zipf", "normal"), f"keys must be zipf or normal, got {self.keys!r}")
        check(self.s > 0 and self.domain >= 1, "s must be > 0 and domain >= 1")
        check(self.variance > 0 and self.variance + self.variance_shift > 0,
              "variances must be > 0")
        check(self.lam > 0, f"lam must be > 0, got {self.lam}")
        for p in self.pauses:
            check(len(p) == 2 and 0 <= p[0] <= 1 and p[1] >= 0,
                  f"a pause is [fraction in 0..1, length >= 0], got {p}")


def _keys(p: Params, rng: np.random.Generator, n: int, shift: float, vshift: float):
    if p.keys == "zipf":
        pmf = np.arange(1, p.domain + 1, dtype=float) ** -p.s
        return rng.choice(p.domain, size=n, p=pmf / pmf.sum()).astype(np.int64) + 1
    sd = np.sqrt(p.variance + vshift)
    return np.rint(rng.normal(p.mean + shift, sd, n)).astype(np.int64)


def _times(p: Params, rng: np.random.Generator, n: int) -> np.ndarray:
    t = np.cumsum(rng.exponential(1.0 / p.lam, n))
    for frac, length in p.pauses:
        t[int(frac * n):] += length
    return t


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    p = Params(**params)
    rows = {}
    for i, (name, n, shift, vshift) in enumerate((("R", p.n_r, 0.0, 0.0),
                                                 ("S", p.n_s, p.mean_shift, p.variance_shift))):
        rng = np.random.default_rng([p.seed, i])
        table = pa.table({"key": _keys(p, rng, n, shift, vshift), "t": _times(p, rng, n),
                          "rid": np.arange(n, dtype=np.int64)})
        rows[name] = write_part(table, Path(out) / f"{name}.parquet", 0)  # atomic
    return rows
