"""Hot keys (the paper's getHotKeys) and the sub-list arithmetic of Tree-Join (Eqn. 1).

A key is hot when it has at least τ records, τ = (1+λ)^(3/2) (Ineq. 2; the paper's evaluation
uses "among the most popular 1000 keys, those that have 100 records or more", so the test is
``>=`` everywhere, also in isHotKey, instead of Alg. 8's ``>``). At most |κ|max keys are kept,
the most frequent first (ties broken by key, so the choice is deterministic).

Two ways to count, ``ctx.params["hot_key_method"]``:

- ``"exact"`` (default): a Spark aggregation (per-partition partial counts, merged by key) and a
  top-|κ|max. Exact frequencies make |κ|, the HH/HC/CH/CC sizes and the unraveling replication
  deterministic, which is what the reproduction compares.
- ``"space_saving"``: the paper's method — a Space-Saving summary [Metwally et al. 2005] per
  input partition, merged in a tree (``treeReduce``) into a summary bounded by
  ``hh_capacity`` counters (default 10 x |κ|max). The frequencies are estimates. Every
  algorithm here stays exact with approximate κ: Eqn. 4 holds for any κ_R, κ_S, and the
  unraveling is correct for any sub-list counts, since both sides read them from the same
  broadcast map.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from joins.declarations import Param


@dataclass(frozen=True)
class HotKeyParams:
    threshold: float = 100.0  # τ = (1+λ)^(3/2)
    max_keys: int = 1000  # |κ|max
    method: str = "exact"
    capacity: int | None = None  # Space-Saving counters per summary


# the hot-key parameters (AM-Join paper; also Full-SkewJoin's threshold), declared once
HOT_THRESHOLD = {
    "hot_threshold": Param(100, "τ: a key with at least this many records in a relation is hot"),
    "max_hot_keys": Param(1000, "|κ|max: at most this many hot keys per relation (the most "
                                "frequent)"),
}
HOT_KEY_PARAMS = {
    **HOT_THRESHOLD,
    "hot_key_method": Param("exact", "how hot keys are found: exact (a Spark count) or "
                                     "space_saving (the paper's heavy-hitter summary, estimated "
                                     "frequencies)"),
    "hh_capacity": Param(None, "counters of the Space-Saving summary "
                               "(hot_key_method=space_saving); none means 10 x max_hot_keys",
                         int | None),
}


def hot_params(params: Mapping[str, Any]) -> HotKeyParams:
    """Read τ, |κ|max and the counting method from ``ctx.params``."""
    p = HotKeyParams(
        threshold=float(params.get("hot_threshold", 100)),
        max_keys=int(params.get("max_hot_keys", 1000)),
        method=str(params.get("hot_key_method", "exact")),
        capacity=params.get("hh_capacity"),
    )
    if p.threshold <= 1:
        # with τ <= 1 a pair of one-record lists stays "hot" and Tree-Join would never stop
        raise ValueError(f"hot_threshold must be > 1, got {p.threshold}")
    if p.method not in ("exact", "space_saving"):
        raise ValueError(f"hot_key_method must be 'exact' or 'space_saving', got {p.method!r}")
    return p


def sublists(n: int) -> int:
    """δ(ℓ) = ⌈ℓ^(1/3)⌉ (Eqn. 1), in exact integer arithmetic (27 -> 3, not 4)."""
    if n <= 1:
        return 1
    d = round(n ** (1.0 / 3.0))
    while d**3 < n:
        d += 1
    while d > 1 and (d - 1) ** 3 >= n:
        d -= 1
    return d


def sublist_length(n: int) -> int:
    """Records per sub-list: ⌈ℓ/δ⌉.

    Alg. 5 writes ⌈ℓ^(2/3)⌉; its worked example uses ⌈10^5/47⌉ = 2128, i.e. ⌈ℓ/δ⌉. We use ⌈ℓ/δ⌉:
    it always yields δ non-empty sub-lists, while ⌈ℓ^(2/3)⌉ can leave the last one empty (ℓ = 3
    gives [3], [] and the list would be chunked forever).
    """
    return -(-n // sublists(n)) if n > 0 else 0


def sublists_col(n: Column) -> Column:
    """:func:`sublists` as a Spark expression (round(cbrt) corrected to the exact ceiling)."""
    r = F.round(F.cbrt(n.cast("double"))).cast("long")
    d = F.when(r * r * r < n, r + 1).otherwise(r)
    return F.when(n <= 1, F.lit(1).cast("long")).otherwise(d)


def sublist_length_col(n: Column) -> Column:
    """:func:`sublist_length` as a Spark expression."""
    return F.ceil(n.cast("double") / sublists_col(n)).cast("long")


def is_hot_col(n1: Column, n2: Column, threshold: float) -> Column:
    """isHotKey (Alg. 8): the effective length sqrt(ℓ1·ℓ2) is at least τ."""
    return (n1.cast("double") * n2.cast("double")) >= float(threshold) ** 2


def max_iterations_bound(l_max: float, threshold: float) -> float:
    """Ineq. 3: t < log_{3/2}(log_{1+λ}(ℓ_max)) - 1 with (1+λ) = τ^(2/3)."""
    base = threshold ** (2.0 / 3.0)
    if l_max <= 1 or base <= 1:
        return 0.0
    inner = math.log(l_max) / math.log(base)
    return math.log(inner) / math.log(1.5) - 1 if inner > 0 else 0.0


# ---------------------------------------------------------------------------------- collection


def key_counts(df: DataFrame, on: str, tasks: int | None = None,
               within: str | None = None) -> DataFrame:
    """Records per non-null key (per value of ``within`` if given), column ``n``.

    Null keys never match, so they are never hot. With ``tasks``, the counting pass and the
    counts run as ``tasks`` tasks (one wave on E executors), as in :func:`get_hot_keys_of`.
    """
    cols = [within, on] if within else [on]
    keys = df.where(F.col(on).isNotNull())
    if tasks:
        keys = keys.coalesce(int(tasks))
    counts = keys.groupBy(*cols).agg(F.count(F.lit(1)).alias("n"))
    return counts.coalesce(int(tasks)) if tasks else counts


def top_hot_keys(counts: DataFrame, on: str, params: HotKeyParams) -> dict[Hashable, int]:
    """The top-|κ|max keys of a :func:`key_counts` frame with at least τ records."""
    candidates = counts.where(F.col("n") >= params.threshold).select(
        F.lit(0).alias("_side"), F.col(on), "n")
    return _top_per_side(candidates, 1, params.max_keys, params.threshold)[0]


def top_of_counts(counts: Iterable[tuple[Hashable, int]], threshold: float,
                  max_keys: int) -> dict[Hashable, int]:
    """Exact κ from (key, records) pairs: the top ``max_keys`` keys with >= τ records, most
    frequent first, ties by key. The exact method's rule: :func:`top_hot_keys` and
    :func:`get_hot_keys_of` merge their per-partition tops with it, and code that models an
    algorithm from key counts without Spark (``experiments.budget_sensitivity``) calls it too."""
    if max_keys <= 0:
        return {}
    return dict(heapq.nsmallest(max_keys, ((k, int(n)) for k, n in counts if n >= threshold),
                                key=_rank))


def _top_per_side(candidates: DataFrame, sides: int, max_keys: int,
                  threshold: float) -> list[dict[Hashable, int]]:
    """Top-``max_keys`` of (side, key, n) rows per side (n >= ``threshold``): a local top per
    partition, merged here by :func:`top_of_counts`.

    One pass over the candidates, no sort shuffle; most frequent first, ties by key.
    """
    if max_keys <= 0:
        return [{} for _ in range(sides)]
    _ship_by_value()

    def local_top(rows):
        by_side: dict[int, list[tuple[Hashable, int]]] = {}
        for side, key, n in rows:
            by_side.setdefault(side, []).append((key, n))
        for side, items in by_side.items():
            for key, n in heapq.nsmallest(max_keys, items, key=_rank):
                yield side, key, n

    found: list[list[tuple[Hashable, int]]] = [[] for _ in range(sides)]
    for side, key, n in candidates.rdd.mapPartitions(local_top).collect():
        found[side].append((key, int(n)))
    return [top_of_counts(items, threshold, max_keys) for items in found]


def get_hot_keys(df: DataFrame, on: str, params: HotKeyParams,
                 tasks: int | None = None) -> dict[Hashable, int]:
    """κ: the top-|κ|max keys of ``df`` with at least τ records -> their (estimated) frequency."""
    return get_hot_keys_of([df], on, params, tasks)[0]


def get_hot_keys_of(frames: Sequence[DataFrame], on: str, params: HotKeyParams,
                    tasks: int | None = None) -> list[dict[Hashable, int]]:
    """κ of each frame (AM-Join's κ_R and κ_S), counted independently but in one Spark job.

    Counting is one cheap pass per record, so with ``tasks`` (the executor count) it runs as one
    wave of ``tasks`` tasks instead of one task per input partition and per shuffle partition:
    under the calibrated per-task cost the hot-key pass then costs a small fraction of the join
    it prepares, as in the paper. The exact method returns the same κ either way.
    """
    if params.max_keys <= 0:
        return [{} for _ in frames]
    if params.method == "space_saving":
        return [_space_saving_hot_keys(df, on, params, tasks) for df in frames]
    types = {df.schema[on].dataType for df in frames}
    if len(types) > 1:  # a union would coerce the keys to one type: count each frame alone
        return [get_hot_keys(df, on, params, tasks) for df in frames]
    return _exact_hot_keys(frames, on, params, tasks)


def _exact_hot_keys(frames: Sequence[DataFrame], on: str, params: HotKeyParams,
                    tasks: int | None) -> list[dict[Hashable, int]]:
    if len(frames) == 2:  # κ_R and κ_S: the one aggregation AM-Join also takes its sizes from
        return list(hot_keys_and_sizes(frames[0], frames[1], on, params, tasks).hot)
    keys = None
    for i, df in enumerate(frames):
        part = df.select(F.lit(i).alias("_side"), F.col(on).alias("_key"))
        keys = part if keys is None else keys.union(part)
    candidates = key_counts(keys, "_key", tasks, within="_side").where(F.col("n") >= params.threshold)
    return _top_per_side(candidates, len(frames), params.max_keys, params.threshold)


@dataclass(frozen=True)
class HotKeySizes:
    """κ_R and κ_S with each hot key's records on both sides and the relations' sizes: enough
    for the exact sizes of AM-Join's HH/HC/CH/CC sub-relations without a pass of their own."""

    hot: tuple[dict[Hashable, int], dict[Hashable, int]]  # κ_R, κ_S: key -> own records
    other: tuple[dict[Hashable, int], dict[Hashable, int]]  # κ_R's keys -> S records; κ_S's -> R
    totals: tuple[int, int]  # |R|, |S|, null keys included

    def split_sizes(self, side: int) -> dict[str, int]:
        """Records of relation ``side`` (0 = R) in each sub-relation (own side, other side)."""
        own, oth = self.hot[side], self.hot[1 - side]
        hh = sum(n for k, n in own.items() if k in oth)
        hc = sum(n for k, n in own.items() if k not in oth)
        ch = sum(self.other[1 - side][k] for k in oth if k not in own)
        return {"hh": hh, "hc": hc, "ch": ch, "cc": self.totals[side] - hh - hc - ch}


def hot_keys_and_sizes(left: DataFrame, right: DataFrame, on: str, params: HotKeyParams,
                       tasks: int | None = None) -> HotKeySizes:
    """κ_R and κ_S by the exact method in the one job of :func:`get_hot_keys_of`, counting each
    key's records on both sides at once: the top per side also carries a hot key's records on
    the other side, and every partition its totals (Arrow batches, no per-key Python loop)."""
    if params.method != "exact" or params.max_keys <= 0:
        raise ValueError("hot_keys_and_sizes needs the exact method and |κ|max > 0")
    keys = left.select(F.col(on).alias("_key"), F.lit(1).alias("_r")).union(
        right.select(F.col(on).alias("_key"), F.lit(0).alias("_r")))
    if tasks:
        keys = keys.coalesce(int(tasks))
    counts = keys.groupBy("_key").agg(F.sum("_r").cast("long").alias("n0"),
                                      F.count(F.lit(1)).alias("n"))
    if tasks:
        counts = counts.coalesce(int(tasks))
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    schema = StructType([StructField("side", IntegerType(), False),
                         StructField("key", counts.schema["_key"].dataType, True),
                         StructField("n", LongType(), False),
                         StructField("other", LongType(), False)])
    _ship_by_value()
    tops = counts.mapInArrow(_arrow_tops(float(params.threshold), int(params.max_keys)), schema)
    found: list[list[tuple[Hashable, int]]] = [[], []]
    other: list[dict[Hashable, int]] = [{}, {}]
    totals = [0, 0]
    for side, key, n, oth in tops.collect():
        if side < 0:
            totals[0] += int(n)
            totals[1] += int(oth)
            continue
        found[side].append((key, int(n)))
        other[side][key] = int(oth)
    hot = [top_of_counts(items, params.threshold, params.max_keys) for items in found]
    return HotKeySizes(hot=(hot[0], hot[1]),
                       other=tuple({k: other[s][k] for k in hot[s]} for s in (0, 1)),
                       totals=(totals[0], totals[1]))


def _arrow_tops(threshold: float, max_keys: int):
    """Per partition of (key, n0, n) counts: each side's local top (with the other side's
    records) and one totals row (side -1)."""

    def run(batches):
        import pyarrow as pa
        import pyarrow.compute as pc

        tot0 = tot = 0
        cand: list[list[tuple]] = [[], []]
        key_type = None
        for b in batches:
            key, n0, n = b.column("_key"), b.column("n0"), b.column("n")
            key_type = key.type
            n1 = pc.subtract(n, n0)
            tot0 += pc.sum(n0).as_py() or 0
            tot += pc.sum(n).as_py() or 0
            for side, own, oth in ((0, n0, n1), (1, n1, n0)):
                m = pc.and_(pc.is_valid(key), pc.greater_equal(own, threshold))
                if pc.any(m).as_py():
                    cand[side] += zip(pc.filter(key, m).to_pylist(),
                                      pc.filter(own, m).to_pylist(),
                                      pc.filter(oth, m).to_pylist(), strict=True)
        rows = [(side, k, n_own, n_oth) for side in (0, 1)
                for k, n_own, n_oth in heapq.nsmallest(max_keys, cand[side],
                                                       key=lambda t: _rank(t[:2]))]
        rows.append((-1, None, tot0, tot - tot0))
        if key_type is None:
            return
        yield pa.RecordBatch.from_arrays(
            [pa.array([r[0] for r in rows], pa.int32()), pa.array([r[1] for r in rows], key_type),
             pa.array([r[2] for r in rows], pa.int64()), pa.array([r[3] for r in rows], pa.int64())],
            names=["side", "key", "n", "other"])

    return run


def _rank(item: tuple[Hashable, int]) -> tuple:
    """Most frequent first, ties by key (NaN last, as Spark orders it)."""
    key, n = item
    nan = isinstance(key, float) and math.isnan(key)
    return (-n, nan, 0.0 if nan else key)


def _ship_by_value() -> None:
    """Ship this module's functions by value, so executors need not have the project installed."""
    import sys

    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])


