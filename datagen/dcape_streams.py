"""dcape_streams: the D-CAPE paper's timed input streams (section 3.4 and the experiments):
``inputs`` streams (A, B, C for its 3-way join) joined on one attribute ``key``.

The paper defines a stream by its *tuple range* R (distinct join values) and its *range join
ratio* r (the results one tuple is expected to produce within one range of tuples: with R =
30K and r = 2, 4 in the first 30K tuples, 16 in the next). Read as the catalogue suggests
(section 4): every join value appears r times per stream per R tuples, so each stream draws
its keys uniformly from R / r values (the paper's Fig 12 says "a uniform distribution of join
column values"); a new tuple after n tuples per stream then meets about (n r / R)^2 results of
a 3-way join.

Keys are split into ``partitions`` (the paper's 300) by ``key mod partitions``; every partition
gets an equal share of each stream, and partition p owns round(R / partitions / r_p) of the
values (at least 1). ``ratios``: ``global`` (every partition ``join_ratio``), ``thirds`` (a
third of the partitions at 4, a third at 2, the rest at 1: Fig 11), ``hot`` (the first
``hot_share`` of the partitions, in partition order, at ``hot_ratio`` and the rest at
``join_ratio``: Fig 21's machine 1 at 4 with contiguous groups).

``alternating`` (Figs 14-16): the first half of the partitions (machine 1's, by their initial
assignment; the labels do not follow relocations) get ``alternate_factor`` times the tuples of
the second half for the first ``alternate_first`` minutes, then the reverse for the next
``alternate_period`` minutes, and so on; each stream's total rate stays the same.

Arrivals: one tuple per ``interarrival_ms`` on average per stream, for ``minutes``; ``poisson``
(exponential gaps, seeded) or ``constant`` spacing (the paper says "on average" and no more).
Tables ``A``, ``B``, ``C`` (``inputs`` of them): ``key`` (int64), ``t`` (arrival time in ms,
float64), ``rid`` (the tuple's number in its stream); ``query.json`` names the inputs and the
edges (all on ``key``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from datagen.chunks import write_part
from datagen.params import check

NAME = "dcape_streams"
MINUTE_MS = 60_000.0


@dataclass(frozen=True)
class Params:
    inputs: int = 3
    minutes: float = 40.0
    interarrival_ms: float = 20.0
    arrivals: str = "poisson"
    tuple_range: int = 30_000
    join_ratio: float = 1.0
    partitions: int = 300
    ratios: str = "global"
    hot_share: float = 1 / 3
    hot_ratio: float = 4.0
    alternating: bool = False
    alternate_factor: float = 10.0
    alternate_first: float = 5.0
    alternate_period: float = 10.0
    seed: int = 0

    def __post_init__(self) -> None:
        check(2 <= self.inputs <= 26, "inputs must be in 2..26")
        check(self.minutes > 0 and self.interarrival_ms > 0,
              "minutes and interarrival_ms must be > 0")
        check(self.arrivals in ("poisson", "constant"), "arrivals must be poisson or constant")
        check(self.tuple_range >= self.partitions >= 1,
              "need tuple_range >= partitions >= 1")
        check(self.join_ratio > 0 and self.hot_ratio > 0, "join ratios must be > 0")
        check(self.ratios in ("global", "thirds", "hot"), "ratios: global, thirds or hot")
        check(0 <= self.hot_share <= 1, "hot_share must be in [0, 1]")
        check(self.alternate_factor > 0 and self.alternate_first > 0 and
              self.alternate_period > 0, "the alternating load's settings must be > 0")


def partition_ratios(p: Params) -> np.ndarray:
    """The range join ratio of every partition."""
    r = np.full(p.partitions, float(p.join_ratio))
    if p.ratios == "thirds":
        third = p.partitions // 3
        r[:third], r[third:2 * third], r[2 * third:] = 4.0, 2.0, 1.0
    elif p.ratios == "hot":
        r[:int(round(p.hot_share * p.partitions))] = p.hot_ratio
    return r


def values_per_partition(p: Params) -> np.ndarray:
    """Distinct join values each partition owns: its share of the range over its ratio."""
    return np.maximum(1, np.rint(p.tuple_range / p.partitions / partition_ratios(p))).astype(
        np.int64)


def phase_of(p: Params, t_ms: np.ndarray) -> np.ndarray:
    """The alternating load's phase at each time: 0 for the first minutes, then 1, 2, ...
    (even phases load machine 1's partitions, odd ones machine 2's)."""
    minutes = t_ms / MINUTE_MS
    later = np.floor((minutes - p.alternate_first) / p.alternate_period).astype(np.int64) + 1
    return np.where(minutes < p.alternate_first, 0, later)


def _times(p: Params, rng: np.random.Generator) -> np.ndarray:
    span = p.minutes * MINUTE_MS
    n = int(span / p.interarrival_ms)
    if p.arrivals == "constant":
        return (np.arange(n) + 1) * p.interarrival_ms
    # a Poisson process over the whole span: enough gaps that their sum passes the span (n
    # gaps alone fall short half the time, which would leave the last minute part-empty)
    t = np.cumsum(rng.exponential(p.interarrival_ms, n + int(10 * np.sqrt(n)) + 20))
    while t[-1] <= span:
        t = np.concatenate([t, t[-1] + np.cumsum(rng.exponential(p.interarrival_ms, n + 20))])
    return t[t <= span]


def _partitions(p: Params, rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    if not p.alternating:
        return rng.integers(0, p.partitions, len(t))
    half = p.partitions // 2
    first = rng.integers(0, half, len(t))  # machine 1's partitions
    second = rng.integers(half, p.partitions, len(t))
    share = p.alternate_factor / (p.alternate_factor + 1)  # of the loaded machine
    loaded = rng.random(len(t)) < share
    on_first = np.where(phase_of(p, t) % 2 == 0, loaded, ~loaded)
    return np.where(on_first, first, second)


def generate(params: dict, out: Path, spark=None, progress: bool = False) -> dict[str, int]:
    p = Params(**params)
    values = values_per_partition(p)
    names = [chr(ord("A") + i) for i in range(p.inputs)]
    rows = {}
    for i, name in enumerate(names):
        rng = np.random.default_rng([p.seed, i])
        t = _times(p, rng)
        pid = _partitions(p, rng, t)
        j = (rng.random(len(t)) * values[pid]).astype(np.int64)  # uniform over its values
        key = pid + p.partitions * j
        table = pa.table({"key": key, "t": t, "rid": np.arange(len(t), dtype=np.int64)})
        rows[name] = write_part(table, Path(out) / f"{name}.parquet", 0)
    edges = [f"{a}.key={b}.key" for a, b in zip(names[:-1], names[1:], strict=True)]
    (Path(out) / "query.json").write_text(json.dumps({"inputs": names, "edges": edges}))
    return rows
