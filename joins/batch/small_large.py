"""Shared parts of the Small-Large outer joins DER and DDR (AM-Join paper, catalogue amjoin 2.6).

Both broadcast the small relation S to the n executors, each executor e_i joins S with its
partition R_i of the large relation, and the S records left unjoined on e_i are shipped by hash
to find the ones unjoined on *all* n executors (DER ships record ids, DDR whole records). This
module holds what the two share: which input is small, the layout of R into n executor
partitions, the broadcast key index, the per-executor scan that finds S records unjoined on that
executor, the first (broadcast) join and the null padding of unjoinable S records.

Sides. The paper writes R for the large and S for the small relation and joins R with S, so S
is the RIGHT input; Fig. 9's right-outer join therefore preserves the small relation, which is
the case DER/DDR exist for. ``ctx.params["small_side"]`` ("right" by default, or "left") names
the small input; the join type then decides what is preserved:

* preserving the small side (right-outer with S on the right, left-outer with S on the left)
  needs the unjoinable-record detection;
* preserving only the large side needs none: the first join outputs each unjoined R_i record
  null-padded on its own executor (DER/DDR's full-outer extension, used alone);
* full outer does both; inner is the first join alone.

Executors. The paper's n is ``ctx.executors``. R is laid out as n partitions, one R_i per
executor: a shuffle-free ``coalesce`` when R has at least n partitions, otherwise a round-robin
``repartition`` (an extra shuffle of R, reported as ``large_layout_shuffled``; give R at least n
partitions to avoid it). The detection scan runs once per R_i.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from joins.api import BatchContext, JoinSpec, prefixed
from joins.declarations import Derived, Param

# Per-item sizes (bytes) of the paper's cost formulas (Table 1), when ctx.params gives none.
DEFAULT_ID_BYTES = 8  # m_id: a 64-bit record id
DEFAULT_RECORD_BYTES = 100  # m_S: the record size of the paper's Fig. 9 workload

# the Small-Large outer joins' parameters (DER, DDR)
SMALL_LARGE_PARAMS = {
    "small_side": Param("right", "which input is the small relation: right or left"),
    "id_bytes": Param(Derived("DEFAULT_ID_BYTES"), "bytes of a record id in the cost formulas "
                                                   "(Table 1)", float),
    "small_record_bytes": Param(Derived("ctx.record_bytes"), "bytes of a small-relation record "
                                                             "in the cost formulas; none means "
                                                             "record_bytes", float),
}


@dataclass(frozen=True)
class Roles:
    """Which input is small and which sides the join type preserves."""

    small_side: str  # "left" or "right"
    preserve_small: bool
    preserve_large: bool

    @property
    def small_prefix(self) -> str:
        return "l_" if self.small_side == "left" else "r_"

    @property
    def large_prefix(self) -> str:
        return "r_" if self.small_side == "left" else "l_"


def roles(ctx: BatchContext, spec: JoinSpec) -> Roles:
    small_side = str(ctx.params.get("small_side", "right"))
    if small_side not in ("left", "right"):
        raise ValueError(f"small_side must be 'left' or 'right', not {small_side!r}")
    large_side = "left" if small_side == "right" else "right"
    preserved = {"inner": set(), "left": {"left"}, "right": {"right"},
                 "full": {"left", "right"}}[spec.how]
    return Roles(small_side, small_side in preserved, large_side in preserved)


def split_inputs(left: DataFrame, right: DataFrame, r: Roles) -> tuple[DataFrame, DataFrame]:
    """(large, small) in the paper's roles."""
    return (right, left) if r.small_side == "left" else (left, right)


def item_sizes(ctx: BatchContext) -> tuple[float, float]:
    """(m_id, m_S): ``params.id_bytes``; ``params.small_record_bytes``, else ctx.record_bytes."""
    m_id = float(ctx.params.get("id_bytes", DEFAULT_ID_BYTES))
    m_s = ctx.params.get("small_record_bytes", ctx.record_bytes)
    return m_id, float(m_s if m_s is not None else DEFAULT_RECORD_BYTES)


def layout_large(large: DataFrame, n: int) -> tuple[DataFrame, bool]:
    """R as n executor partitions R_0..R_{n-1}; True if that needed a shuffle."""
    if large.rdd.getNumPartitions() >= n:
        return large.coalesce(n), False
    return large.repartition(n), True


