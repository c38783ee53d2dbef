"""The stream source (the driver's spout): relations R and S and their arrival order.

The driver reads only what a source must: each tuple's identity (tid), join key and relation,
in arrival order. Payload columns stay where they are (pandas frame or Spark DataFrame) and are
attached to result pairs by tid at the end (late materialisation), so joiner state is compact.
Keys become float64 (NaN = null); strings and integers beyond 2^53 become their rank among
all compared columns' values (exact for equality and order; a band join refuses them).
Any number of inputs, joined on one shared column or on a graph of edges between columns.
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
    raw_key: np.ndarray  # in tid order: the first join column
    tid: np.ndarray
    seq: np.ndarray | None
    frame: pd.DataFrame | None  # pandas input (payload for output)
    sdf: object | None  # Spark DataFrame with a TID column (payload for output)
    columns: dict[str, np.ndarray] | None = None  # every join column, in tid order
    time: np.ndarray | None = None  # event time, in tid order

    def __len__(self) -> int:
        return len(self.tid)

    def col(self, name: str) -> np.ndarray:
        return self.columns[name] if self.columns else self.raw_key


def _time_values(x: pd.Series, name: str, column: str) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(x):
        x = (x - pd.Timestamp(0, tz=getattr(x.dt, "tz", None))).dt.total_seconds()
    if not (pd.api.types.is_numeric_dtype(x) and not pd.api.types.is_bool_dtype(x)):
        raise SourceError(f"{name}: time column {column!r} is not numeric ({x.dtype})")
    if x.isna().any():
        raise SourceError(f"{name}: time column {column!r} has nulls")
    return x.astype("float64").to_numpy()


def load(spark, data, on: str | list[str], name: str, time: str | None = None,
         reliable: bool = False) -> Relation:
    """A pandas frame, a Spark DataFrame or a Parquet path, as a :class:`Relation`.
    ``on``: the join column, or every join column this input takes part in. ``reliable``:
    a Spark input is checkpointed in the SparkContext's checkpoint folder (it survives the
    loss of an executor) instead of on the executors."""
    cols = [on] if isinstance(on, str) else list(dict.fromkeys(on))
    need = cols + ([time] if time else [])
    if isinstance(data, pd.DataFrame):
        for c in need:
            if c not in data.columns:
                raise SourceError(f"{name} has no column {c!r}; columns: {list(data.columns)}")
        seq = data["seq"].to_numpy(np.int64) if "seq" in data.columns else None
        t = _time_values(data[time], name, time) if time else None
        # .array, not .to_numpy(): a nullable integer column with a null would become
        # float64 and lose integers beyond 2^53
        return Relation(data[cols[0]].array, np.arange(len(data), dtype=np.int64), seq,
                        data.reset_index(drop=True), None,
                        {c: data[c].array for c in cols}, t)
    if isinstance(data, (str, Path)):
        if not Path(data).exists():
            raise SourceError(f"{name}: no such file or folder {data}")
        data = spark.read.parquet(str(data))
    from pyspark.sql import functions as F

    for c in need:
        if c not in data.columns:
            raise SourceError(f"{name} has no column {c!r}; columns: {data.columns}")
    # materialised once so that the tids seen here are the tids joined to the output later
    sdf = data.withColumn(TID, F.monotonically_increasing_id())
    sdf = sdf.checkpoint() if reliable else sdf.localCheckpoint()
    sel = list(dict.fromkeys([TID, *need] + (["seq"] if "seq" in data.columns else [])))
    # integers as pandas' nullable integers: Arrow's default turns an integer column with a
    # null into float64, which makes keys beyond 2^53 (hashed 64-bit ids) collide
    tab = (sdf.select(*sel).toArrow().to_pandas(types_mapper=nullable_integers)
           .sort_values(TID, kind="stable"))
    seq = tab["seq"].to_numpy(np.int64) if "seq" in tab.columns else None
    t = _time_values(tab[time], name, time) if time else None
    return Relation(tab[cols[0]].array, tab[TID].to_numpy(np.int64), seq, None, sdf,
                    {c: tab[c].array for c in cols}, t)


def nullable_integers(arrow_type):
    """Arrow integer types as pandas' nullable integer dtypes (exact with nulls)."""
    import pyarrow as pa

    if pa.types.is_integer(arrow_type):
        return pd.api.types.pandas_dtype(str(arrow_type).replace("int", "Int").replace("uInt",
                                                                                      "UInt"))
    return None


