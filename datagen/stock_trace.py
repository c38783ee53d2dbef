"""stock_trace: a synthetic intraday stock trace, the stand-in for the DINER paper's CSCO and
IPIX traces (Li, Chang, Kollios, Bestavros, ICDE 2006), which are not available here.

One day of ``trades`` trades, in time order. A mid price (in cents) starts at ``start_cents``
and takes a step of +1 or -1 cent with probability ``step_prob`` each per trade (a random walk:
prices drift and cluster locally, so the keys at either end of the memory's range go cold over
time, the property the paper's real traces give DINER). Each trade executes at the mid price
plus a rounded Normal(0, ``noise_cents``) noise. Exactly half of the trades (chosen at random)
are buys (relation R), the others sells (S), as the paper splits its traces; each relation
keeps the trace's order, with exponential arrival gaps of rate ``lam`` (the paper's lambda =
0.1) and the network delays of :mod:`datagen.arrival_times` (``fragments``: Fig 17). Join
key: the price in cents (``key``, int64); the paper's band join "price difference smaller
than 5 cents" is a band of 4 cents on it.

The parameters are fixed before any DINER result was seen and are not tuned to the paper's
Table 4 (a stand-in tuned to the real traces' percentages would prove nothing): one cent steps
at one trade in ten in each direction, one cent of execution noise. CSCO's trace has 20,710
trades and IPIX's 45,568 (the paper's counts); ``seed`` tells the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from datagen.arrival_times import arrival_times, check_delays
from datagen.chunks import write_part
from datagen.params import check

NAME = "stock_trace"


@dataclass(frozen=True)
class Params:
    trades: int = 20_710  # CSCO's count (IPIX: 45,568)
    start_cents: int = 2000
    step_prob: float = 0.1  # per direction, per trade
    noise_cents: float = 1.0
    lam: float = 0.1  # arrivals per time unit, per relation
    fragments: int = 0  # network delays (datagen.arrival_times), Fig 17: pause after each
    fragment_delay: float = 0.0  # fragment, this share of the fragment's duration
    seed: int = 0

    def __post_init__(self) -> None:
        check_delays((), self.fragments, self.fragment_delay)
        check(self.trades >= 0, f"trades must be >= 0, got {self.trades}")
        check(0 <= self.step_prob <= 0.5, f"step_prob must be in [0, 0.5], got {self.step_prob}")
        check(self.noise_cents >= 0 and self.lam > 0, "noise_cents must be >= 0 and lam > 0")


def prices(p: Params, rng: np.random.Generator) -> np.ndarray:
    """The trades' prices in cents, in time order."""
    u = rng.random(p.trades)
    steps = np.where(u < p.step_prob, 1, np.where(u < 2 * p.step_prob, -1, 0))
    mid = p.start_cents + np.cumsum(steps)
    noise = np.rint(rng.normal(0.0, p.noise_cents, p.trades)) if p.noise_cents else 0
    return (mid + noise).astype(np.int64)


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    p = Params(**params)
    rng = np.random.default_rng([p.seed, 0])
    price = prices(p, rng)
    is_buy = np.zeros(p.trades, bool)
    is_buy[rng.choice(p.trades, p.trades // 2, replace=False)] = True
    rows = {}
    for i, (name, side) in enumerate((("R", is_buy), ("S", ~is_buy))):
        keys = price[side]
        t = arrival_times(len(keys), p.lam, np.random.default_rng([p.seed, i + 1]),
                          fragments=p.fragments, fragment_delay=p.fragment_delay)
        table = pa.table({"key": keys, "t": t, "rid": np.arange(len(keys), dtype=np.int64)})
        rows[name] = write_part(table, Path(out) / f"{name}.parquet", 0)  # atomic
    return rows
