"""Tree-Join (AM-Join paper, Alg. 1-8): join keys hot in both relations over several stages.

The *joined index* is a DataFrame of entries ``(_k, _t, _L1, _L2, _self)``: a key, a path tag
(which sub-list pair of which parent the entry is), the key's record list from R and from S
(``array<struct>``), and whether the entry is a same-attribute self-join list (then ``_L2`` is
empty and the pairs are the upper triangle of ``_L1``). Each *iteration* (Alg. 3) splits the
persisted index locally into cold entries, whose record pairs are output, and hot entries
(isHotKey: sqrt(ℓ1·ℓ2) >= τ), which the task acting as *splitter* chunks into δ = ⌈ℓ^(1/3)⌉
sub-lists per list (Eqn. 1) and emits as all pairs of sub-lists: the next index, randomly
reshuffled over the partitions (randomShuffle). The loop ends when the index is empty.

- ``tree_join_basic`` (Alg. 1): the initial index groups every key on one task.
- ``tree_join`` (Alg. 6, 7): hot keys are collected per relation (:mod:`hot_keys`); κ_RS (keys hot
  in both, with their two frequencies and sub-list counts) is broadcast; records of those keys are
  *unraveled*: each gets a random own sub-list id and is replicated once per sub-list of the other
  side under the augmented key <k, R-sub-list, S-sub-list>, so no task ever holds a whole hot key.

Written with the DataFrame API (groupBy/collect_list = buildJoinedIndex, explode = map), so
Spark's SQL metrics count records per task. Outer joins (the paper's "straightforward
extensions") pad keys present on one side only; such keys are always cold (ℓ1·ℓ2 = 0).

Same-attribute self-join (``spec.self_join``, §Executing Same-Attribute Self-Joins): one relation,
κ_RS = κ_R, a single-list cold index whose pairs are the upper triangle, and for hot keys an
augmented key <k, min(a,b), max(a,b)> (a = own sub-list id). **Diagonal rule:** completeness rule
(a) says r-r is in Q exactly once, so the upper triangle includes the diagonal: a key with n
records yields n(n+1)/2 pairs. The cold-key sentence ("the first record is before the second")
would drop r-r; ``ctx.params["self_join_diagonal"] = False`` gives that reading (n(n-1)/2).

Determinism under task retry: the own sub-list id is a hash of the record, its position in its
input partition (``sublist_ids="position"``, default; deterministic for file scans and cached
inputs; ``"content"`` hashes the record only, retry-proof for any input but identical records then
share a sub-list), ``ctx.seed`` and the side. Lists are sorted (``array_sort``) before being
chunked, because ``collect_list`` order depends on shuffle fetch order; the random reshuffle
partitions by a hash of (key, path tag, seed, iteration). A recomputed task hence emits the same
rows. Each iteration's index is persisted (see :func:`amjoin_common.release_all`).

Failure rule (catalogue 5.2): an index entry's records (ℓ1 + ℓ2) are held by one task, so every
iteration checks its largest entry against ``ctx.memory_budget_bytes`` (``BudgetExceeded``).
For the Basic variant the first index holds whole key groups; for ``tree_join`` the hot keys of
κ_RS are never grouped whole.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType

from joins.api import BatchContext, JoinResult, JoinSpec
from joins.batch import amjoin_common as C
from joins.batch.hot_keys import (
    HOT_KEY_PARAMS,
    get_hot_keys_of,
    hot_keys_frame,
    hot_params,
    is_hot_col,
    max_iterations_bound,
    sublist_length_col,
    sublists,
    sublists_col,
)
from joins.batch.sql_conf import sql_conf
from joins.declarations import ALL_JOIN_TYPES, BatchAlgorithm, Param

_K, _T, _L1, _L2, _SELF = "_k", "_t", "_L1", "_L2", "_self"
_IDX = [_K, _T, _L1, _L2, _SELF]


@dataclass(frozen=True)
class TreeOptions:
    """Knobs of one Tree-Join run (from ``ctx`` and ``ctx.params``)."""

    threshold: float
    partitions: int
    seed: int
    how: str = "inner"
    self_join: bool = False
    diagonal: bool = True
    canonical_order: bool = True
    sublist_ids: str = "position"
    # every key of the inputs is in κ_RS (AM-Join's HH sub-relations): no cold index to build
    only_shared_hot: bool = False
    # tasks of the unraveling's and the chunking's map sides (None: one per input partition):
    # their per-record work is a projection and an explode, so one wave on E executors costs
    # far fewer task launches than one task per partition of every input
    map_tasks: int | None = None

    @staticmethod
    def of(ctx: BatchContext, how: str, self_join: bool) -> TreeOptions:
        p = ctx.params
        ids = str(p.get("sublist_ids", "position"))
        if ids not in ("position", "content"):
            raise ValueError(f"sublist_ids must be 'position' or 'content', got {ids!r}")
        return TreeOptions(
            threshold=hot_params(p).threshold,
            partitions=ctx.partitions,
            seed=ctx.seed,
            how=how,
            self_join=self_join,
            diagonal=bool(p.get("self_join_diagonal", True)),
            canonical_order=bool(p.get("canonical_order", True)),
            sublist_ids=ids,
            map_tasks=ctx.executors if bool(p.get("coalesce_maps", True)) else None,
        )


@dataclass
class TreeStats:
    """Exact counts of one run (reported in ``JoinResult.extra``)."""

    iterations: int = 0
    index_entries: int = 0
    max_group_records: int = 0
    # Ineq. 3's quantities: the effective length sqrt(ℓ1·ℓ2) of the longest pair of joined lists,
    # and the longest chain of chunkings of one key (treeJoin's unraveling at index build is a
    # chain's first)
    l_max: float = 0.0
    chunking_rounds: int = 0
    replicated_records: int = 0
    hot_keys_left: int = 0
    hot_keys_right: int = 0
    hot_keys_both: int = 0
    broadcast_bytes: float = 0.0
    entries_per_iteration: list[int] = field(default_factory=list)

    def extra(self, threshold: float) -> dict[str, float]:
        """The counts as result metrics; ``threshold`` is the run's hot threshold τ, which
        Ineq. 3's bound on the chunking rounds depends on."""
        out = {k: float(v) for k, v in self.__dict__.items() if not isinstance(v, list)}
        if self.chunking_rounds:
            # Ineq. 3 counts the rounds after the first (t < log_{3/2}(log_{1+λ} ℓ_max) - 1), so
            # all of them stay below log_{3/2}(log_{1+λ} ℓ_max)
            out["chunking_rounds_bound"] = max_iterations_bound(self.l_max, threshold) + 1
        for i, n in enumerate(self.entries_per_iteration, start=1):
            out[f"index_entries_it{i}"] = float(n)
        return out