def _beyond_float(x: pd.Series) -> bool:
    """Integers that float64 cannot hold exactly (beyond +-2^53), compared as Python ints
    (an unsigned 64-bit value above 2^63 would wrap in int64)."""
    x = x.dropna()
    return bool(len(x)) and (int(x.max()) > 2**53 or int(x.min()) < -(2**53))


def to_float_keys(*keys: np.ndarray, band: float | None = None) -> list[np.ndarray]:
    """Key columns compared with each other as float64 with NaN for null, exactly.

    Numbers are kept as numbers (band joins need differences); strings, and integers beyond
    2^53 (not exact as float64, e.g. hashed 64-bit ids), become their rank among all the
    columns' distinct values (sorted codes: equality and order are the keys' own), which a
    band join cannot use: it is refused.
    """
    series = [pd.Series(k) for k in keys]
    numeric = all(pd.api.types.is_numeric_dtype(x) or pd.api.types.is_bool_dtype(x) or
                  x.isna().all() for x in series)
    wide = numeric and any(pd.api.types.is_integer_dtype(x) and _beyond_float(x)
                           for x in series)
    if not numeric or wide:
        if band is not None:
            raise SourceError("a band join needs numeric keys within +-2^53" if wide else
                              "a band join needs numeric keys")
        # sorted codes keep the keys' order, so an order predicate (e.g. r < s) on the codes
        # is the predicate on the keys, not on their order of first appearance
        allk = pd.concat([x.astype(object) if wide else x for x in series], ignore_index=True)
        codes, _ = pd.factorize(allk, sort=True, use_na_sentinel=True)
        codes = np.where(codes < 0, np.nan, codes.astype(np.float64))
        bounds = np.cumsum([0] + [len(x) for x in series])
        return [codes[bounds[i]:bounds[i + 1]] for i in range(len(series))]
    return [x.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan) for x in series]


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
    """Arrival-ordered tuples: input id, tid, float key, routing coordinate u and, when given,
    event time and every join attribute."""

    is_r: np.ndarray  # input 0 (R of a two-input join)
    tid: np.ndarray
    key: np.ndarray  # the routing key (the first join attribute of each tuple's input)
    u: np.ndarray
    n_r: int
    n_s: int
    rel: np.ndarray | None = None  # input id per tuple (int8)
    time: np.ndarray | None = None  # event time per tuple (float64), non-decreasing
    attrs: np.ndarray | None = None  # (tuples, slots): join attributes, for n-way graphs
    sizes: tuple[int, ...] = ()
    names: tuple[str, ...] = ("R", "S")

    def __post_init__(self) -> None:
        if self.rel is None:
            self.rel = np.where(self.is_r, 0, 1).astype(np.int8)
        if not self.sizes:
            self.sizes = (self.n_r, self.n_s)

    def __len__(self) -> int:
        return len(self.is_r)


