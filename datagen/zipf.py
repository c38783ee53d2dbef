"""Bounded Zipf over the finite domain 1..K, for every exponent z >= 0.

numpy's ``Generator.zipf`` needs z > 1 and samples an unbounded domain, so it cannot give the
papers' Zipf(alpha <= 1) over 10^5 keys (AM-Join) or over 1..999 (DINER). We sample by inverse
CDF (cumulative pmf + ``searchsorted``), the method Apache Commons Math uses in the AM-Join paper.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from datagen.errors import GeneratorError

MAX_VALUES = 200_000_000  # the CDF table is 8 bytes per value


def _check(z: float, n_values: int) -> None:
    if not np.isfinite(z) or z < 0:
        raise GeneratorError(f"Zipf exponent must be a finite number >= 0, got {z!r}")
    if int(n_values) != n_values or n_values < 1:
        raise GeneratorError(f"Zipf domain size K must be an integer >= 1, got {n_values!r}")
    if n_values > MAX_VALUES:
        raise GeneratorError(f"Zipf domain size K={n_values} exceeds the limit {MAX_VALUES}")


def zipf_pmf(z: float, n_values: int) -> np.ndarray:
    """p[k-1] proportional to k^-z for k = 1..n_values (z = 0 is uniform)."""
    _check(z, n_values)
    log_w = -float(z) * np.log(np.arange(1, int(n_values) + 1, dtype=np.float64))
    w = np.exp(log_w - log_w.max())  # rank 1 has the largest weight; no underflow to all-zero
    return w / w.sum()


@lru_cache(maxsize=16)
def _cdf(z: float, n_values: int) -> np.ndarray:
    cdf = np.cumsum(zipf_pmf(z, n_values))
    cdf[-1] = 1.0  # rounding must not leave a gap above the last value
    cdf.setflags(write=False)
    return cdf


def sample_zipf(rng: np.random.Generator, z: float, n_values: int, size: int) -> np.ndarray:
    """``size`` i.i.d. ranks in 1..n_values (int64) with P(k) = zipf_pmf(z, n_values)[k-1]."""
    _check(z, n_values)
    if size < 0:
        raise GeneratorError(f"sample size must be >= 0, got {size}")
    return zipf_ranks(rng.random(int(size)), z, n_values)


def zipf_ranks(u: np.ndarray, z: float, n_values: int) -> np.ndarray:
    """The ranks in 1..n_values (int64) of uniforms ``u`` in [0, 1), by inverse CDF."""
    _check(z, n_values)
    # first index whose cumulative probability exceeds u: P(rank k) = cdf[k-1] - cdf[k-2]
    idx = np.searchsorted(_cdf(float(z), int(n_values)), u, side="right")
    return np.minimum(idx, int(n_values) - 1).astype(np.int64) + 1
