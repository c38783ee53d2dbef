"""Experiment kind ``bistream_join``: one BiStream setting (JBx, JBx-CRy, JMx) on the timed
stream of a query (``datagen/bistream_streams``), run on the online engine, its exact
per-unit, per-micro-batch counts turned into the paper's metrics.

Figure keys: ``workload.params`` (``query``, ``sf``, ``rate``, ``rate_reading``; ``tuples``
per scale; ``rate_scaled: false`` keeps the paper's rate, where the figure base's scaling rule
says so), ``run``: ``model`` (``jb`` | ``jm``), ``units`` (x), ``contrand`` (y; none:
random routing), ``micro_batches``, ``window`` / ``archive_share`` / ``delay`` (seconds;
windowed joins with the chained index), ``memory_cliff`` (units past C work from disk),
``throughput_within_millions`` and ``dataset`` (throughput over the stream's start: Figs 7
and 8), ``aggregation`` (App. B's online aggregate: ``period``, ``mergers`` and the
sensitivity's ``periods`` / ``merger_tasks``), the 2PS keys (``scaling_scope``: Eq. 7's k
per subgroup or cluster-wide), ``stream_balance`` (which bytes per second the two streams
share equally: ``projected``, the default, or ``stored``: equal memory per stream, the
symmetric reading of the figure base's choices.memory_reading), and the figure base's rules:
``scale_factor`` per scale, ``capacity_gb`` (C per unit), ``tuple_overhead_bytes``.

One scaling rule for the paper: the small scale multiplies the unit capacity C and the input
rates by ``scale_factor``, so every processing volume (tuples held at C) is that factor times
the paper's and every window keeps its seconds; volumes, MLVs and bandwidths are reported
scaled back to the paper's scale (divided by the factor), labelled so. One memory rule: a
stored tuple takes its projected bytes (``bistream_streams.PROJECTED_BYTES``) plus
``tuple_overhead_bytes`` (the JVM object and index; the figure base says how it was fixed).
Bandwidth counts the projected bytes of every store and probe message.

Metrics: ``max_volume`` (the processing volume, input tuples of both streams, at which the
first unit's MLV reaches C: interpolated within the micro-batch from that unit's MLV, the
micro-batch's end when it cannot be), MLV (mean and max per unit) over the volume or over
event time, messages per input tuple and bandwidth per relation, and the join's results,
checked against DuckDB's count (full history) or a windowed count.

Throughput and latency come from modeled time, never the wall clock: each unit's modeled cost
in each micro-batch (the calibrated cost model on its exact counts) without the three costs of
Spark's micro-batches (``fixed_per_batch``, ``per_worker`` and ``per_stored``, the state's
handling once per micro-batch: Storm's tuple-at-a-time pipeline pays none of them), so a
micro-batch's time is that of its busiest unit (the pipeline's bottleneck). ``run.memory_cliff``: a unit past C keeps its tuples on disk (the engine's
``spill=charge`` with a budget of C over the larger stored tuple), so its new tuples cost a
spill and every probe at it a probe into spilled state, at the spill store's measured costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from omegaconf import OmegaConf

from experiments.figure_spec import plain
from experiments.kinds import (
    STEP_TUPLES,
    PointContext,
    PointOutcome,
    point_settings,
    point_spark,
    wall_clock_guard,
)
from experiments.kinds.batch_join import cached_value

GB = 1e9


def settings_label(model: str, units: int, contrand: int | None) -> str:
    """The paper's name of a setting: JB16, JB16-CR4, JM16."""
    base = f"{model.upper()}{units}"
    return f"{base}-CR{contrand}" if contrand and contrand > 1 else base


def crossing(volume: np.ndarray, mlv: np.ndarray, capacity: float) -> float:
    """The volume at which ``mlv`` (one unit's, per micro-batch end) first reaches
    ``capacity``, interpolated linearly inside the micro-batch; NaN if it never does."""
    hit = np.flatnonzero(mlv >= capacity)
    if not len(hit):
        return float("nan")
    i = int(hit[0])
    if i == 0 or mlv[i] == mlv[i - 1]:
        return float(volume[i])
    frac = (capacity - mlv[i - 1]) / (mlv[i] - mlv[i - 1])
    return float(volume[i - 1] + frac * (volume[i] - volume[i - 1]))


def pipelined_costs(m: pd.DataFrame, cost) -> pd.Series:
    """Each (batch, unit) row's modeled seconds without the micro-batch overheads: the
    per-row cost and the stored state's per-micro-batch handling (``per_stored`` charges
    every stored tuple once per micro-batch, so it grows with the number of micro-batches; a
    Storm bolt keeps its state in place between tuples)."""
    state = cost.per_stored * (m["r_stored"] + m["s_stored"])
    return (m["modeled_cost"] - cost.per_worker - state).clip(lower=0.0)