def space_saving(keys: Iterable[Hashable], capacity: int) -> dict[Hashable, int]:
    """Space-Saving over one stream: at most ``capacity`` counters, each an over-estimate.

    A new key, when all counters are taken, replaces the key with the minimum counter and
    inherits that count + 1. The minimum is found with a lazy heap (stale entries are re-pushed).
    """
    counts: dict[Hashable, int] = {}
    heap: list[tuple[int, int, Hashable]] = []
    seq = itertools.count()
    for k in keys:
        if k is None:
            continue
        if k in counts:
            counts[k] += 1
            continue
        if len(counts) < capacity:
            counts[k] = 1
            heapq.heappush(heap, (1, next(seq), k))
            continue
        while True:
            c, _, victim = heap[0]
            if counts[victim] == c:
                break
            heapq.heapreplace(heap, (counts[victim], next(seq), victim))
        heapq.heappop(heap)
        del counts[victim]
        counts[k] = c + 1
        heapq.heappush(heap, (c + 1, next(seq), k))
    return counts


def merge_summaries(a: dict[Hashable, int], b: dict[Hashable, int],
                    capacity: int) -> dict[Hashable, int]:
    """Merge two summaries: add the counters, keep the ``capacity`` largest (bounded queue)."""
    merged = dict(a)
    for k, c in b.items():
        merged[k] = merged.get(k, 0) + c
    if len(merged) <= capacity:
        return merged
    top = heapq.nlargest(capacity, merged.items(), key=lambda kv: kv[1])
    return dict(top)