@dataclass(frozen=True)
class JoinGraph:
    """Equality (or band) edges between inputs' columns. ``slots[i]`` are input i's join
    columns; an edge is (input, slot, input, slot). All inputs on one shared column is the
    case every layout can partition; other graphs run where every tuple meets every other."""

    names: tuple[str, ...]
    slots: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[int, int, int, int], ...]
    # a composite key (``on=a,b`` or ``on=x=y,a=b``): input i's key columns, which
    # :func:`add_composite_keys` folds into its one slot, COMPOSITE_KEY
    composite: tuple[tuple[str, ...], ...] | None = None

    @property
    def shared(self) -> bool:
        """Every input joins on one column (each has one slot and the edges connect them)."""
        return all(len(s) == 1 for s in self.slots)

    def columns(self, i: int) -> list[str]:
        """The columns input i is read with (a composite key's parts, else its slots)."""
        return list(self.composite[i] if self.composite else self.slots[i])

    @classmethod
    def parse(cls, names: list[str], on: str | list) -> JoinGraph:
        """``on``: one column shared by all inputs, a composite key (``a,b``: the same columns
        in every input; ``x=y,a=b``: two inputs' columns pair by pair, as the batch CLI takes
        it), or edges "A.x=B.y" (a list or a comma-separated string)."""
        if isinstance(on, str) and "." not in on and ("," in on or "=" in on):
            from joins.keys import KeySpecError, parse_on

            try:
                keys = parse_on(on)
            except KeySpecError as e:
                raise SourceError(str(e)) from None
            if keys.left != keys.right and len(names) != 2:
                raise SourceError(f"on={on!r} pairs two inputs' columns; with {len(names)} "
                                  "inputs name shared columns (on=a,b) or edges (A.x=B.y)")
            parts = (keys.left, *([keys.right] * (len(names) - 1)))
            chain = cls.parse(names, COMPOSITE_KEY)
            return cls(chain.names, chain.slots, chain.edges, composite=parts)
        if isinstance(on, str) and "=" not in on:
            # A.k = B.k = C.k: a chain in the order of the inputs (for equality every pair is
            # equal; with a band, consecutive inputs are within it, as the edges say)
            slots = tuple((on,) for _ in names)
            edges = tuple((i - 1, 0, i, 0) for i in range(1, len(names)))
            return cls(tuple(names), slots, edges)
        items = [e.strip() for e in (on.split(",") if isinstance(on, str) else on)]
        slots: list[list[str]] = [[] for _ in names]
        edges = []
        for e in items:
            if isinstance(e, (tuple, list)):
                a, ca, b, cb = e
            else:
                left, sep, right = e.partition("=")
                if not sep or "." not in left or "." not in right:
                    raise SourceError(f"join edge {e!r}: expected INPUT.column=INPUT.column")
                a, ca = left.strip().split(".", 1)
                b, cb = right.strip().split(".", 1)
            for n in (a, b):
                if n not in names:
                    raise SourceError(f"join edge {e!r}: no input named {n!r}; inputs: "
                                      f"{', '.join(names)}")
            ia, ib = names.index(a), names.index(b)
            if ia == ib:
                raise SourceError(f"join edge {e!r} joins an input with itself")
            for i, c in ((ia, ca), (ib, cb)):
                if c not in slots[i]:
                    slots[i].append(c)
            edges.append((ia, slots[ia].index(ca), ib, slots[ib].index(cb)))
        g = cls(tuple(names), tuple(tuple(s) for s in slots), tuple(edges))
        g.check_connected()
        return g

    def check_connected(self) -> None:
        seen, todo = {0}, [0]
        while todo:
            i = todo.pop()
            for a, _, b, _ in self.edges:
                for x, y in ((a, b), (b, a)):
                    if x == i and y not in seen:
                        seen.add(y)
                        todo.append(y)
        lost = [self.names[i] for i in range(len(self.names)) if i not in seen]
        if lost:
            raise SourceError(f"the join edges do not connect {', '.join(lost)} to the others")


COMPOSITE_KEY = "__join_key"


def add_composite_keys(rels: list[Relation], graph: JoinGraph) -> None:
    """Give each input its composite key column (:attr:`JoinGraph.composite`): one code per
    distinct tuple of key values over all inputs, NaN when any part is null (a null matches
    nothing, as in SQL). Each part is first made comparable across inputs exactly
    (:func:`to_float_keys`), then the tuples are factorised jointly."""
    if not graph.composite:
        return
    width = len(graph.composite[0])
    parts = [to_float_keys(*(r.col(graph.composite[i][j]) for i, r in enumerate(rels)))
             for j in range(width)]
    sizes = [len(r) for r in rels]
    cols = [np.concatenate([parts[j][i] for i in range(len(rels))]) for j in range(width)]
    null = np.zeros(sum(sizes), bool)
    for c in cols:
        null |= np.isnan(c)
    codes, _ = pd.MultiIndex.from_arrays(cols).factorize()
    codes = np.where(null, np.nan, codes.astype(np.float64))
    bounds = np.cumsum([0, *sizes])
    for i, r in enumerate(rels):
        mine = codes[bounds[i]:bounds[i + 1]]
        r.columns = {**(r.columns or {}), COMPOSITE_KEY: mine}
        r.raw_key = mine