def unit_seconds(seconds: pd.Series, m: pd.DataFrame, batches: pd.Index) -> np.ndarray:
    """(micro-batch x unit) seconds of the metrics rows: each unit's work per micro-batch."""
    return seconds.groupby([m["batch"], m["worker"]]).sum().unstack(fill_value=0.0) \
        .reindex(batches, fill_value=0.0).to_numpy(float)


def pipeline_rate(tuples: float, work: np.ndarray) -> float:
    """A pipeline's throughput: the tuples over its busiest unit's summed seconds (the units
    work through their queues without waiting for each other)."""
    busiest = float(work.sum(axis=0).max()) if work.size else 0.0
    return tuples / busiest if busiest > 0 else float("nan")


def _throughput_metrics(m: pd.DataFrame, per: pd.DataFrame, cost, volume: np.ndarray,
                        factor: float, rows: list, within: float | None = None,
                        dataset: dict | None = None) -> dict:
    """Throughput (input tuples per modeled second) per micro-batch, over the run, in memory
    (the micro-batches before any unit's overflow flag: its budget of C over the larger
    stored tuple, so a unit of the smaller tuples spills from 97-98% of C) and past it.
    An average over many micro-batches is a pipeline's: the units work through their queues
    without waiting for each other, so it is the tuples over the busiest unit's summed cost
    (a micro-batch's own throughput, the series, is its tuples over its busiest unit's cost).
    ``within``: also the average over the stream's first ``within`` million tuples (paper
    scale); ``dataset``: the average over the first tuples of each data set size (``gb``)
    under each reading of a GB in million tuples (``tuples_per_gb``, Fig 8): a smaller data
    set is the longer one's start."""
    grid = unit_seconds(pipelined_costs(m, cost), m, per.index)
    tuples = m.groupby("batch")["tuples"].first().reindex(per.index).to_numpy(float)
    secs = grid.max(axis=1) if grid.size else np.zeros(len(per))
    over = m.groupby("batch")["overflow"].any().reindex(per.index).to_numpy(bool)
    for v, n, c in zip(volume, tuples, secs, strict=True):
        if c > 0:
            rows.append({"metric": "throughput_t", "t": v / factor / 1e6, "value": n / c,
                         "unit": "tuples/s (modeled, pipelined)"})
    first_over = int(np.argmax(over)) if over.any() else len(over)

    def rate(sl: slice) -> float:
        return pipeline_rate(float(tuples[sl].sum()), grid[sl])

    batch_time = cost.fixed_per_batch + m.groupby("batch")["modeled_cost"].max()
    out = {
        "throughput": (rate(slice(None)), "tuples/s (modeled, pipelined)"),
        "throughput_in_memory": (rate(slice(0, first_over)), "tuples/s (modeled, pipelined)"),
        "throughput_past_capacity": (rate(slice(first_over, None)),
                                     "tuples/s (modeled, pipelined)"),
        "throughput_microbatch": (float(tuples.sum() / batch_time.sum()),
                                  "tuples/s (modeled, Spark micro-batches)"),
        "overflow_volume_millions": (float(volume[first_over]) / factor / 1e6
                                     if first_over < len(volume) else float("nan"),
                                     "million tuples (paper scale)"),
        "spilled": (float(m["spilled"].sum()), "tuples"),
        "disk_probes": (float(m["disk_probes"].sum()), "probes"),
    }

    def first(want: float) -> float:  # the average over the stream's first `want` tuples
        if want > volume[-1] * 1.0001:
            raise ValueError(f"the stream holds {volume[-1]:.0f} tuples, {want:.0f} are "
                             "needed: make it longer")
        i = min(int(np.searchsorted(volume, want)), len(volume) - 1)
        before = volume[i - 1] if i else 0.0
        frac = (want - before) / tuples[i] if tuples[i] else 0.0
        work = np.vstack([grid[:i], frac * grid[i]])  # the last micro-batch in part
        return pipeline_rate(want, work)

    if within is not None:
        out["throughput_first"] = (first(float(within) * 1e6 * factor),
                                   "tuples/s (modeled, pipelined)")
    for reading, per_gb in (dataset or {}).get("tuples_per_gb", {}).items():
        prev = None
        for gb in dataset["gb"]:
            val = first(float(gb) * float(per_gb) * 1e6 * factor)
            out[f"throughput_{gb}gb_{reading}"] = (val, "tuples/s (modeled, pipelined)")
            if prev is not None:  # the average's change from the next smaller data set
                out[f"throughput_change_{gb}gb_{reading}"] = (val / prev, "ratio")
            prev = val
            rows.append({"metric": f"avg_throughput_{reading}", "t": float(gb), "value": val,
                         "unit": "tuples/s (modeled, pipelined)"})
    return out