def _space_saving_hot_keys(df: DataFrame, on: str, params: HotKeyParams,
                           tasks: int | None = None) -> dict[Hashable, int]:
    _ship_by_value()
    capacity = int(params.capacity or 10 * params.max_keys)

    def local(rows):
        yield space_saving((r[0] for r in rows), capacity)

    keys = df.select(on)
    if tasks:
        keys = keys.coalesce(int(tasks))
    summary = (
        keys.rdd.mapPartitions(local)
        .treeReduce(lambda a, b: merge_summaries(a, b, capacity), depth=2)
    )
    hot = [(k, c) for k, c in summary.items() if c >= params.threshold]
    hot.sort(key=lambda kv: (-kv[1], str(kv[0])))
    return dict(hot[: params.max_keys])


def hot_keys_frame(spark, hot: Mapping[Hashable, Any], key_type, columns: dict[str, list],
                   key_name: str = "_hk") -> DataFrame:
    """A small DataFrame of hot keys (to broadcast) with extra long columns given per key."""
    from pyspark.sql.types import LongType, StructField, StructType

    keys = list(hot)
    schema = StructType([StructField(key_name, key_type, False)]
                        + [StructField(c, LongType(), False) for c in columns])
    rows = [(k, *[int(columns[c][i]) for c in columns]) for i, k in enumerate(keys)]
    # one slice: broadcasting it runs one task, not one per default-parallelism slice
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, 1), schema)