# ------------------------------------------------------------------------- building the index


def build_joined_index(left: DataFrame, right: DataFrame, on: str, opts: TreeOptions) -> DataFrame:
    """buildJoinedIndex (Alg. 2): hash both relations by key, one entry <k, R-list, S-list> per key."""
    tagged_l = left.select(left[on].alias(_K), C.record(left).alias("_l"),
                           C.null_record(right).alias("_r"))
    tagged_r = right.select(right[on].alias(_K), C.null_record(left).alias("_l"),
                            C.record(right).alias("_r"))
    return (
        tagged_l.union(tagged_r)
        .repartition(opts.partitions, _K)
        .groupBy(_K)
        .agg(F.collect_list("_l").alias(_L1), F.collect_list("_r").alias(_L2))
        .select(_K, F.lit(0).cast("long").alias(_T), _L1, _L2, F.lit(False).alias(_SELF))
    )


def build_self_index(rel: DataFrame, on: str, opts: TreeOptions) -> DataFrame:
    """The single-list cold index of a same-attribute self-join: <k, list, [], self>."""
    return (
        rel.select(rel[on].alias(_K), C.record(rel).alias("_l"))
        .repartition(opts.partitions, _K)
        .groupBy(_K)
        .agg(F.collect_list("_l").alias(_L1))
        .select(_K, F.lit(0).cast("long").alias(_T), _L1, C.empty_records(rel).alias(_L2),
                F.lit(True).alias(_SELF))
    )


def _split_by_hot(df: DataFrame, on: str, hot: DataFrame) -> tuple[DataFrame, DataFrame]:
    """splitPartitionsLocally by membership in the broadcast hot-key map (no shuffle of df)."""
    j = df.join(F.broadcast(hot), df[on] == hot["_hk"], "left")
    hot_part = j.filter(F.col("_hk").isNotNull()).select(*[df[c] for c in df.columns], "_dl", "_dr")
    cold_part = j.filter(F.col("_hk").isNull()).select(*[df[c] for c in df.columns])
    return hot_part, cold_part