def _classes(graph: JoinGraph) -> dict[tuple[int, int], int]:
    """Union-find of (input, slot) over the edges: columns compared with each other share one
    key space (jointly factorised strings)."""
    parent: dict = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, sa, b, sb in graph.edges:
        parent[find((a, sa))] = find((b, sb))
    for i, sl in enumerate(graph.slots):
        for k in range(len(sl)):
            find((i, k))
    return {x: find(x) for x in list(parent)}


def build_stream(rels: list[Relation], *, order: str, seed: int, k: float | None,
                 band: float | None, order_params: dict | None = None,
                 graph: JoinGraph | None = None) -> Stream:
    """Interleave the inputs: by their ``seq`` columns if all have one, else (two inputs) by
    ``order`` (datagen.orders; it may also permute tuples within a relation) or (more inputs)
    a seeded random interleaving; then, with event time, stably by time: arrivals are ordered
    by (time, arrival number)."""
    n_in = len(rels)
    graph = graph or JoinGraph(("R", "S"), (("key",), ("key",)), ((0, 0, 1, 0),))
    cls = _classes(graph)
    slots = max(len(s) for s in graph.slots)
    converted: dict[tuple[int, int], np.ndarray] = {}
    for root in sorted(set(cls.values())):
        members = sorted(x for x, r in cls.items() if r == root)
        vals = to_float_keys(*(rels[i].col(graph.slots[i][s]) for i, s in members), band=band)
        converted.update(zip(members, vals, strict=True))
    sizes = [len(r) for r in rels]
    if all(r.seq is not None for r in rels):
        seq = np.concatenate([r.seq for r in rels])
        order_idx = np.argsort(seq, kind="stable")
        rel_all = np.repeat(np.arange(n_in), sizes)
        rel = rel_all[order_idx]
        pos = np.concatenate([np.arange(n) for n in sizes])[order_idx]
    elif n_in == 2:
        from datagen.orders import compute_arrival

        arr = compute_arrival(order, sizes[0], sizes[1], seed,
                              **order_kwargs(order, k, order_params))
        rel = np.where(arr.is_r, 0, 1)
        pos = np.empty(len(rel), np.int64)
        pos[arr.is_r] = arr.perm_r if arr.perm_r is not None else np.arange(sizes[0])
        pos[~arr.is_r] = arr.perm_s if arr.perm_s is not None else np.arange(sizes[1])
    else:
        rng = np.random.default_rng(seed)
        rel = rng.permutation(np.repeat(np.arange(n_in), sizes))
        pos = np.empty(len(rel), np.int64)
        for i in range(n_in):
            pos[rel == i] = np.arange(sizes[i])
    rel = np.asarray(rel, np.int8)
    n = len(rel)
    tid = np.empty(n, np.int64)
    attrs = np.full((n, slots), np.nan)
    time = np.empty(n) if all(r.time is not None for r in rels) else None
    for i, r in enumerate(rels):
        m = rel == i
        tid[m] = r.tid[pos[m]]
        for s in range(len(graph.slots[i])):
            attrs[m, s] = converted[(i, s)][pos[m]]
        if time is not None:
            time[m] = r.time[pos[m]]
    if time is not None:
        by_time = np.argsort(time, kind="stable")
        rel, tid, attrs, time = rel[by_time], tid[by_time], attrs[by_time], time[by_time]
    code = (n_in - 1 - rel).astype(np.uint64)  # two inputs: R 1, S 0 (Squall's routing)
    return Stream(rel == 0, tid, attrs[:, 0].copy(), tuple_u(seed, code, tid), sizes[0],
                  int(sum(sizes[1:])), rel, time, attrs if slots > 1 else None, tuple(sizes),
                  graph.names)