def _latency_metrics(m: pd.DataFrame, cost) -> dict:
    """Result latency, modeled: a unit works through its micro-batch's deliveries, so its
    results come evenly over its busy time; a result's latency is where in that time it came
    (uniform over [0, the unit's pipelined cost]), weighted by the unit's results. The exact
    quantiles of that mixture (its CDF is piecewise linear), in milliseconds; its best case
    is 0 (a micro-batch's first result), its worst the busiest unit's cost. The absolute
    scale is the micro-batch's."""
    c = pipelined_costs(m, cost).to_numpy(float)
    w = m["outputs"].to_numpy(float)
    keep = (w > 0) & (c > 0)
    c, w = c[keep], w[keep]
    names = ("min", "p25", "p50", "p75", "max", "mean")
    if not len(c):
        return {f"latency_ms_{k}": (float("nan"), "ms (modeled)") for k in names}
    order = np.argsort(c)
    c, w = c[order], w[order]
    total = w.sum()
    # F(c_k) = (sum_{i<=k} w_i + c_k sum_{i>k} w_i / c_i) / total, linear between the c_k
    done = np.cumsum(w)
    rest = np.concatenate([np.cumsum((w / c)[::-1])[::-1][1:], [0.0]])
    xs = np.concatenate([[0.0], c])
    cdf = np.concatenate([[0.0], (done + c * rest) / total])

    def q(f: float) -> float:
        return float(np.interp(f, cdf, xs)) * 1e3

    return {"latency_ms_min": (0.0, "ms (modeled)"),
            **{f"latency_ms_p{int(f * 100)}": (q(f), "ms (modeled)") for f in (0.25, 0.5, 0.75)},
            "latency_ms_max": (float(c.max()) * 1e3, "ms (modeled)"),
            "latency_ms_mean": (float((c * w).sum() / total) / 2 * 1e3, "ms (modeled)")}


# App. B's aggregates: the bytes of one view-update message (the group's values and the
# aggregates: Q5 sum by n_name, Q7 sum by supplier nation and year, Band count, min and max)
AGG_MESSAGE_BYTES = {"eq5": 25 + 8, "eq7": 25 + 4 + 8, "bnci": 25 + 3 * 8}
PUNCTUATION_BYTES = 16  # a punctuation: its logical timestamp and a header (8 + 8 bytes)
BAND_GROUPS = 25  # Band's stand-in for the 25 nation names (choices.band_group in fig13/14)


def agg_group_columns(query: str) -> list[str]:
    """The group-by columns of a query's result rows: the streams' group-by attributes
    (:data:`datagen.bistream_streams.GROUP_COLUMNS`, R's l_-prefixed, S's r_-), or Band's
    stand-in ``band_group``."""
    from datagen.bistream_streams import GROUP_COLUMNS

    side = GROUP_COLUMNS.get(query, {})
    cols = [f"l_{c}" for c in side.get("R", ())] + [f"r_{c}" for c in side.get("S", ())]
    return cols or ["band_group"]


