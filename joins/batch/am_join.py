"""AM-Join (AM-Join paper, Alg. 15-16, Eqn. 4, Table 2): Tree-Join for keys hot in both
relations, Index-Broadcast-Joins for keys hot in one, a Shuffle-Join for the rest.

κ_R and κ_S are collected *independently* (:mod:`hot_keys`), in one aggregation that also
counts each hot key's records on the other side and the relations' sizes; each relation is
split into HH/HC/CH/CC, subscripts (own side, other side), and

    Q = R_HH ⋈ S_HH  ∪  R_HC ⋈ S_CH  ∪  R_CH ⋈ S_HC  ∪  R_CC ⋈ S_CC          (Eqn. 4)

with the sub-join algorithms of Table 2: Tree-Join (``am_join``) or Tree-Join-Basic
(``am_join_basic``) for HH, which never dangles (an HH key exists on both sides); IB-Join or its
left-outer variant for HC and CH (the CH join is run with S_HC as the large side and its output
swapped); a Shuffle-Join of the requested type for CC, which also carries every null key.

Broadcast or shuffle (§"When not to Perform Broadcast-Joins?"): R_HC ⋈ S_CH is broadcast when
|R_HC|·m_R·(1+λ) >= |S_CH|·m_S·(1 + λ·log_{1+λ} n), else shuffled (symmetrically for CH);
λ = τ^(2/3) - 1 unless ``ctx.params["lambda"]`` is given; ``ctx.params["broadcast_rule"]`` may be
``"cost"`` (default), ``"always"`` or ``"never"``. Under ``"cost"`` a small side larger than the
memory budget is shuffled instead (AM-Join never fails for memory in the paper); a forced
broadcast whose index does not fit fails the run.

A same-attribute self-join has identical hot keys on both sides, so HC and CH are empty and
AM-Join is Tree-Join (paper); ``spec.self_join`` runs the self-join Tree-Join. Every key of
R_HH and S_HH is in κ_RS, so their Tree-Join builds no cold index (``only_shared_hot``): it would be
empty, yet cost a shuffle and a stage over every partition.

With no hot key in either relation every record is CC, so the split is skipped and AM-Join is
the CC Shuffle-Join alone (the HH/HC/CH sizes are then not reported).

``ctx.params["subjoin_partitions"]``: ``sized`` (default) gives the HH, HC and CH sub-joins as
many partitions as their work needs (records in plus pairs out, at the input's records per
partition; HH's pairs are exact from κ, HC/CH's bounded by τ per large record), ``all`` every
partition. Sized is the default because it was never slower: a sub-join of a few thousand
records over every partition costs more in task launches than in work (amjoin/fig5 at small
scale, α = 0.3: 0.381 s modeled against 0.415 s), and a sub-join whose work fills every
partition gets them all (α = 0.65 and 1: the same plan). The CC Shuffle-Join keeps all
partitions: its pairs are not known in advance; fused, it carries HC and CH too.

The split (``ctx.params["split"]``): ``filter`` (default) makes each sub-relation a filter of
the cached input on a literal key set, and takes the exact sizes from the hot-key pass, so the
split costs no pass, broadcast or job of its own (each sub-join's scan reads the input once, as
it would read a persisted split); ``tag`` is the earlier plan: a broadcast join tags each record
with its sub-relation, the tagged relation is persisted (``persist_split``) and a job counts the
four sizes. Float keys always tag: a literal key set compares -0.0 and NaN unlike the join.

When neither HC nor CH is broadcast (``fuse_shuffles``, default true), the HC, CH and
CC Shuffle-Joins run as one Shuffle-Join of everything but HH: a key's class is the same on both
sides and HC's and CH's small sides never dangle, so the rows are the same with one shuffle
instead of three (Spark's plan, not the algorithm, changes).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, FloatType

from joins.api import BatchContext, JoinResult, JoinSpec, prefixed
from joins.batch import amjoin_common as C
from joins.batch.hot_keys import (
    get_hot_keys_of,
    hot_keys_and_sizes,
    hot_keys_frame,
    hot_params,
)
from joins.batch.ib_join import index_broadcast_join
from joins.batch.sql_conf import sql_conf
from joins.batch.tree_join import TREE_PARAMS, TreeOptions, shared_hot_keys, tree_join_pairs
from joins.declarations import ALL_JOIN_TYPES, BatchAlgorithm, Derived, Param

# sub-relation codes: 2 x (hot on own side) + (hot on the other side)
PARTS = {"hh": 3, "hc": 2, "ch": 1, "cc": 0}
_SPARK_HOW = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer"}


def split_relation(ctx: BatchContext, df: DataFrame, on: str, own: Mapping[Hashable, int],
                   other: Mapping[Hashable, int]) -> tuple[dict[str, DataFrame], dict[str, int]]:
    """splitRelation (Alg. 16) in one local pass: the four sub-relations and their exact sizes."""
    keys = list(dict.fromkeys([*own, *other]))
    flags = hot_keys_frame(ctx.spark, dict.fromkeys(keys, 0), df.schema[on].dataType, {
        "_code": [2 * (k in own) + (k in other) for k in keys]})
    tagged = (df.join(F.broadcast(flags), df[on] == flags["_hk"], "left")
              .select(*[df[c] for c in df.columns],
                      F.coalesce(F.col("_code"), F.lit(0).cast("long")).alias("_code")))
    if ctx.params.get("persist_split", True):
        tagged = C.persist(tagged)
    # four counts: one task merges them instead of one task per (mostly empty) shuffle partition
    sizes = tagged.groupBy("_code").count().coalesce(1).collect()
    counts = {int(r[0]): int(r[1]) for r in sizes}
    parts = {name: tagged.filter(F.col("_code") == code).select(*df.columns)
             for name, code in PARTS.items()}
    parts["non_hh"] = tagged.filter(F.col("_code") != PARTS["hh"]).select(*df.columns)
    return parts, {name: counts.get(code, 0) for name, code in PARTS.items()}


def filter_parts(df: DataFrame, on: str, own: Mapping[Hashable, int],
                 other: Mapping[Hashable, int]) -> dict[str, DataFrame]:
    """splitRelation as filters of the cached input on literal key sets (``split=filter``): each
    sub-join's scan reads the input once and keeps its rows, with no tagging pass, persisted
    copy, broadcast or count job; the sizes come from the hot-key pass
    (:class:`~joins.batch.hot_keys.HotKeySizes`). ``non_hh`` is everything but HH (null keys
    included), for the fused shuffle of HC, CH and CC."""
    col = F.col(on)
    both = [k for k in own if k in other]
    hot = list(dict.fromkeys([*own, *other]))
    return {"hh": df.filter(col.isin(both)),
            "hc": df.filter(col.isin([k for k in own if k not in other])),
            "ch": df.filter(col.isin([k for k in other if k not in own])),
            "cc": df.filter(col.isNull() | ~col.isin(hot)),
            "non_hh": df.filter(col.isNull() | ~col.isin(both))}


def _filter_split(ctx: BatchContext, left: DataFrame, right: DataFrame, on: str) -> bool:
    """Whether the lean split applies: ``split=filter`` (the default) with exact hot keys of
    one key type that is not floating point (a literal key set compares -0.0 and NaN unlike the
    join's normalised equality, so float keys keep the tagging split)."""
    mode = str(ctx.params.get("split", "filter"))
    if mode not in ("filter", "tag"):
        raise ValueError(f"split must be 'filter' or 'tag', got {mode!r}")
    kt = left.schema[on].dataType
    return (mode == "filter" and hot_params(ctx.params).method == "exact"
            and kt == right.schema[on].dataType and not isinstance(kt, FloatType | DoubleType))


def use_broadcast(ctx: BatchContext, n_large: int, m_large: float, n_small: int,
                  m_small: float) -> bool:
    """Δ_split(large) >= Δ_broadcast(small) (§28.2) for an index that fits the memory budget,
    or the forced choice of ``broadcast_rule``."""
    rule = str(ctx.params.get("broadcast_rule", "cost"))
    if rule in ("always", "never"):
        return rule == "always"
    if rule != "cost":
        raise ValueError(f"broadcast_rule must be 'cost', 'always' or 'never', got {rule!r}")
    if ctx.memory_budget_bytes is not None and n_small * m_small > ctx.memory_budget_bytes:
        return False  # the index could not be held by every executor
    lam = float(ctx.params.get("lambda", C.lambda_from_threshold(hot_params(ctx.params).threshold)))
    n = max(ctx.executors, 1)
    d_split = n_large * m_large * (1 + lam)
    d_bcast = n_small * m_small * (1 + lam * C.log_base(n, 1 + lam))
    return d_split >= d_bcast


def _shuffle_join(left: DataFrame, right: DataFrame, on: str, how: str,
                  partitions: int | None = None) -> DataFrame:
    lp, rp = prefixed(left, "l_"), prefixed(right, "r_")
    if partitions is not None:
        # Co-partitioned on the key. Cached, because Spark re-plans a join of two plain
        # repartitions at spark.sql.shuffle.partitions; a cached input keeps its partitioning.
        lp = C.persist(lp.repartition(partitions, "l_" + on))
        rp = C.persist(rp.repartition(partitions, "r_" + on))
    return lp.hint("shuffle_hash").join(rp, lp["l_" + on] == rp["r_" + on], _SPARK_HOW[how])


def _run(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec,
         basic: bool) -> JoinResult:
    conf = C.shuffle_conf(ctx)
    if spec.self_join:
        return _self_join(ctx, left, spec, basic, conf)
    on, how = spec.on, spec.how
    hp = hot_params(ctx.params)
    extra: dict[str, float] = {}
    lean = _filter_split(ctx, left, right, on)
    with sql_conf(ctx.spark, conf):
        if lean:
            sizes = hot_keys_and_sizes(left, right, on, hp, tasks=ctx.executors)
            kr, ks = sizes.hot
        else:
            kr, ks = get_hot_keys_of([left, right], on, hp, tasks=ctx.executors)
        extra.update(hot_keys_left=len(kr), hot_keys_right=len(ks),
                     hot_keys_both=len(set(kr) & set(ks)))
        if not kr and not ks:
            # no hot key anywhere: every record is CC and splitRelation would be the identity
            extra["broadcast_bytes"] = 0.0
            return JoinResult(_shuffle_join(left, right, on, how), extra=extra, sql_conf=conf)
        extra["broadcast_bytes"] = len(set(kr) | set(ks)) * (C.key_bytes(left, on) + 8) * 2
        if lean:
            rs, rn = filter_parts(left, on, kr, ks), sizes.split_sizes(0)
            ss, sn = filter_parts(right, on, ks, kr), sizes.split_sizes(1)
        else:
            rs, rn = split_relation(ctx, left, on, kr, ks)
            ss, sn = split_relation(ctx, right, on, ks, kr)
        for name in PARTS:
            extra[f"rows_{name}_left"], extra[f"rows_{name}_right"] = rn[name], sn[name]
        m_r, m_s = C.row_bytes(ctx, left), C.row_bytes(ctx, right)
        total = sum(rn.values()) + sum(sn.values())
        hh_pairs = sum(a * b for a, b in shared_hot_keys(kr, ks).values())
        # records in plus pairs out per sub-join: HH's pairs exact from κ; an HC/CH key is cold
        # on the small side, so fewer than τ matches per large record
        work = {"hh": rn["hh"] + sn["hh"] + hh_pairs if rn["hh"] and sn["hh"] else 0,
                "hc": rn["hc"] + sn["ch"] + rn["hc"] * min(sn["ch"], hp.threshold),
                "ch": sn["hc"] + rn["ch"] + sn["hc"] * min(rn["ch"], hp.threshold)}
        # records per task by which sub-joins are sized (0: each on all partitions)
        per_task = total / ctx.partitions if C.subjoin_partitions_mode(ctx) == "sized" else 0.0
        frames = []

        # R_HH ⋈ S_HH: Tree-Join (inner in every variant: an HH key is on both sides)
        tree_extra = {"iterations": 0.0, "replicated_records": 0.0, "max_group_records": 0.0,
                      "index_entries": 0.0}
        if work["hh"]:
            opts = replace(TreeOptions.of(ctx, "inner", self_join=False),
                           partitions=C.sized_partitions(ctx, work["hh"], per_task),
                           only_shared_hot=True)
            extra["partitions_hh"] = opts.partitions
            hh, tstats = tree_join_pairs(ctx, rs["hh"], ss["hh"], on, opts, basic, kr, ks)
            frames.append(hh)
            tree_extra = {k: float(v) for k, v in tstats.extra(opts.threshold).items()
                          if not k.startswith("hot_keys") and k != "broadcast_bytes"}
            extra["broadcast_bytes"] += tstats.broadcast_bytes
        extra.update(tree_extra)

        # R_HC ⋈ S_CH and R_CH ⋈ S_HC (= S_HC ⋈ R_CH, swapped): Small-Large joins
        small_large = (
            (rs["hc"], ss["ch"], rn["hc"], sn["ch"], m_r, m_s, True, how in ("left", "full"), "hc"),
            (ss["hc"], rs["ch"], sn["hc"], rn["ch"], m_s, m_r, False, how in ("right", "full"),
             "ch"),
        )
        plan = {}
        for _, _, n_large, n_small, m_large, m_small, _, _, tag in small_large:
            extra[f"{tag}_broadcast"] = 0.0
            if n_large:
                parts = C.sized_partitions(ctx, work[tag], per_task)
                extra[f"partitions_{tag}"] = parts
                plan[tag] = (parts, use_broadcast(ctx, n_large, m_large, n_small, m_small))
        # Neither broadcast: one Shuffle-Join of everything but HH gives the same rows as the
        # HC, CH and CC joins apart (a key's class is the same on both sides, and HC's and CH's
        # small sides never dangle) with one shuffle instead of three; HC's and CH's records
        # then travel in CC's shuffle, so no stage is sized for them.
        fused = bool(ctx.params.get("fuse_shuffles", True)) and not any(
            b for _, b in plan.values())
        extra["fused_shuffles"] = float(fused)
        if fused:
            frames.append(_shuffle_join(rs["non_hh"], ss["non_hh"], on, how))
            small_large = ()
        for large, small, n_large, _, _, _, large_is_left, keep, tag in small_large:
            if n_large == 0:
                continue  # nothing to join and nothing to preserve (the small side never dangles)
            parts, bcast = plan[tag]
            sized = parts if parts < ctx.partitions else None
            if bcast:
                if sized:
                    large = large.coalesce(sized)  # no shuffle: merges the large side's splits
                out, ib = index_broadcast_join(ctx, large, small, on, large_is_left,
                                               keep_large=keep, keep_small=False)
                extra["broadcast_bytes"] += ib.broadcast_bytes
                extra[f"{tag}_broadcast"] = 1.0
            else:
                sub_how = "left" if keep else "inner"
                if large_is_left:
                    out = _shuffle_join(large, small, on, sub_how, sized)
                else:
                    out = _shuffle_join(small, large, on, "right" if keep else "inner", sized)
            frames.append(out)

        # R_CC ⋈ S_CC: Shuffle-Join of the requested type (null keys are all here)
        if not fused:
            frames.append(_shuffle_join(rs["cc"], ss["cc"], on, how))
        order = ["l_" + c for c in left.columns] + ["r_" + c for c in right.columns]
        output = C.union_all([f.select(*order) for f in frames])
    return JoinResult(output, extra={k: float(v) for k, v in extra.items()}, sql_conf=conf)


def _self_join(ctx: BatchContext, rel: DataFrame, spec: JoinSpec, basic: bool,
               conf: dict[str, str]) -> JoinResult:
    """AM-Join of a same-attribute self-join = Tree-Join (HC and CH are empty)."""
    if spec.how != "inner":
        raise ValueError("a same-attribute self-join is an inner join")
    opts = TreeOptions.of(ctx, "inner", self_join=True)
    with sql_conf(ctx.spark, conf):
        keyed, _ = C.split_null_keys(rel, spec.on)
        out, stats = tree_join_pairs(ctx, keyed, keyed, spec.on, opts, basic)
    return JoinResult(out, extra=stats.extra(opts.threshold), sql_conf=conf)


def am_join(ctx: BatchContext, left: DataFrame, right: DataFrame, spec: JoinSpec) -> JoinResult:
    """AM-Join: the load-balanced Tree-Join for keys hot in both relations."""
    return _run(ctx, left, right, spec, basic=False)


def am_join_basic(ctx: BatchContext, left: DataFrame, right: DataFrame,
                  spec: JoinSpec) -> JoinResult:
    """AM-Join-Basic: AM-Join with Tree-Join-Basic for the keys hot in both relations."""
    return _run(ctx, left, right, spec, basic=True)


AM_PARAMS = {
    **TREE_PARAMS,
    "lambda": Param(Derived("C.lambda_from_threshold(hot_params(ctx.params).threshold)"),
                    "λ, the network-vs-disk cost ratio; by default derived from τ = "
                    "(1+λ)^(3/2)", float),
    "broadcast_rule": Param("cost", "IB-Join's broadcast of the hot-cold sub-relations: cost "
                                    "(Eqn. 5 decides), always or never"),
    "persist_split": Param(True, "split=tag: persist the tagged sub-relations instead of "
                                 "recomputing each"),
    "split": Param("filter", "how the HH/HC/CH/CC sub-relations are made: filter (key-set "
                             "filters of the cached input, sizes from the hot-key pass) or tag "
                             "(a tagging pass, persisted, and a count job)"),
    "fuse_shuffles": Param(True, "run HC, CH and CC as one Shuffle-Join when neither HC nor CH "
                                 "is broadcast (one shuffle instead of three)"),
    "subjoin_partitions": Param("sized", "partitions of the HH, HC and CH sub-joins: sized by "
                                         "their work (default) or all (the input's)"),
}

AM_JOIN_BASIC = BatchAlgorithm(
    "am_join_basic", "amjoin",
    "AM-Join-Basic: AM-Join with Tree-Join-Basic for keys hot in both relations",
    am_join_basic, AM_PARAMS, ALL_JOIN_TYPES)
AM_JOIN = BatchAlgorithm(
    "am_join", "amjoin", "AM-Join: Tree-Join (HH), IB-Joins (HC, CH), Shuffle-Join (CC)",
    am_join, AM_PARAMS, ALL_JOIN_TYPES)
