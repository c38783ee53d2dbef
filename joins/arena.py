"""The metrics an online operator is judged by when several meet the same stream (the arena,
``experiments/kinds/arena.py``; beyond the papers): one time model for every operator, the
results over modeled time, and the counts behind them, from a run's exact per-micro-batch,
per-unit rows (:func:`joins.online.run_stream`'s ``metrics``).

Time model: per micro-batch the slowest unit's calibrated cost of its exact counts
(:class:`joins.online.CostModel` without its per-batch and per-unit constants, which are the
same for every operator on the same micro-batches), every tuple written to disk charged
``per_spilled`` and every tuple read back ``per_disk_probe`` whoever writes it: the engine's
spills and D-CAPE's pushes and clean-up reads are the engine's counts; the single-site
operators' (DINER and its baselines) are their cumulative disk blocks, differenced, times the
tuples of a block.

The equal-resources rule (:func:`unit_budget`): the same total memory M in tuples; a
distributed operator runs on J units with M / J each, a single-site operator (:func:`is_single_site`)
on one unit with M (``equal_total``, the arena's rule) or M / J (``equal_per_unit``, its
sensitivity).

One run's place under that rule (:func:`arena_setup`) and its outcome from the run's rows
(:func:`arena_outcome`: the DuckDB check, the metrics, the counts beside them) are here, not in
the experiment kind, so that the kind and ``python -m joins compare operators=...`` compute
them in one place and a user's stream is measured as the arena's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

RESOURCES = ("equal_total", "equal_per_unit")


def is_single_site(algorithm: str, params: dict) -> bool:
    """Whether the operator runs on one site: its routing policy on one unit is a
    :class:`~joins.online.layouts.OneSiteLayout` (an operator that cannot be built on one unit
    is distributed)."""
    from joins.online.layouts import OneSiteLayout
    from joins.online.operators import declared

    try:
        policy = declared()[algorithm](1, n_r=1, n_s=1, **params)
    except ValueError:
        return False
    return isinstance(getattr(policy, "layout", None), OneSiteLayout)


def unit_budget(resources: str, total_memory: int, units: int, single_site: bool) -> int:
    """One unit's memory in tuples under the equal-resources rule (see the module): ``units``
    is J, the distributed operators' units, whether this operator is distributed or not."""
    if resources not in RESOURCES:
        raise ValueError(f"run.resources must be one of {', '.join(RESOURCES)}, got "
                         f"{resources!r}")
    if single_site and resources == "equal_total":
        return max(1, int(total_memory))
    return max(1, int(total_memory) // units)


@dataclass(frozen=True)
class ArenaSetup:
    """One operator's place under the equal-resources rule: what its run is given."""

    operator: str
    single_site: bool
    units: int  # the units it runs on: 1 for a single site, J for a distributed operator
    memory_total: int  # M, tuples, the same for every operator
    budget: int  # one unit's memory in tuples (unit_budget)
    tups_per_block: int  # a single site's disk block in tuples: its blocks' share of the time


def _tups_per_block(operator: str, params: dict) -> int:
    """The operator's block size: its parameter, else its declared default (a single site
    left at its default still has its disk blocks charged as tuples), else 1 (no blocks)."""
    from joins.online.operators import declared

    if "tups_per_block" in params:
        return int(params["tups_per_block"])
    declared_param = getattr(declared().get(operator), "params", {}).get("tups_per_block")
    return int(declared_param.default) if declared_param is not None else 1


def arena_setup(operator: str, params: dict, *, units: int, memory_total: int,
                resources: str = "equal_total", single_site: bool | None = None) -> ArenaSetup:
    """Where ``operator`` (with its ``params``) runs and with how much memory when the
    distributed operators get ``units`` units (J) and all share ``memory_total`` tuples (M);
    ``single_site`` when the caller has read it already (:func:`is_single_site`)."""
    single = is_single_site(operator, params) if single_site is None else single_site
    return ArenaSetup(operator, single, 1 if single else int(units), int(memory_total),
                      unit_budget(resources, memory_total, int(units), single),
                      _tups_per_block(operator, params))


def arena_outcome(res: Any, *, missing: int, extra: int, output_rows: int, setup: ArenaSetup,
                  cost: Any, total: int) -> tuple[dict[str, tuple[float, str]], list[dict], str]:
    """A run's arena metrics (name -> (value, unit)), its results-over-modeled-time rows, and
    an error ("" when exact), from the caller's multiset check of its ``output_rows`` rows
    against DuckDB's join (``missing``, ``extra``: :func:`graph_mismatch` or
    :func:`joins.oracle.multiset_mismatch`); the join's size, which the shares are shares of,
    is DuckDB's. ``res`` is the :class:`joins.online.StreamResult`; ``total`` the input
    tuples."""
    expected = output_rows - extra + missing  # DuckDB's row count: ours - excess + missing
    metrics, series = arena_metrics(res.metrics, cost, expected=expected, budget=setup.budget,
                                    total=total, tups_per_block=setup.tups_per_block)
    metrics.update({
        "units": (setup.units, "units"), "memory_total_tuples": (setup.memory_total, "tuples"),
        "memory_per_unit_tuples": (setup.budget, "tuples"), "input_tuples": (total, "tuples"),
        "oracle_rows": (expected, "rows"), "rows_missing": (missing, "rows"),
        "rows_in_excess": (extra, "rows"), "exact": (float(not (missing or extra)), "flag"),
        "migrations": (res.summary.get("migrations", 0), "count"),
        "local_wall_time": (float(res.summary["local_wall_time"]), "local wall s"),
    })
    error = "" if not (missing or extra) else (
        f"differs from DuckDB's join: {missing} rows missing, {extra} rows in excess")
    return metrics, series, error


def graph_mismatch(rows: pd.DataFrame, inputs: dict[str, pd.DataFrame],
                   edges: list[tuple[str, str, str, str]], *, window: float | None = None,
                   time: str | None = None) -> tuple[int, int]:
    """(rows DuckDB's join has that ``rows`` lacks, rows in excess), with multiplicity, for a
    join of any number of inputs along ``edges``, within an event-time ``window`` when given:
    the oracle is :func:`joins.oracle.oracle_graph` (a window keeps the rows whose times lie
    within it), compared as :func:`joins.oracle.multiset_mismatch` compares a two-way join
    (each side's distinct rows with their counts, matched null-safely). Two inputs ``R`` and
    ``S`` carry the engine's ``l_`` / ``r_`` prefixes, n inputs their names'."""
    from joins.oracle import count_difference, oracle_graph_sql

    prefixes = {"R": "l_", "S": "r_"} if list(inputs) == ["R", "S"] else None
    con, select, params = oracle_graph_sql(inputs, edges, window=window, time=time,
                                           prefixes=prefixes)
    try:
        con.register("_output_rows", rows)
        return count_difference(con, select, "_output_rows", params)
    finally:
        con.close()


# the terms of the time model (CostModel.worker_cost without its per-unit constant, plus the
# single-site operators' disk blocks): name -> (cost constants, count columns)
TERMS = {
    "receive": (("per_received", "received"), ("per_store_received", "store_received")),
    "probe": (("per_probe", "probes"), ("per_nway_probe", "nway_probes")),
    "output": (("per_output", "outputs"),),
    "migrate": (("per_migrated", "migrated"), ("per_migrated", "sent")),
    "disk_write": (("per_spilled", "disk_written"),),
    "disk_read": (("per_disk_probe", "disk_read"),),
    "state": (("per_stored", "stored_now"), ("per_expired", "expired")),
}

TIME_SERIES_UNITS = {"results_share_t": "share of the join", "stream_end_t": "flag"}



def _block_counts(m: pd.DataFrame, tups_per_block: int) -> tuple[pd.Series, pd.Series]:
    """Tuples a single-site operator wrote to and read from disk in each row: its cumulative
    block counts (``blocks_written``, ``blocks_read``), differenced per unit, times the
    block's tuples; zero for operators without blocks."""
    out = []
    for col in ("blocks_written", "blocks_read"):
        if col not in m:
            out.append(pd.Series(0.0, index=m.index))
            continue
        cum = m[col].fillna(0).astype(float)
        order = m.sort_values(["worker", "batch"]).index
        step = cum.loc[order].groupby(m.loc[order, "worker"]).diff().fillna(cum.loc[order])
        out.append(step.reindex(m.index) * tups_per_block)
    return out[0], out[1]


def arena_costs(m: pd.DataFrame, cost, tups_per_block: int) -> pd.DataFrame:
    """Per (micro-batch, unit) row: each term's modeled seconds (:data:`TERMS`) and their sum
    ``cost``; the counts ``disk_written_tuples`` and ``disk_read_tuples`` (all operators
    alike)."""
    written, read = _block_counts(m, tups_per_block)

    def col(name: str) -> pd.Series:
        return m[name].fillna(0).astype(float) if name in m else pd.Series(0.0, index=m.index)

    counts = pd.DataFrame({
        "received": col("received"),
        "store_received": col("store_received") if "store_received" in m else col("received"),
        "probes": col("probes"), "nway_probes": col("nway_probes"), "outputs": col("outputs"),
        "migrated": col("migrated"), "sent": col("sent"),
        "disk_written": col("spilled") + written, "disk_read": col("disk_probes") + read,
        "stored_now": col("r_stored") + col("s_stored"), "expired": col("expired")})
    terms = pd.DataFrame({name: sum(float(getattr(cost, c)) * counts[n] for c, n in parts)
                          for name, parts in TERMS.items()}, index=m.index)
    terms["cost"] = terms.sum(axis=1)
    terms["disk_written_tuples"] = counts["disk_written"]
    terms["disk_read_tuples"] = counts["disk_read"]
    return terms


def time_to(cum_results: np.ndarray, cum_time: np.ndarray, batch_time: np.ndarray,
            batch_results: np.ndarray, need: float) -> float:
    """Modeled time at which ``need`` results are out: within the micro-batch that reaches it,
    interpolated linearly (its results spread evenly over its modeled time); NaN if never."""
    hit = np.flatnonzero(cum_results >= need - 1e-9)
    if need <= 0:
        return 0.0
    if not len(hit):
        return float("nan")
    b = int(hit[0])
    before = cum_results[b] - batch_results[b]
    start = cum_time[b] - batch_time[b]
    frac = (need - before) / batch_results[b] if batch_results[b] > 0 else 1.0
    return float(start + frac * batch_time[b])


def arena_metrics(m: pd.DataFrame, cost, *, expected: int, budget: int, total: int,
                  tups_per_block: int) -> tuple[dict, list[dict]]:
    """The arena's metrics and its results-over-modeled-time series from a run's per-batch,
    per-unit rows ``m`` (the engine's ``metrics``, with ``phase``)."""
    m = m.reset_index(drop=True)  # one label per row: the slowest unit is picked by label
    terms = arena_costs(m, cost, tups_per_block)
    rows = m.assign(**{c: terms[c] for c in terms.columns})
    slow = rows.loc[rows.groupby("batch")["cost"].idxmax()].sort_values("batch")
    per_batch = rows.groupby("batch").agg(results=("outputs", "sum"), phase=("phase", "first"))
    per_batch = per_batch.loc[slow["batch"].to_numpy()]
    bt = slow["cost"].to_numpy(float)
    br = per_batch["results"].to_numpy(float)
    ct, cr = np.cumsum(bt), np.cumsum(br)
    outputs = float(br.sum())
    normal = per_batch["phase"].to_numpy() == "normal"
    state = rows["r_stored"] + rows["s_stored"] + rows.get("pending", 0)
    in_memory = np.minimum(state, budget)
    if "memory_max" in rows:  # a single site's own high-water mark (its input buffer too)
        in_memory = np.maximum(in_memory, rows["memory_max"].fillna(0))
    work = rows.groupby("worker")["cost"].sum()
    metrics = {
        "modeled_time_50": (time_to(cr, ct, bt, br, 0.5 * expected), "modeled s"),
        "modeled_time_100": (time_to(cr, ct, bt, br, float(expected)), "modeled s"),
        "modeled_time": (float(ct[-1]) if len(ct) else 0.0, "modeled s"),
        "share_before_end": (float(br[normal].sum()) / expected if expected else float("nan"),
                             "share of the join"),
        "results_after_end": (float(br[~normal].sum()), "rows"),
        "peak_memory_per_unit": (float(in_memory.max()) if len(rows) else 0.0, "tuples"),
        "peak_state_per_unit": (float(state.max()) if len(rows) else 0.0, "tuples"),
        "network_tuples": (float(rows["received"].sum() + rows["migrated"].sum()), "tuples"),
        "network_per_input": (float(rows["received"].sum() + rows["migrated"].sum())
                              / max(1, total), "tuples per input tuple"),
        "load_max_mean": (float(work.max() / work.mean()) if work.mean() > 0 else 1.0,
                          "max / mean unit work"),
        "disk_written_tuples": (float(terms["disk_written_tuples"].sum()), "tuples"),
        "disk_read_tuples": (float(terms["disk_read_tuples"].sum()), "tuples"),
        "output_rows": (outputs, "rows"),
    }
    for name in TERMS:  # where each run's modeled time went (the slowest unit of each batch)
        metrics[f"time_term_{name}"] = (float(slow[name].sum()), "modeled s")
        # and up to 50% and 100% of the join, interpolated as the times are: the terms of a
        # time-to-a-share add up to it, so its ranking is explained by its own terms
        term = slow[name].to_numpy(float)
        for pct in (50, 100):
            metrics[f"time_term_{name}_to_{pct}"] = (
                time_to(cr, np.cumsum(term), term, br, pct / 100 * expected), "modeled s")
    series = [{"metric": "results_share_t", "t": 0.0, "value": 0.0}]
    series += [{"metric": "results_share_t", "t": float(t), "value": float(r) / expected}
               for t, r in zip(ct, cr, strict=True)] if expected else []
    if normal.any():
        series.append({"metric": "stream_end_t", "t": float(ct[np.flatnonzero(normal)[-1]]),
                       "value": 1.0})
    return metrics, [{**r, "unit": TIME_SERIES_UNITS[r["metric"]]} for r in series]