def _aggregation_metrics(out_df: pd.DataFrame, query: str, agg: dict, span: float,
                         m: pd.DataFrame, per: pd.DataFrame, cost, volume_tuples: np.ndarray
                         ) -> dict:
    """App. B: the local views' messages to the merger (unbatched and batched, exact from the
    result rows), their bandwidth at this scale, and the throughput with the views' work
    charged (each unit's updates; each merger task's merges of the messages of its groups).
    ``agg``: ``period`` (s of event time), ``mergers`` (tasks, default 1), and the verdicts'
    sensitivity: ``periods`` and ``merger_tasks`` to report as well."""
    from joins.online.aggregation import batched_messages, load_view_update

    cols = agg_group_columns(query)
    if cols == ["band_group"]:
        out_df = out_df.assign(band_group=out_df["l_key"] % BAND_GROUPS)
    groups = pd.MultiIndex.from_frame(out_df[cols]).factorize()[0]
    units = out_df["unit"].to_numpy()
    # a result's time: its later tuple's event time (a micro-batch's results all carry its
    # end as produced_at, and a micro-batch can be longer than the period)
    at = np.maximum(out_df["l_t"].to_numpy(float), out_df["r_t"].to_numpy(float))
    # a message reaches the merger task of its group in the micro-batch of its first result
    first = batched_messages(units, groups, at, float(agg["period"]))
    msgs = {"unbatched": len(units), "batched": len(first)}
    size = AGG_MESSAGE_BYTES[query]
    per_view = load_view_update()
    t1 = per["t1"].to_numpy(float)

    def batch_of(t: np.ndarray) -> np.ndarray:  # the micro-batch a result time belongs to
        return np.minimum(np.searchsorted(t1, t - 1e-9), len(t1) - 1)

    cost_rows = pipelined_costs(m, cost)
    # (micro-batch x unit) seconds, without and with each unit's view updates
    plain = unit_seconds(cost_rows, m, per.index)
    joiners = unit_seconds(cost_rows + per_view * m["outputs"], m, per.index)
    merge = cost.per_received + per_view  # a message delivered to a merger task and merged
    tuples = float(volume_tuples[-1]) if len(volume_tuples) else 0.0

    def rate(work: np.ndarray) -> float:
        return pipeline_rate(tuples, work)

    def merger_load(g: np.ndarray, t: np.ndarray, tasks: int) -> np.ndarray:
        """(micro-batch x merger task) seconds (groups hashed to tasks)."""
        load = np.zeros((len(t1), tasks))
        np.add.at(load, (batch_of(t), g % tasks), merge)
        return load

    without = rate(plain)
    out = {
        "view_messages_unbatched": (float(msgs["unbatched"]), "messages"),
        "view_messages_batched": (float(msgs["batched"]), "messages"),
        "view_batched_share": (msgs["batched"] / msgs["unbatched"] if msgs["unbatched"]
                               else float("nan"), "batched / unbatched messages"),
        "view_bandwidth_unbatched_kb_s": (msgs["unbatched"] * size / span / 1e3 if span
                                          else float("nan"), "KB/s (this scale)"),
        "view_bandwidth_batched_kb_s": (msgs["batched"] * size / span / 1e3 if span
                                        else float("nan"), "KB/s (this scale)"),
        "throughput_no_aggregation": (without, "tuples/s (modeled, pipelined)"),
        "per_view_update": (per_view, "s (calibration/view-update.json)"),
    }
    fg, ft = first["g"].to_numpy(), first["t"].to_numpy(float)
    for tasks in sorted({int(agg.get("mergers", 1)), *map(int, agg.get("merger_tasks", []))}):
        tag = "" if tasks == int(agg.get("mergers", 1)) else f"_{tasks}mergers"
        batched = rate(np.hstack([joiners, merger_load(fg, ft, tasks)]))
        out[f"throughput_aggregation_batched{tag}"] = (batched, "tuples/s (modeled, pipelined)")
        out[f"aggregation_throughput_share{tag}"] = (batched / without,
                                                      "with / without aggregation")
        out[f"throughput_aggregation_unbatched{tag}"] = (
            rate(np.hstack([joiners, merger_load(groups, at, tasks)])),
            "tuples/s (modeled, pipelined)")
    for other in map(float, agg.get("periods", [])):
        n = len(batched_messages(units, groups, at, other))
        out[f"view_batched_share_{other:g}s"] = (n / msgs["unbatched"] if msgs["unbatched"]
                                                 else float("nan"),
                                                 "batched / unbatched messages")
    return out


def _window_count(folder: Path, r: pd.DataFrame, s: pd.DataFrame, window: float | None,
                  band: float | None, tag: str = "") -> int:
    """DuckDB's count of the join (within the window), cached next to the inputs (``tag``
    names a part of the streams, e.g. Table 4's runs over the first seconds)."""
    from joins.oracle import oracle_count, oracle_join_sql

    def count() -> int:
        if window is None:
            return oracle_count(r, s, on="key", band=band)
        con, sql = oracle_join_sql(r, s, "key", "inner", band)
        return int(con.sql(f"SELECT count(*) FROM ({sql}) WHERE abs(l_t - r_t) <= "
                           f"{float(window)}").fetchone()[0])

    return int(cached_value(folder / f"oracle-bistream-w{window}-b{band}{tag}.json", "rows",
                            count))


def _window_metrics(per: pd.DataFrame, window: float, period: float, r: pd.DataFrame,
                    st: pd.DataFrame, mem_bytes: tuple[float, float], factor: float) -> dict:
    """A windowed run's memory: the plateau (mean MLV per unit from two windows on), its growth
    (the largest MLV of the run's last third over that of its middle third: 1 when memory is
    bounded), and the sawtooth (the largest drop of the stored bytes between micro-batches,
    over the bytes of one archive period of both streams)."""
    t = per["t1"].to_numpy(float)
    mean = per["mlv_mean"].to_numpy(float)
    total = per["mlv_sum"].to_numpy(float)
    end = float(np.nanmax(t)) if len(t) else 0.0
    late = t >= 2 * window
    third = (end - t.min()) / 3 if len(t) else 0.0
    mid = (t >= t.min() + third) & (t < t.min() + 2 * third)
    last = t >= t.min() + 2 * third
    span = end - float(min(r["t"].min(), st["t"].min()))
    rates = (len(r) / span, len(st) / span) if span > 0 else (0.0, 0.0)
    period_bytes = period * (rates[0] * mem_bytes[0] + rates[1] * mem_bytes[1])
    drops = -np.diff(total)
    return {
        "mlv_plateau_gb": (float(mean[late].mean()) / factor / GB if late.any() else np.nan,
                           "GB per unit (memory rule, paper scale)"),
        "mlv_growth": (float(mean[last].max() / mean[mid].max()) if mid.any() and last.any()
                       and mean[mid].max() > 0 else np.nan, "max last third / max middle third"),
        "sawtooth_drop_share": (float(drops.max() / period_bytes) if len(drops) and
                                period_bytes > 0 else np.nan,
                                "largest drop / one archive period's bytes"),
    }


