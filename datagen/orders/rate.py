"""Arrival by a rate schedule: tuples per second per stream, piecewise constant (BiStream).

``times`` are the segment starts in seconds (first 0); ``rate_r[j]``/``rate_s[j]`` hold from
``times[j]`` to the next start (the last one until the stream ends; 0 pauses a stream). Each
stream's i-th tuple arrives at Lambda^-1(x_i), Lambda being its cumulative rate: x_i = i for
``process=constant`` (exactly the rate, first tuple at t=0) or x_i = a sum of i+1 unit
exponentials for ``process=poisson`` (a non-homogeneous Poisson process by time rescaling).
The arrival order is the time-ordered merge of both streams; ties go to R first.
"""

from __future__ import annotations

import numpy as np

from datagen.errors import GeneratorError
from datagen.orders import Arrival

NAME = "rate"  # the order's name in order= (found by datagen.orders.discover)

PROCESSES = ("constant", "poisson")


def _check_schedule(times: np.ndarray, rates: np.ndarray, name: str, n: int) -> None:
    if len(rates) != len(times):
        raise GeneratorError(f"{name} needs one rate per entry of times ({len(times)}), "
                             f"got {len(rates)}")
    if np.any(rates < 0) or not np.all(np.isfinite(rates)):
        raise GeneratorError(f"{name} rates must be finite and >= 0")
    if n and rates[-1] <= 0:
        raise GeneratorError(f"the last rate of {name} must be > 0 so the stream can finish")


def inverse_cumulative(times: np.ndarray, rates: np.ndarray, x: np.ndarray) -> np.ndarray:
    """t with Lambda(t) = x for the piecewise-linear cumulative rate Lambda (0 at t=0)."""
    lam = np.concatenate([[0.0], np.cumsum(rates[:-1] * np.diff(times))])
    j = np.searchsorted(lam, x, side="right") - 1  # a pause (rate 0) is skipped over
    return times[j] + (x - lam[j]) / rates[j]


def rate_schedule(n_r: int, n_s: int, rng: np.random.Generator, *,
                  times: tuple[float, ...] = (0.0,), rate_r: tuple[float, ...] = (1000.0,),
                  rate_s: tuple[float, ...] = (1000.0,), process: str = "constant") -> Arrival:
    t = np.asarray(times, dtype=np.float64)
    if len(t) == 0 or t[0] != 0 or np.any(np.diff(t) <= 0):
        raise GeneratorError(f"times must start at 0 and increase, got {list(times)}")
    if process not in PROCESSES:
        raise GeneratorError(f"unknown process {process!r}; valid: {', '.join(PROCESSES)}")
    stamps = []
    for name, rates, n in (("rate_r", rate_r, n_r), ("rate_s", rate_s, n_s)):
        r = np.asarray(rates, dtype=np.float64)
        _check_schedule(t, r, name, n)
        x = np.arange(n, dtype=np.float64) if process == "constant" else np.cumsum(
            rng.exponential(1.0, n))
        stamps.append(inverse_cumulative(t, r, x) if n else np.zeros(0))
    when = np.concatenate(stamps)
    side = np.concatenate([np.zeros(n_r, dtype=np.int8), np.ones(n_s, dtype=np.int8)])
    idx = np.lexsort((side, when))  # by time, then R before S
    return Arrival(side[idx] == 0, event_time=when[idx])


ORDER = rate_schedule