def _unraveled_tag(i: str, j: str) -> Column:
    """The tag of an unraveled sub-list entry: odd, so its chunks are told from those of a whole
    key (tag 0, even chunks) when counting chunking rounds per chain."""
    return F.xxhash64(i, j).bitwiseOR(F.lit(1))


def _chunk_tag(i: str, j: str) -> Column:
    """A sub-list pair's tag: a hash of its parent's tag and ids, keeping the parent's parity."""
    return (F.xxhash64(_T, i, j).bitwiseAND(F.lit(-2))).bitwiseOR(F.col(_T).bitwiseAND(F.lit(1)))


def _own_sublist(rec: Column, n_sublists: Column, side: int, opts: TreeOptions) -> Column:
    """getRandom({0..δ-1}) made reproducible: a hash of the record (and its position), seed, side."""
    parts = [rec, F.lit(opts.seed), F.lit(side)]
    if opts.sublist_ids == "position":
        parts.append(F.monotonically_increasing_id())
    return F.pmod(F.xxhash64(*parts), n_sublists)


def _map_side(df: DataFrame, opts: TreeOptions, shares: int = 1) -> DataFrame:
    """``df``'s partitions merged into ``map_tasks / shares`` map tasks (no shuffle). Placed
    above a projection that draws own ids by position, each input partition still computes its
    own rows with its own index; placed below an explode, so Spark does not collapse it into the
    shuffle's repartition that follows (a coalesce right under a repartition is dropped)."""
    if not opts.map_tasks:
        return df
    return df.coalesce(max(1, opts.map_tasks // shares))


def unraveled_index(left_hot: DataFrame, right_hot: DataFrame, on: str, left: DataFrame,
                    right: DataFrame, opts: TreeOptions) -> DataFrame:
    """unravel (Alg. 7) + buildJoinedIndex on augmented keys + stripKeyPadding (Alg. 6 l. 8-11).

    ``left_hot``/``right_hot`` carry ``_dl`` = δ of R's list and ``_dr`` = δ of S's list for the key.
    An R record with own id a is emitted as <k, a, j> for every j < δ_S; an S record with own id b
    as <k, i, b> for every i < δ_R; group <k, i, j> is R-sub-list i x S-sub-list j.
    """
    lcols = [left_hot[c] for c in left.columns]
    rcols = [right_hot[c] for c in right.columns]
    # the own id is drawn in its own projection, before the explode: Spark evaluates the other
    # expressions of a generator's select once per *output* row
    ul = _map_side(left_hot.select(
        left_hot[on].alias(_K), _own_sublist(F.struct(*lcols), F.col("_dl"), 0, opts).alias("_i"),
        "_dr", F.struct(*lcols).alias("_l"),
    ), opts, 2).select(_K, "_i", F.explode(F.sequence(F.lit(0).cast("long"), F.col("_dr") - 1)).alias("_j"),
             "_l", C.null_record(right).alias("_r"))
    ur = _map_side(right_hot.select(
        right_hot[on].alias(_K), _own_sublist(F.struct(*rcols), F.col("_dr"), 1, opts).alias("_j"),
        "_dl", F.struct(*rcols).alias("_r"),
    ), opts, 2).select(_K, F.explode(F.sequence(F.lit(0).cast("long"), F.col("_dl") - 1)).alias("_i"),
             "_j", C.null_record(left).alias("_l"), "_r")
    return (
        ul.union(ur.select(_K, "_i", "_j", "_l", "_r"))
        .repartition(opts.partitions, _K, "_i", "_j")
        .groupBy(_K, "_i", "_j")
        .agg(F.collect_list("_l").alias(_L1), F.collect_list("_r").alias(_L2))
        .select(_K, _unraveled_tag("_i", "_j").alias(_T), _L1, _L2, F.lit(False).alias(_SELF))
    )


def unraveled_self_index(rel_hot: DataFrame, on: str, rel: DataFrame,
                         opts: TreeOptions) -> DataFrame:
    """Self-join unraveling: a record with own id a goes to <k, min(a,b), max(a,b)> for b < δ.

    It joins the L1 side of its group when a is the smaller id, else the L2 side; <k, a, a> is a
    single-list (self) entry. Each record is replicated δ times instead of δ_R + δ_S.
    """
    cols = [rel_hot[c] for c in rel.columns]
    own = _own_sublist(F.struct(*cols), F.col("_dl"), 0, opts)
    u = _map_side(rel_hot.select(rel_hot[on].alias(_K), own.alias("_a"), "_dl",
                                 F.struct(*cols).alias("_rec")), opts)
    u = u.select(_K, "_a", F.explode(F.sequence(F.lit(0).cast("long"), F.col("_dl") - 1)).alias("_b"),
                 "_rec")
    u = u.select(_K, F.least("_a", "_b").alias("_i"), F.greatest("_a", "_b").alias("_j"),
                 F.when(F.col("_a") <= F.col("_b"), F.col("_rec")).alias("_l"),
                 F.when(F.col("_a") > F.col("_b"), F.col("_rec")).alias("_r"))
    return (
        u.repartition(opts.partitions, _K, "_i", "_j")
        .groupBy(_K, "_i", "_j")
        .agg(F.collect_list("_l").alias(_L1), F.collect_list("_r").alias(_L2))
        .select(_K, _unraveled_tag("_i", "_j").alias(_T), _L1, _L2,
                (F.col("_i") == F.col("_j")).alias(_SELF))
    )


# ------------------------------------------------------------------------------- iterations


def _len1() -> Column:
    return F.size(_L1)


def _len2() -> Column:
    return F.when(F.col(_SELF), F.size(_L1)).otherwise(F.size(_L2))


def held_records(len1, len2):
    """Records one task holds for an index entry with lists of ``len1`` and ``len2`` records
    (a self entry holds its one list: ``len2`` = 0). Spark columns or numbers alike."""
    return len1 + len2


def key_group_bytes(held: float, record_bytes: float) -> float:
    """The memory an index entry of ``held`` records needs on its task: the failure rule's
    need (catalogue 5.2), checked by :func:`run_iterations` against the budget."""
    return float(held) * float(record_bytes)


def basic_index_need(counts_l: Mapping[Hashable, int], counts_r: Mapping[Hashable, int],
                     record_bytes: float, keys: Iterable[Hashable] | None = None) -> float:
    """What :func:`run_iterations` checks for treeJoinBasic, from exact key counts (no Spark).

    The first joined index holds every key's two whole lists on one task, and every later
    entry holds sub-lists of one of them, so the largest entry over the run is the first
    index's largest key group. ``keys``: the keys that index holds (AM-Join-Basic's HH
    Tree-Join: κ_RS); by default every key of either side (an inner join's index also groups
    keys present on one side only).
    """
    if keys is None:
        keys = counts_l.keys() | counts_r.keys()
    held = max((held_records(counts_l.get(k, 0), counts_r.get(k, 0)) for k in keys), default=0)
    return key_group_bytes(held, record_bytes)


def _held() -> Column:
    """Records one task holds for this entry."""
    return F.when(F.col(_SELF), held_records(F.size(_L1), F.lit(0))).otherwise(
        held_records(F.size(_L1), F.size(_L2)))


def _pairs() -> Column:
    """Record pairs an entry yields (a self entry: its upper triangle with the diagonal)."""
    n1 = F.size(_L1).cast("long")
    return F.when(F.col(_SELF), n1 * (n1 + 1) / 2).otherwise(n1 * F.size(_L2))


def _is_hot(opts: TreeOptions) -> Column:
    return is_hot_col(_len1(), _len2(), opts.threshold)


def _sorted(c: str, opts: TreeOptions) -> Column:
    return F.array_sort(c) if opts.canonical_order else F.col(c)


def cold_pairs(cold: DataFrame, opts: TreeOptions) -> DataFrame:
    """getAllValuePairs (Alg. 4) on cold entries, with outer padding; columns ``_l``, ``_r``."""
    if opts.self_join:
        return _self_cold_pairs(cold, opts)
    if opts.how != "inner":
        # Only an initial-index entry (tag 0) can be a key missing from one side. A hot key's
        # sub-list entry (tag = a hash of its sub-list ids) with an empty side is a sub-list a
        # random draw left empty; its records meet the other side in other entries: no padding.
        cold = cold.filter((F.col(_T) == 0) | ((F.size(_L1) > 0) & (F.size(_L2) > 0)))
    el = F.explode_outer if opts.how in ("right", "full") else F.explode
    er = F.explode_outer if opts.how in ("left", "full") else F.explode
    return cold.select(el(_L1).alias("_l"), _L2).select("_l", er(_L2).alias("_r"))


def _self_cold_pairs(cold: DataFrame, opts: TreeOptions) -> DataFrame:
    """A self-join's pairs in one pass: a record of a two-list entry meets all of ``_L2``, a
    record of a self entry the records after it in its sorted list (from itself on, with the
    diagonal). One pass, not a union of the two kinds, which would double the output tasks."""
    off = 0 if opts.diagonal else 1
    lists = cold.select(F.when(F.col(_SELF), _sorted(_L1, opts)).otherwise(F.col(_L1)).alias(_L1),
                        _L2, _SELF)
    rest = F.slice(_L1, (F.col("_p") + 1 + off).cast("int"),
                   (F.size(_L1) - F.col("_p") - off).cast("int"))
    return (lists.select(F.posexplode(_L1).alias("_p", "_l"), _L1, _L2, _SELF)
            .select("_l", F.explode(F.when(F.col(_SELF), rest).otherwise(F.col(_L2))).alias("_r")))


def _chunk(hot: DataFrame, opts: TreeOptions) -> DataFrame:
    """chunkPairOfLists + getAllValuePairs on sub-lists: δ1·δ2 entries per two-list entry; in a
    same-attribute self-join also a self list into δ sub-lists with entries i <= j, the diagonal
    ones staying self entries. Both kinds in one pass: a union of the two would double the
    reshuffle's map tasks."""
    is_self = F.col(_SELF)
    n1 = F.size(_L1)
    n2 = F.when(is_self, n1).otherwise(F.size(_L2)) if opts.self_join else F.size(_L2)
    h = hot.select(_K, _T, _SELF, _sorted(_L1, opts).alias(_L1), _sorted(_L2, opts).alias(_L2),
                   sublists_col(n1).alias("_d1"), sublist_length_col(n1).alias("_c1"),
                   sublists_col(n2).alias("_d2"), sublist_length_col(n2).alias("_c2"))
    h = h.withColumn("_i", F.explode(F.sequence(F.lit(0).cast("long"), F.col("_d1") - 1)))
    h = h.withColumn("_j", F.explode(F.sequence(F.lit(0).cast("long"), F.col("_d2") - 1)))

    def sub(lst: Column, idx: str, length: str) -> Column:
        return F.slice(lst, (F.col(idx) * F.col(length) + 1).cast("int"), F.col(length).cast("int"))

    second = sub(F.col(_L2), "_j", "_c2")
    diag = F.lit(False)
    if opts.self_join:  # (a regular join's two lists differ in type: no CASE over both)
        h = h.filter(~is_self | (F.col("_i") <= F.col("_j")))
        diag = is_self & (F.col("_i") == F.col("_j"))
        l2_type = ArrayType(hot.schema[_L1].dataType.elementType, True)
        second = (F.when(diag, F.array().cast(l2_type))
                  .when(is_self, sub(F.col(_L1), "_j", "_c2")).otherwise(second))
    return h.select(_K, _chunk_tag("_i", "_j").alias(_T), sub(F.col(_L1), "_i", "_c1").alias(_L1),
                    second.alias(_L2), diag.alias(_SELF))


def next_index(hot: DataFrame, opts: TreeOptions, iteration: int) -> DataFrame:
    """The hot entries chunked, then randomShuffle'd (partition = hash(key, tag, seed, iteration))."""
    chunks = _chunk(_map_side(hot, opts), opts)
    target = F.xxhash64(_K, _T, F.lit(opts.seed), F.lit(iteration))
    return chunks.repartition(opts.partitions, target)


@dataclass(frozen=True)
class IndexStats:
    entries: int
    hot: int
    hot_unraveled: int  # hot entries descending from treeJoin's unraveling (odd tags)
    held: int  # the largest entry's records
    longest: float  # the largest effective length sqrt(ℓ1·ℓ2)


def index_stats(idx: DataFrame, opts: TreeOptions) -> IndexStats:
    """One action on the persisted index."""
    hot = _is_hot(opts)
    row = idx.agg(
        F.count(F.lit(1)),
        F.sum(hot.cast("long")),
        F.sum((hot & (F.col(_T).bitwiseAND(F.lit(1)) == 1)).cast("long")),
        F.max(_held()),
        F.max(F.sqrt(_len1().cast("double") * _len2().cast("double"))),
    ).collect()[0]
    return IndexStats(int(row[0]), int(row[1] or 0), int(row[2] or 0), int(row[3] or 0),
                      float(row[4] or 0.0))


def run_iterations(ctx: BatchContext, idx: DataFrame, opts: TreeOptions, stats: TreeStats,
                   record_bytes: float) -> list[DataFrame]:
    """The driver loop of Alg. 1/6: iterate until the joined index is empty; the partial results."""
    partials: list[DataFrame] = []
    iteration = 0
    while True:
        idx = C.persist(idx)
        st = index_stats(idx, opts)
        if st.entries == 0:
            break
        iteration += 1
        stats.l_max = max(stats.l_max, st.longest)
        stats.index_entries += st.entries
        stats.entries_per_iteration.append(st.entries)
        stats.max_group_records = max(stats.max_group_records, st.held)
        ctx.require_memory("largest key group", key_group_bytes(st.held, record_bytes))
        hot_flag = _is_hot(opts)
        partials.append(cold_pairs(_map_side(idx.filter(~hot_flag), opts), opts))
        if st.hot == 0:
            break
        # the longest chain of chunkings: an entry of iteration k has been chunked k - 1 times,
        # once more if it descends from the unraveling; chunking it now adds one
        stats.chunking_rounds = max(stats.chunking_rounds,
                                    iteration + (st.hot_unraveled > 0))
        idx = next_index(idx.filter(hot_flag), opts, iteration)
    stats.iterations = iteration
    return partials


# ---------------------------------------------------------------------------- the algorithms


def shared_hot_keys(kr: Mapping[Hashable, int],
                    ks: Mapping[Hashable, int]) -> dict[Hashable, tuple[int, int]]:
    """κ_RS = κ_R ⋈ κ_S: key -> (frequency in R, frequency in S)."""
    return {k: (int(c), int(ks[k])) for k, c in kr.items() if k in ks}


def initial_index_parts(ctx: BatchContext, left: DataFrame, right: DataFrame, on: str,
                        opts: TreeOptions, basic: bool, stats: TreeStats,
                        kr: Mapping[Hashable, int] | None = None,
                        ks: Mapping[Hashable, int] | None = None) -> list[DataFrame]:
    """joined_index_0: one part (Basic) or the cold index plus the unraveled hot index."""
    if basic:
        return [build_self_index(left, on, opts) if opts.self_join
                else build_joined_index(left, right, on, opts)]
    hp = hot_params(ctx.params)
    if kr is None or ks is None:
        frames = [left] if opts.self_join else [left, right]
        counted = get_hot_keys_of(frames, on, hp, tasks=ctx.executors)
        kr, ks = counted[0], counted[-1]
    krs = shared_hot_keys(kr, ks)
    stats.hot_keys_left, stats.hot_keys_right, stats.hot_keys_both = len(kr), len(ks), len(krs)
    if not krs:
        return [build_self_index(left, on, opts) if opts.self_join
                else build_joined_index(left, right, on, opts)]
    dl = [sublists(a) for a, _ in krs.values()]
    dr = [sublists(b) for _, b in krs.values()]
    hot = hot_keys_frame(ctx.spark, krs, left.schema[on].dataType, {"_dl": dl, "_dr": dr})
    stats.l_max = max(math.sqrt(a * b) for a, b in krs.values())
    stats.chunking_rounds = 1  # unraveling is the first chunking of every shared hot key
    stats.broadcast_bytes += len(krs) * (C.key_bytes(left, on) + 16)
    lh, lc = _split_by_hot(left, on, hot)
    if opts.self_join:
        stats.replicated_records = sum(a * d for (a, _), d in zip(krs.values(), dl, strict=True))
        return [build_self_index(lc, on, opts), unraveled_self_index(lh, on, left, opts)]
    rh, rc = _split_by_hot(right, on, hot.withColumn("_hk", F.col("_hk").cast(right.schema[on].dataType)))
    stats.replicated_records = sum(a * s + b * r for (a, b), r, s in zip(krs.values(), dl, dr, strict=True))
    hot_index = unraveled_index(lh, rh, on, left, right, opts)
    return [hot_index] if opts.only_shared_hot else [build_joined_index(lc, rc, on, opts), hot_index]


def partition_loads(parts: list[DataFrame], partitions: int) -> list[int]:
    """Record pairs each partition of joined_index_0 is responsible for (Fig. 3's load measure).

    Partition i of every part is counted together, as Fig. 3 assumes ("each partition of the
    initial cold joined index is unioned with the corresponding partition of the hot one").
    """
    loads = [0] * partitions
    for part in parts:
        rows = (part.select(F.spark_partition_id().alias("_p"), _pairs().cast("long").alias("_n"))
                .groupBy("_p").agg(F.sum("_n")).collect())
        for p, n in rows:
            loads[p % partitions] += int(n)
    return loads


def tree_join_pairs(ctx: BatchContext, left: DataFrame, right: DataFrame, on: str,
                    opts: TreeOptions, basic: bool, kr: Mapping[Hashable, int] | None = None,
                    ks: Mapping[Hashable, int] | None = None) -> tuple[DataFrame, TreeStats]:
    """Tree-Join of non-null-key inputs, in the output convention; ``right`` ignored for self-joins."""
    stats = TreeStats()
    if opts.self_join:
        right = left
    if not (C.is_orderable(left.schema) and C.is_orderable(right.schema)):
        opts = replace(opts, canonical_order=False)  # e.g. map columns cannot be sorted
    parts = initial_index_parts(ctx, left, right, on, opts, basic, stats, kr, ks)
    rb = max(C.row_bytes(ctx, left), C.row_bytes(ctx, right))
    partials = run_iterations(ctx, C.union_all(parts), opts, stats, rb)
    if not partials:
        empty = ctx.spark.createDataFrame([], C.pairs_schema(left, right))
        return empty, stats
    return C.pairs_to_output(C.union_all(partials), left, right), stats


def _run(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec,
         basic: bool) -> JoinResult:
    if spec.self_join and spec.how != "inner":
        raise ValueError("a same-attribute self-join is an inner join")
    conf = C.shuffle_conf(ctx)
    opts = TreeOptions.of(ctx, spec.how, spec.self_join)
    with sql_conf(ctx.spark, conf):
        lk, lnull = C.split_null_keys(left, spec.on)
        rk, rnull = C.split_null_keys(left if spec.self_join else right, spec.on)
        out, stats = tree_join_pairs(ctx, lk, rk, spec.on, opts, basic)
        frames = [out]
        if spec.how in ("left", "full"):
            frames.append(C.pad_left_only(lnull, right))
        if spec.how in ("right", "full"):
            frames.append(C.pad_right_only(rnull, left))
    return JoinResult(C.union_all(frames), extra=stats.extra(opts.threshold), sql_conf=conf)


def tree_join_basic(ctx: BatchContext, left: DataFrame, right: DataFrame,
                    spec: JoinSpec) -> JoinResult:
    """treeJoinBasic (Alg. 1): the initial joined index holds each key's whole lists on one task."""
    return _run(ctx, left, right, spec, basic=True)


def tree_join(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    """treeJoin (Alg. 6): keys hot in both relations are unraveled instead of grouped."""
    return _run(ctx, left, right, spec, basic=False)


# Tree-Join's parameters (also AM-Join's, which runs Tree-Join on the keys hot in both)
TREE_PARAMS = {
    **HOT_KEY_PARAMS,
    "coalesce_maps": Param(True, "run the unraveling's and chunking's map sides as E tasks "
                                 "(one wave) instead of one per input partition"),
    "canonical_order": Param(True, "sort each output pair's record lists so outputs are "
                                   "deterministic"),
    "sublist_ids": Param("position", "how a hot key's records are split into sub-lists: by "
                                     "input position (deterministic for cached inputs) or by "
                                     "record content"),
    "self_join_diagonal": Param(True, "in a self-join, pair a record with itself (n² pairs per "
                                      "key); false gives the other reading, n(n-1)/2"),
}

TREE_JOIN_BASIC = BatchAlgorithm(
    "tree_join_basic", "amjoin",
    "Tree-Join-Basic: multi-stage chunking of hot keys, whole keys grouped first",
    tree_join_basic, TREE_PARAMS, ALL_JOIN_TYPES)
TREE_JOIN = BatchAlgorithm(
    "tree_join", "amjoin",
    "Tree-Join: keys hot in both relations unraveled, no task holds a whole hot key",
    tree_join, TREE_PARAMS, ALL_JOIN_TYPES)