def _scaling_metrics(decisions: pd.DataFrame, r: pd.DataFrame, st: pd.DataFrame,
                     m: pd.DataFrame, per: pd.DataFrame, rows: list,
                     quiet: list | None) -> dict:
    """2PS: the units added and removed, when, and the decisions inside ``quiet`` (a
    [from, to] minute range where the paper saw none); the units in force over event time
    join the series."""
    times = np.sort(np.concatenate([r["t"].to_numpy(), st["t"].to_numpy()]))
    dec = decisions[decisions["delta"].notna()] if "delta" in decisions else decisions.iloc[:0]
    at_min = times[np.minimum(dec["at"].to_numpy(int), len(times) - 1)] / 60.0 \
        if len(dec) else np.zeros(0)
    # a decision may add units to one subgroup and remove them from another
    grow = dec["delta_out"].to_numpy(float) if len(dec) else np.zeros(0)
    shrink = dec["delta_in"].to_numpy(float) if len(dec) else np.zeros(0)
    units = m.groupby("batch").agg(n=("n", "first"), m=("m", "first"))
    for t, (a, b) in zip(per["t1"], units.itertuples(index=False), strict=True):
        rows.append({"metric": "units_t", "t": float(t), "value": float(a + b),
                     "unit": "units in force"})
    lo, hi = (quiet or [np.nan, np.nan])
    return {
        "scale_out_units": (float(grow.sum()), "units"),
        "scale_in_units": (float(-shrink.sum()), "units"),
        "scale_actions": (float(len(dec)), "count"),
        "first_scale_out_minute": (float(at_min[grow > 0].min()) if (grow > 0).any()
                                   else np.nan, "event-time minutes"),
        "first_scale_in_minute": (float(at_min[shrink < 0].min()) if (shrink < 0).any()
                                  else np.nan, "event-time minutes"),
        "actions_in_quiet": (float(((at_min >= lo) & (at_min <= hi)).sum()), "count"),
        "units_max": (float((units["n"] + units["m"]).max()), "units"),
        "units_final": (float((units["n"] + units["m"]).iloc[-1]), "units"),
    }


def _model_metrics(model: str, units: int, contrand, msgs: dict, deliveries_bytes: float,
                   r: pd.DataFrame, st: pd.DataFrame, mem_bytes: tuple[float, float],
                   per: pd.DataFrame, full_history: bool) -> dict:
    """The engine's counts over the paper's closed forms (§4): memory W_bi = chi_R |R| +
    chi_S |S| (Eq. 1) or W_mat = n chi_R |R| + m chi_S |S| (Eq. 2), at the end of a
    full-history run; bandwidth B_bi = (n/e + 1) Sigma_R + (m/d + 1) Sigma_S (Eq. 5) or
    B_mat = n Sigma_R + m Sigma_S (Eq. 6), with Sigma the projected bytes of each stream."""
    n_r, n_s = len(r), len(st)
    sig_r, sig_s = msgs["R"][3] * n_r, msgs["S"][3] * n_s
    if model == "jm":
        side = int(round(np.sqrt(units)))
        w_model = side * (mem_bytes[0] * n_r + mem_bytes[1] * n_s)
        b_model = side * (sig_r + sig_s)
    else:
        y = int(contrand) if contrand else 1
        half_r, half_s = units // 2, units - units // 2
        w_model = mem_bytes[0] * n_r + mem_bytes[1] * n_s
        b_model = (half_s / y + 1) * sig_r + (half_r / y + 1) * sig_s
    w = float(per["mlv_sum"].iloc[-1]) if len(per) else 0.0
    return {
        "memory_over_model": (w / w_model if full_history and w_model else np.nan,
                              "measured / Eq. 1-2"),
        "bandwidth_over_model": (deliveries_bytes / b_model if b_model else np.nan,
                                 "measured / Eq. 5-6"),
    }


def scale_rate(params: dict, factor: float) -> float:
    """The scaling rule on a stream's ``params`` (in place): the rate times ``factor``, or the
    paper's own rate where ``rate_scaled`` is false (the figure base's choices.scale says
    where: Fig 14's Band); ``rate_scaled`` is removed (the generator does not take it).
    Returns what the rate was multiplied by."""
    rate_factor = float(factor) if params.pop("rate_scaled", True) else 1.0
    params["rate"] = float(params["rate"]) * rate_factor
    return rate_factor


STREAM_BALANCES = ("projected", "stored")


