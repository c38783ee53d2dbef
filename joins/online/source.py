"""The stream source (the driver's spout): relations R and S and their arrival order.

The driver reads only what a source must: each tuple's identity (tid), join key and relation,
in arrival order. Payload columns stay where they are (pandas frame or Spark DataFrame) and are
attached to result pairs by tid at the end (late materialisation), so joiner state is compact.
Keys become float64 (NaN = null); integer keys beyond 2^53 are refused (not exact in float64);
non-numeric keys are factorised jointly over R and S (equi-joins only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from joins.online.hashing import tuple_u

TID = "__tid"


class SourceError(ValueError):
    pass


@dataclass
class Relation:
    raw_key: np.ndarray  # in tid order
    tid: np.ndarray
    seq: np.ndarray | None
    frame: pd.DataFrame | None  # pandas input (payload for output)
    sdf: object | None  # Spark DataFrame with a TID column (payload for output)

    def __len__(self) -> int:
        return len(self.tid)


def load(spark, data, on: str, name: str) -> Relation:
    """A pandas frame, a Spark DataFrame or a Parquet path, as a :class:`Relation`."""
    if isinstance(data, pd.DataFrame):
        if on not in data.columns:
            raise SourceError(f"{name} has no column {on!r}; columns: {list(data.columns)}")
        seq = data["seq"].to_numpy(np.int64) if "seq" in data.columns else None
        return Relation(data[on].to_numpy(), np.arange(len(data), dtype=np.int64), seq,
                        data.reset_index(drop=True), None)
    if isinstance(data, (str, Path)):
        if not Path(data).exists():
            raise SourceError(f"{name}: no such file or folder {data}")
        data = spark.read.parquet(str(data))
    from pyspark.sql import functions as F

    if on not in data.columns:
        raise SourceError(f"{name} has no column {on!r}; columns: {data.columns}")
    # materialised once so that the tids seen here are the tids joined to the output later
    sdf = data.withColumn(TID, F.monotonically_increasing_id()).localCheckpoint()
    cols = [TID, on] + (["seq"] if "seq" in data.columns else [])
    tab = sdf.select(*cols).toArrow().to_pandas().sort_values(TID, kind="stable")
    seq = tab["seq"].to_numpy(np.int64) if "seq" in tab.columns else None
    return Relation(tab[on].to_numpy(), tab[TID].to_numpy(np.int64), seq, None, sdf)


def to_float_keys(kr: np.ndarray, ks: np.ndarray, band: float | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Both key columns as float64 with NaN for null, exactly (see module doc)."""
    sr, ss = pd.Series(kr), pd.Series(ks)
    numeric = all(pd.api.types.is_numeric_dtype(x) or pd.api.types.is_bool_dtype(x) or
                  x.isna().all() for x in (sr, ss))
    if not numeric:
        if band is not None:
            raise SourceError("a band join needs numeric keys")
        # sorted codes keep the keys' order, so an order predicate (e.g. r < s) on the codes
        # is the predicate on the keys, not on their order of first appearance
        codes, _ = pd.factorize(pd.concat([sr, ss], ignore_index=True), sort=True,
                                use_na_sentinel=True)
        codes = np.where(codes < 0, np.nan, codes.astype(np.float64))
        return codes[: len(sr)], codes[len(sr):]
    out = []
    for x in (sr, ss):
        if pd.api.types.is_integer_dtype(x) and len(x.dropna()) and \
                np.abs(x.dropna().astype("int64")).max() > 2**53:
            raise SourceError("integer keys beyond 2^53 are not exact as float64")
        out.append(x.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan))
    return out[0], out[1]


def order_kwargs(order: str, k: float | None, order_params: dict | None) -> dict:
    """The arrival order's parameters: ``order_params`` plus ``k`` if the order has one."""
    from datagen.orders import load
    from datagen.params import signature_params

    params = dict(order_params or {})
    if k is not None and "k" in signature_params(load(order)):
        params["k"] = k  # k is the fluct order's ratio; other orders have no k
    return params


def check_order(order: str, seed: int, k: float | None, order_params: dict | None = None
                ) -> None:
    """The order's parameter checks (e.g. fluct's k > 1, by its dry run on empty relations) and
    the seed's raise a GeneratorError without reading any input."""
    from datagen.errors import GeneratorError
    from datagen.orders import resolve

    if seed < 0:
        raise GeneratorError(f"seed must be >= 0, got {seed}")
    resolve(order, order_kwargs(order, k, order_params))


@dataclass
class Stream:
    """Arrival-ordered tuples: relation flag, tid, float key, routing coordinate u."""

    is_r: np.ndarray
    tid: np.ndarray
    key: np.ndarray
    u: np.ndarray
    n_r: int
    n_s: int

    def __len__(self) -> int:
        return len(self.is_r)


def build_stream(r: Relation, s: Relation, *, order: str, seed: int, k: float | None,
                 band: float | None, order_params: dict | None = None) -> Stream:
    """Interleave R and S: by their ``seq`` columns if both have one, else by ``order``
    (datagen.orders; it may also permute tuples within a relation)."""
    kr, ks = to_float_keys(r.raw_key, s.raw_key, band)
    n_r, n_s = len(r), len(s)
    if r.seq is not None and s.seq is not None:
        seq = np.concatenate([r.seq, s.seq])
        order_idx = np.argsort(seq, kind="stable")
        is_r = order_idx < n_r
        tid = np.concatenate([r.tid, s.tid])[order_idx]
        key = np.concatenate([kr, ks])[order_idx]
    else:
        from datagen.orders import compute_arrival

        arr = compute_arrival(order, n_r, n_s, seed, **order_kwargs(order, k, order_params))
        is_r = arr.is_r
        perm_r = arr.perm_r if arr.perm_r is not None else np.arange(n_r)
        perm_s = arr.perm_s if arr.perm_s is not None else np.arange(n_s)
        tid = np.empty(n_r + n_s, np.int64)
        key = np.empty(n_r + n_s, np.float64)
        tid[is_r], key[is_r] = r.tid[perm_r], kr[perm_r]
        tid[~is_r], key[~is_r] = s.tid[perm_s], ks[perm_s]
    tid = np.asarray(tid, np.int64)
    return Stream(is_r, tid, np.asarray(key, np.float64), tuple_u(seed, is_r, tid), n_r, n_s)
