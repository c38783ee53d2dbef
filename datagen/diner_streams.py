"""diner_streams: two relations R and S of timed arrivals, the DINER paper's synthetic inputs.

Each relation has ``n_r`` (``n_s``) tuples with a join key and an arrival time: exponential
gaps of rate ``lam`` per time unit (the paper's lambda = 0.1), so the two relations arrive
interleaved in time. Keys: ``zipf`` on the integers [1, ``domain``] with exponent ``s`` (value
1 the most frequent; s = 0 is uniform; the paper: [1, 999], s = 1..5), or ``normal`` with ``mean`` and
``variance`` rounded to integers (S's mean and variance are R's plus ``mean_shift`` and
``variance_shift``: the paper's Figs 11-12); with ``periods`` > 1 each successive share
1/periods of a relation's tuples has its mean moved by ``period_shift`` more than the last
(period i, from ``first_period``: mean + i * period_shift; the non-stationary Fig 15); Zipf
keys drift the same way: in period i the value of Zipf rank j is rank j moved by i *
``period_shift`` (rounded), cyclically on [1, ``domain``], so the most frequent value moves.
``pauses`` inserts silent periods: a list of [fraction of the stream, length] applied to both
relations. ``fragments`` > 0 cuts each relation into that many fragments of equal size and,
after each but the last, pauses for ``fragment_delay`` times the fragment's own transmission
time, each relation on its own clock (the delays of Figs 16, 17, 19 and Table 3). ``order``
names an arrival order of :mod:`datagen.orders` (with ``order_params``) whose within-relation
orders rearrange the keys over the arrival times (e.g. ``intervals``: Fig 14's partially
sorted streams). ``order_times``: the order's interleave gives the event times as well (e.g.
``fluct``: Squall's Fluct-join, the cardinality ratio alternating between k and 1/k in event
time): one merged stream of exponential gaps at rate ``lam * (n_r + n_s) / max(n_r, n_s)``
(two equal relations: 2 lam, the same span as the relations' own clocks), its i-th arrival
the order's i-th, from R or S as the order says; without pauses or fragments.

Tables ``R`` and ``S``: ``key`` (int64), ``t`` (float64 arrival time), ``rid`` (the tuple's
number in its relation). The paper's sizes (2 x 100K tuples) are small: generated on the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from datagen.arrival_times import arrival_times, check_delays
from datagen.chunks import write_part
from datagen.orders import compute_arrival
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
    periods: int = 1  # normal keys: the mean drifts over successive shares of the tuples
    period_shift: float = 0.0
    first_period: int = 0
    pauses: list = field(default_factory=list)  # [[fraction, length], ...]
    fragments: int = 0  # delays: pause after each fragment, a share of its duration
    fragment_delay: float = 0.0
    order: str | None = None  # an order of datagen.orders (its within-relation orders)
    order_params: dict = field(default_factory=dict)
    order_times: bool = False  # the order's interleave gives the event times (one clock)
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.n_r >= 0 and self.n_s >= 0, "n_r and n_s must be >= 0")
        check(self.keys in ("zipf", "normal"), f"keys must be zipf or normal, got {self.keys!r}")
        check(self.s >= 0 and self.domain >= 1, "s must be >= 0 and domain >= 1")
        check(self.variance > 0 and self.variance + self.variance_shift > 0,
              "variances must be > 0")
        check(self.lam > 0, f"lam must be > 0, got {self.lam}")
        check(self.periods >= 1, f"periods must be >= 1, got {self.periods}")
        check_delays(self.pauses, self.fragments, self.fragment_delay)
        check(not self.order_times or self.order is not None,
              "order_times needs an order (order=...)")
        check(not self.order_times or not (self.pauses or self.fragments),
              "order_times takes no pauses or fragments (one merged clock)")


def _keys(p: Params, rng: np.random.Generator, n: int, shift: float, vshift: float):
    period = np.arange(n) * p.periods // max(n, 1) + p.first_period  # 0 .. periods - 1
    if p.keys == "zipf":
        pmf = np.arange(1, p.domain + 1, dtype=float) ** -p.s
        rank = rng.choice(p.domain, size=n, p=pmf / pmf.sum()).astype(np.int64)
        if p.periods > 1:  # the drift: rank j's value moves by period_shift a period
            rank = (rank + np.rint(period * p.period_shift).astype(np.int64)) % p.domain
        return rank + 1
    sd = np.sqrt(p.variance + vshift)
    mean = p.mean + shift + period * p.period_shift
    return np.rint(rng.normal(mean, sd, n)).astype(np.int64)


def _times(p: Params, rng: np.random.Generator, n: int) -> np.ndarray:
    return arrival_times(n, p.lam, rng, p.pauses, p.fragments, p.fragment_delay)


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    p = Params(**params)
    keys, times = {}, {}
    for i, (name, n, shift, vshift) in enumerate((("R", p.n_r, 0.0, 0.0),
                                                 ("S", p.n_s, p.mean_shift, p.variance_shift))):
        rng = np.random.default_rng([p.seed, i])
        keys[name], times[name] = _keys(p, rng, n, shift, vshift), _times(p, rng, n)
    if p.order is not None:  # the order's within-relation orders over the arrival times
        arrival = compute_arrival(p.order, p.n_r, p.n_s, p.seed, keys_r=keys["R"],
                                  keys_s=keys["S"], **p.order_params)
        for name, perm in (("R", arrival.perm_r), ("S", arrival.perm_s)):
            if perm is not None:
                keys[name] = keys[name][perm]
        if p.order_times:  # one clock: the i-th arrival of the order at the i-th time
            n = p.n_r + p.n_s
            rate = p.lam * n / max(p.n_r, p.n_s, 1)
            clock = np.cumsum(np.random.default_rng([p.seed, 2]).exponential(1.0 / rate, n))
            times = {"R": clock[arrival.is_r], "S": clock[~arrival.is_r]}
    rows = {}
    for name in ("R", "S"):
        table = pa.table({"key": keys[name], "t": times[name],
                          "rid": np.arange(len(keys[name]), dtype=np.int64)})
        rows[name] = write_part(table, Path(out) / f"{name}.parquet", 0)  # atomic
    return rows