def balance_streams(params: dict, run: dict) -> None:
    """The memory reading on a stream's ``params`` (in place): with ``stream_balance: stored``
    the generator balances the streams' stored bytes per second (projected bytes plus the
    memory rule's ``tuple_overhead_bytes``: equal memory per stream), with ``projected`` (the
    default) their projected bytes."""
    balance = str(run.get("stream_balance", "projected"))
    if balance not in STREAM_BALANCES:
        raise ValueError(f"run.stream_balance must be one of {', '.join(STREAM_BALANCES)}, "
                         f"not {balance!r}")
    if balance == "stored":
        params["stored_overhead_bytes"] = float(run["tuple_overhead_bytes"])


@dataclass
class Setup:
    """One point's inputs and setting, at this scale."""

    run: dict
    params: dict
    factor: float
    rate_factor: float  # what the rates were multiplied by (the factor, or 1: the paper's)
    folder: Path
    r: pd.DataFrame
    st: pd.DataFrame
    band: float | None
    proj: tuple[int, int]
    mem_bytes: tuple[float, float]
    capacity: float
    model: str
    units: int
    contrand: int | None
    op: str
    op_params: dict


def _setup(pc: PointContext) -> Setup:
    from datagen import materialize
    from datagen.bistream_streams import GROUP_COLUMNS, PROJECTED_BYTES
    from datagen.squall_query import QUERIES

    s = point_settings(pc)
    wl, run = s["workload"], s["run"]
    factor = float(run["scale_factor"])
    params = plain(OmegaConf.create(dict(wl["params"])))  # nested lists (a rate profile)
    by_x = plain(OmegaConf.create(dict(wl.get("params_by_x") or {})))
    params.update(by_x.get(str(pc.x), {}))  # e.g. Table 4's query and rate per row
    rate_factor = scale_rate(params, factor)
    balance_streams(params, run)
    params.setdefault("seed", pc.seed)
    folder = Path(materialize("bistream_streams", params, progress=pc.progress))
    # App. B's aggregates need the streams' group-by attributes
    extra = GROUP_COLUMNS.get(params["query"], {}) if run.get("aggregation") else {}
    r = pd.read_parquet(folder / "R.parquet", columns=["key", "t", *extra.get("R", ())])
    st = pd.read_parquet(folder / "S.parquet", columns=["key", "t", *extra.get("S", ())])
    query = QUERIES[params["query"]]
    proj = PROJECTED_BYTES[params["query"]]
    overhead = float(run["tuple_overhead_bytes"])
    capacity = float(run["capacity_gb"]) * GB * factor
    model, units = str(run["model"]), int(run["units"])
    contrand = run.get("contrand")
    op_params = {"contrand": int(contrand)} if model == "jb" and contrand else {}
    if run.get("elastic"):  # 2PS against the unit capacity at this scale
        # one rule: the first check once a window (and an archive period) has filled
        warm = float(run["window"]) * (1 + float(run.get("archive_share", 0.1))) \
            if run.get("window") is not None else 0.0
        op_params.update(elastic=str(run["elastic"]), capacity=capacity, warmup=warm,
                         **{k: run[k] for k in ("t_high", "t_low", "psi", "check_every",
                                                "confirmations", "scaling_scope")
                            if run.get(k) is not None})
    return Setup(run, params, factor, rate_factor, folder, r, st,
                 float(query.band) if query.predicate == "band" else None, proj,
                 (proj[0] + overhead, proj[1] + overhead), capacity, model, units,
                 int(contrand) if contrand else None,
                 {"jb": "join_biclique", "jm": "join_matrix"}[model], op_params)