@dataclass(frozen=True)
class KeyIndex:
    """The broadcast lookup structure: S's distinct non-null keys, sorted, and for every S
    record (in collection order) the position of its key there (-1 for a null key)."""

    keys: np.ndarray
    record_key_pos: np.ndarray


def build_key_index(small_keys: pa.ChunkedArray | pa.Array) -> KeyIndex:
    valid = np.asarray(small_keys.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values = small_keys.drop_null().to_numpy(zero_copy_only=False)
    keys, inverse = np.unique(values, return_inverse=True)
    pos = np.full(len(valid), -1, dtype=np.int64)
    pos[valid] = inverse
    return KeyIndex(keys, pos)


def unmatched_records(index: KeyIndex, batches, key: str) -> np.ndarray:
    """Positions of the S records that no record of this executor's R_i joins with.

    Scans R_i once, marking the S keys it contains; null keys never match.
    """
    seen = np.zeros(len(index.keys), dtype=bool)
    for batch in batches:
        col = batch.column(batch.schema.get_field_index(key))
        probe = col.drop_null().to_numpy(zero_copy_only=False)
        if len(probe) == 0 or len(index.keys) == 0:
            continue
        at = np.searchsorted(index.keys, probe)
        inside = at < len(index.keys)
        hit = np.zeros(len(probe), dtype=bool)
        hit[inside] = index.keys[at[inside]] == probe[inside]
        seen[at[hit]] = True
    pos = index.record_key_pos
    matched = np.zeros(len(pos), dtype=bool)
    matched[pos >= 0] = seen[pos[pos >= 0]]
    return np.flatnonzero(~matched)


def first_join(large_n: DataFrame, small: DataFrame, spec: JoinSpec, r: Roles) -> DataFrame:
    """The broadcast join on every executor: inner, or outer on the large side only.

    Output columns in the l_*/r_* convention; Spark's BroadcastHashJoin keeps R's n-partition
    layout, so each R_i is joined on its own executor.
    """
    lp, sp = r.large_prefix, r.small_prefix
    large_p, small_p = prefixed(large_n, lp), prefixed(small, sp)
    cond = large_p[lp + spec.on] == small_p[sp + spec.on]
    how = "left_outer" if r.preserve_large else "inner"
    joined = large_p.join(F.broadcast(small_p), cond, how)
    return joined.select(*_ordered(large_p, small_p, r))


def pad_large(small_rows: DataFrame, large: DataFrame, r: Roles) -> DataFrame:
    """Unjoinable small records null-padded on the large side, in output column order."""
    small_p = prefixed(small_rows, r.small_prefix)
    nulls = [F.lit(None).cast(f.dataType).alias(r.large_prefix + f.name)
             for f in large.schema.fields]
    cols: list[Column] = [small_p[c] for c in small_p.columns]
    ordered = nulls + cols if r.small_side == "right" else cols + nulls
    return small_p.select(*ordered)


def _ordered(large_p: DataFrame, small_p: DataFrame, r: Roles) -> list[Column]:
    lcols = [large_p[c] for c in large_p.columns]
    scols = [small_p[c] for c in small_p.columns]
    return lcols + scols if r.small_side == "right" else scols + lcols


def sql_options(ctx: BatchContext) -> dict:
    """A fixed plan: no adaptive re-planning, broadcast only where the algorithm says.

    The detection scan emits rows for an executor whose R_i is empty (all of S is unjoined
    there), so Spark must not prune the scan of an empty R as it does for row-wise operators.
    """
    return {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.shuffle.partitions": ctx.partitions,
        "spark.sql.optimizer.excludedRules":
            "org.apache.spark.sql.catalyst.optimizer.PropagateEmptyRelation",
    }


def base_metrics(n: int, small_rows: int, m_s: float, shuffled: bool) -> dict[str, float]:
    """The exact counts DER and DDR both report, with the detection counts still zero."""
    return {
        "executors": float(n),
        "small_rows": float(small_rows),
        "broadcast_bytes": small_rows * m_s,
        "large_layout_shuffled": float(shuffled),
        "unjoinable_small_rows": 0.0,
        "unjoinable_detection_bytes": 0.0,
        "unjoinable_detection_bytes_formula": 0.0,
    }