def _stream(spark, pc: PointContext, su: Setup, r: pd.DataFrame, st: pd.DataFrame,
            window: float | None):
    """One engine run of the setting (a window with the chained index when given)."""
    from joins.calibrated import cost_model
    from joins.online import run_stream

    run = su.run
    timed: dict = {"time": "t"}  # event time: each micro-batch's t0 and t1
    if window is not None:
        timed = dict(time="t", window=float(window),
                     archive=float(run.get("archive_share", 0.1)) * float(window),
                     delay=float(run.get("delay", 0.0)))
    batch = max(1, -(-(len(r) + len(st)) // int(run.get("micro_batches", 200))))
    if run.get("memory_cliff"):  # past C a unit's tuples are on disk: charged, not lost
        timed.update(memory_budget_tuples=int(su.capacity // max(su.mem_bytes)),
                     spill="charge")
    with wall_clock_guard(spark, pc.wall_limit_s, f"{pc.figure['id']} {pc.series} x={pc.x}"):
        return run_stream(spark, r, st, on="key", operator=su.op, joiners=su.units,
                          band=su.band, batch_size=batch, seed=int(su.params["seed"]),
                          progress=pc.progress, cost=cost_model(pc.calibration, run),
                          tuple_bytes=su.mem_bytes, collect_output=bool(run.get("aggregation")),
                          step_tuples=STEP_TUPLES,
                          **timed, **su.op_params)


def _per_batch(m: pd.DataFrame) -> pd.DataFrame:
    return m.groupby("batch").agg(r_seen=("r_seen", "first"), s_seen=("s_seen", "first"),
                                  t1=("t1", "first"), mlv_max=("mlv_bytes", "max"),
                                  mlv_mean=("mlv_bytes", "mean"), mlv_sum=("mlv_bytes", "sum"))


def _first_unit_crossing(m: pd.DataFrame, per: pd.DataFrame, along: np.ndarray,
                         capacity: float) -> float:
    """Where (in ``along``: volume or time) the unit that gets fullest first reaches C."""
    top = m.loc[m["mlv_bytes"].idxmax(), "worker"] if len(m) else None
    unit = m[m["worker"] == top].set_index("batch")["mlv_bytes"].reindex(per.index).fillna(0)
    return crossing(along, unit.to_numpy(float), capacity)


def _max_window_point(pc: PointContext, spark, out: PointOutcome, su: Setup) -> PointOutcome:
    """Table 4: the largest window whose chained index keeps every unit below C. A
    full-history run gives the event time t_C at which a unit fills; the window that holds
    as much, t_C / (1 + P/window), is where the search starts; windowed runs then bracket the
    answer: the largest window tried that fits, and one 5% larger that overflows."""
    rate = (len(su.r) + len(su.st)) / max(su.r["t"].max(), su.st["t"].max())
    # no unit fills later than all units' memory would (each tuple stored at least once):
    # the full-history run stops there, or runs the whole stream if it must
    horizon = 1.3 * su.units * su.capacity / min(su.mem_bytes) / rate
    wrong: list[str] = []  # runs whose results differ from DuckDB's count
    runs: list[int] = []

    def checked(res, r: pd.DataFrame, st: pd.DataFrame, window: float | None, tag: str):
        expected = _window_count(su.folder, r, st, window, su.band, tag)
        got = int(res.metrics["outputs"].sum())
        runs.append(got)
        if got != expected:
            wrong.append(f"window {window} ({tag[1:]}): {got} results, the join has "
                         f"{expected}")
        return res

    for limit in (horizon, np.inf):
        r, st = su.r[su.r["t"] <= limit], su.st[su.st["t"] <= limit]
        full = checked(_stream(spark, pc, su, r, st, None), r, st, None, f"-limit{limit:.6g}")
        per = _per_batch(full.metrics)
        t_c = _first_unit_crossing(full.metrics, per, per["t1"].to_numpy(float), su.capacity)
        if np.isfinite(t_c):
            break
    share = float(su.run.get("archive_share", 0.1))
    if not np.isfinite(t_c):
        out.status, out.error = "error", "the full-history stream never fills a unit: longer"
        return out
    tried: dict[float, bool] = {}

    def fits(window: float) -> bool:
        span = 2.5 * window * (1 + share)  # past the first discards: the steady sawtooth
        r, st = su.r[su.r["t"] <= span], su.st[su.st["t"] <= span]
        if max(r["t"].max(), st["t"].max()) < 0.99 * span:
            raise ValueError(f"the stream is shorter than {span:.0f} s: make it longer")
        res = checked(_stream(spark, pc, su, r, st, window), r, st, window, f"-span{span:.6g}")
        tried[window] = bool(res.metrics["mlv_bytes"].max() < su.capacity)
        return tried[window]

    w = 0.97 * t_c / (1 + share)
    for _ in range(5):
        if fits(w):
            if not fits(1.05 * w):
                break
            w *= 1.05
        else:
            w /= 1.05
    ok = [x for x, f in tried.items() if f]
    over = [x for x, f in tried.items() if not f and ok and x > max(ok)]
    best = max(ok) if ok else float("nan")
    rate /= su.rate_factor  # at the paper's scale
    out.metrics.update({
        "max_window_s": (best, "s of event time"),
        "overflow_window_s": (min(over) if over else float("nan"), "s of event time"),
        "bracketed": (float(bool(over)), "flag"),
        "window_tuples_millions": (best * rate / 1e6, "million tuples (paper scale)"),
        "fill_time_s": (t_c, "s of event time (full history)"),
        "window_runs": (float(len(tried)), "runs"),
        "runs_checked": (float(len(runs)), "runs checked against DuckDB's count"),
    })
    if wrong:
        out.status, out.error = "error", "; ".join(wrong)
        return out
    if not over:
        out.status, out.error = "error", f"no overflowing window above {best:.0f} s was found"
    return out


def run_point(pc: PointContext) -> PointOutcome:
    from joins.calibrated import cost_model

    spark, out = point_spark(pc)
    su = _setup(pc)
    if su.run.get("search") == "max_window":
        return _max_window_point(pc, spark, out, su)
    run, factor, r, st, folder = su.run, su.factor, su.r, su.st, su.folder
    band, proj, mem_bytes, capacity = su.band, su.proj, su.mem_bytes, su.capacity
    model, units, contrand = su.model, su.units, su.contrand
    window = run.get("window")
    total = len(r) + len(st)
    res = _stream(spark, pc, su, r, st, window)
    m = res.metrics
    per = _per_batch(m)
    volume = (per["r_seen"] + per["s_seen"]).to_numpy(float)
    max_volume = _first_unit_crossing(m, per, volume, capacity)
    rows = []
    for v, mean, mx, t in zip(volume, per["mlv_mean"], per["mlv_max"], per["t1"],
                              strict=True):
        x = v / factor / 1e6 if window is None else float(t)
        for name, val in (("mlv_mean_t", mean), ("mlv_max_t", mx)):
            rows.append({"metric": name, "t": x, "value": float(val) / factor / GB,
                         "unit": "GB per unit (memory rule, paper scale)"})
    out.series_rows = rows
    span = float(max(r["t"].max() if len(r) else 0, st["t"].max() if len(st) else 0))
    msgs = {}  # per relation: store and probe deliveries, and messages (a JM cell's one)
    for side, chi in (("R", proj[0]), ("S", proj[1])):
        msgs[side] = (float(m[f"store_received_{side}"].sum()),
                      float(m[f"probe_received_{side}"].sum()),
                      float(m[f"received_{side}"].sum()), chi)
    deliveries_bytes = sum(n * chi for _, _, n, chi in msgs.values())
    out.metrics.update(_model_metrics(model, units, contrand, msgs, deliveries_bytes, r, st,
                                      mem_bytes, per, window is None))
    cost = cost_model(pc.calibration, run)
    out.metrics.update(_throughput_metrics(m, per, cost, volume, factor, rows,
                                           run.get("throughput_within_millions"),
                                           run.get("dataset")))
    out.metrics.update(_latency_metrics(m, cost))
    if run.get("aggregation"):
        out.metrics.update(_aggregation_metrics(res.output, su.params["query"],
                                                dict(run["aggregation"]), span, m, per, cost,
                                                volume))
    outputs = float(m["outputs"].sum())
    expected = _window_count(folder, r, st, window, band)
    if run.get("elastic"):
        out.metrics.update(_scaling_metrics(res.decisions, r, st, m, per, rows,
                                            run.get("quiet_minutes")))
    if window is not None:
        out.metrics.update(_window_metrics(per, float(window),
                                           float(run.get("archive_share", 0.1)) * float(window),
                                           r, st, mem_bytes, factor))
    out.metrics.update({
        "max_volume": (max_volume / factor, "tuples (paper scale)"),
        "max_volume_millions": (max_volume / factor / 1e6, "million tuples (paper scale)"),
        "volume_per_unit_millions": (max_volume / factor / 1e6 / units,
                                     "million tuples per unit (paper scale)"),
        "saturated": (float(np.isfinite(max_volume)), "flag"),
        "mlv_final_max_gb": (float(per["mlv_max"].iloc[-1]) / factor / GB if len(per) else 0.0,
                             "GB (memory rule, paper scale)"),
        "mlv_final_mean_gb": (float(per["mlv_mean"].iloc[-1]) / factor / GB if len(per)
                              else 0.0, "GB (memory rule, paper scale)"),
        "messages_per_tuple": ((msgs["R"][2] + msgs["S"][2]) / max(1, total), "messages"),
        "stores_per_tuple": ((msgs["R"][0] + msgs["S"][0]) / max(1, total), "messages"),
        "probes_per_tuple": ((msgs["R"][1] + msgs["S"][1]) / max(1, total), "messages"),
        "bandwidth_mb_s": (deliveries_bytes / span / su.rate_factor / 1e6 if span
                           else float("nan"),
                           "MB/s (projected bytes, paper scale)"),
        # the order-consistent protocol's punctuations, modeled: each stream's router sends
        # one to every unit it feeds per interval (every unit: a unit stores one relation and
        # is probed by the other's router), whatever the rate
        "punctuation_mb_s": (2 * units * PUNCTUATION_BYTES
                             / float(run.get("punctuation_every", 1.0)) / 1e6,
                             "MB/s (modeled: 2 routers x units per interval)"),
        "results": (outputs, "rows"),
        "oracle_rows": (float(expected), "rows"),
        "input_tuples": (float(total), "tuples"),
        "capacity_tuples_r": (capacity / mem_bytes[0], "tuples per unit (this scale)"),
        "modeled_time": (float(res.summary.get("modeled_time", float("nan"))), "modeled s"),
        "local_wall_time": (float(res.summary["local_wall_time"]), "local wall s"),
    })
    if int(outputs) != expected:
        out.status = "error"
        out.error = f"{int(outputs)} results, the join has {expected}"
    return out
