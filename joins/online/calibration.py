"""Calibration of the online cost model (:class:`joins.online.cost.CostModel`).

A cost model that charges what it counts: each constant is measured by runs that vary its
count alone (:func:`calibrate_per_count`, ``make calibrate ARGS=parts=percount``); a constant
of 0 needs a run that measured it as negligible. Which runs measure which constant
(:func:`count_experiments`; every slope is an OLS over (run, repeat) points of the runs' summed
worker CPU seconds, with its standard error):

- ``per_output``: ``output_pairs`` - shj, the same tuples, deliveries, probes and stored
  state; the key domain sets the outputs (0, 5n, 20n); the result pairs are materialised.
  ``output_count_only`` (the same with outputs only counted, as the published experiments
  run) is recorded beside it: there a result costs nothing measurable.
- ``per_received``, ``per_store_received``, ``per_probe``: three designs, since a delivery
  that is stored and probes (grid, hash) cannot separate them: ``store_received`` -
  join_biclique (1, 7) with 7|R| + |S| probe-only deliveries held and |R| + |S| store-only
  ones varied (slope S = per_received + per_store_received); ``probe_received`` - the same
  layout with the store-only deliveries held and the probe-only ones varied (each is one
  probe: P = per_received + per_probe); ``both_received`` - shj, deliveries that are stored
  and probe (B = per_received + per_store_received + per_probe). Hence per_received =
  S + P - B, per_store_received = B - P, per_probe = B - S.
- ``per_expired``: ``expired`` - shj with event times, the same tuples and ticks, a window
  of none, 400, 100, 20 time units; the window sets both what expires and what stays stored
  (summed over the micro-batches): both fitted jointly; the stored state's slope there
  (expiry scans it every tick) is recorded, not charged.
- n-way probes (checks, not constants): ``mjoin3_received`` (3-input mjoin, a delivery is
  stored and probes once; compare with B) and ``mjoin3_probes`` (smaller domains add the
  second-step probes of partial matches; outputs charged at per_output first).

The stored state grows with the stored tuples in the store and both designs, and no design
here separates a store delivery from the state it adds outside a window: the stored state is
charged at the calibration in force's per_stored before their slopes. fixed_per_batch,
per_worker, per_migrated and per_stored no per-count run varies: ``make calibrate`` (:func:`calibrate`) fits them by
non-negative least squares on mixed engine runs with the per-count constants kept as given
(the NNLS fit alone set per_output and per_received to 0: it charged a store-only delivery
nothing, which the store_received runs contradict). The spill store's constants are measured
apart (:mod:`joins.online.spill_store`).

Apart from :mod:`joins.online.cost` because it runs the engine (``run_stream``), which itself
depends on the cost model: keeping them apart keeps the imports acyclic.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from joins.online import spill_store
from joins.online.cost import CostModel, fit
from runtime.cost_model import r_squared


class CalibrationRun(NamedTuple):
    operator: str
    joiners: int
    r_tuples: int
    s_tuples: int
    domain: int  # distinct keys
    r_zipf: float  # Zipf z of R's keys (S's are uniform)
    batch_size: int  # tuples per micro-batch
    spill: bool = False  # a tight memory budget, overflow really written to disk


# Each run varies one thing against the others, so that the terms the fit separates are not
# collinear: few vs many outputs per probe (domain, skew), grid replication vs one joiner per
# key (probes and stored per received tuple), small vs large micro-batches, 4 vs 16 joiners
# (per-worker cost), migrations (dynamic) and spills.
CALIBRATION_RUNS: tuple[CalibrationRun, ...] = (
    CalibrationRun("shj", 4, 60_000, 180_000, 1_000_000, 0.0, 20_000),
    CalibrationRun("static_mid", 4, 60_000, 180_000, 1_000_000, 0.0, 20_000),
    CalibrationRun("static_mid", 16, 60_000, 180_000, 1_000_000, 0.0, 40_000),
    CalibrationRun("shj", 4, 60_000, 180_000, 20_000, 0.0, 20_000),
    CalibrationRun("static_mid", 4, 30_000, 90_000, 3_000, 0.0, 8_000),
    CalibrationRun("static_mid", 4, 60_000, 180_000, 10_000, 1.0, 30_000),
    CalibrationRun("shj", 16, 200_000, 200_000, 1_000_000, 0.0, 50_000),
    CalibrationRun("dynamic", 4, 60_000, 180_000, 30_000, 1.0, 20_000),
    CalibrationRun("dynamic", 16, 40_000, 200_000, 100_000, 0.0, 30_000),
    CalibrationRun("static_mid", 4, 60_000, 180_000, 50_000, 0.0, 20_000, spill=True),
)


def _keys(rng: np.random.Generator, n: int, domain: int, z: float) -> np.ndarray:
    if z == 0:
        return rng.integers(0, domain, n)
    p = 1.0 / np.arange(1, domain + 1) ** z
    return rng.choice(domain, size=n, p=p / p.sum())


def calibrate(spark, *, runs: tuple[CalibrationRun, ...] = CALIBRATION_RUNS, repeats: int = 3,
              seed: int = 0, out: str | Path | None = None, known: dict | None = None,
              clock: str = "seconds") -> dict:
    """Measure the cost constants on this machine (run by ``make calibrate``).

    Runs the engine on the synthetic equi-join streams of :data:`CALIBRATION_RUNS`, each
    ``repeats`` times (the counts are deterministic, the times are not: a (micro-batch,
    worker) row's time is the median over the repeats), then fits :func:`fit` on every row,
    with the costs of writing and probing spilled state measured apart on the spill store
    (:func:`joins.online.spill_store.measure`: the engine's spill keeps its in-memory index,
    so its runs cannot show what a probe into spilled state costs).
    Returns the constants (and writes them as JSON to ``out`` when given), with
    ``calibration_id`` = time stamp and fit quality: ``r2`` over the rows, ``r2_runs`` over
    the runs' total worker seconds (what a modeled time sums; single rows are a few ms of
    numpy and noisy). ``known``: constants measured one count at a time
    (:func:`calibrate_per_count`), kept as given: the fit then only finds the ones no
    per-count run measures (per_worker, per_migrated, per_stored, fixed_per_batch).
    ``clock``: the worker time fitted, ``seconds`` (elapsed) or ``cpu_seconds`` (as the
    per-count constants).
    """
    rng = np.random.default_rng(seed)
    frames, walls = [], []
    for i, run in enumerate(runs):
        m, wall = _measure_run(spark, run, i, rng, seed, repeats)
        frames.append(m)
        walls.append(pd.concat({i: wall}, names=["run", "batch"]))
    metrics = pd.concat(frames, ignore_index=True)
    # the workers of a micro-batch share the machine's cores
    disk = spill_store.measure()
    consts = fit(metrics, pd.concat(walls), cores=spark.sparkContext.defaultParallelism,
                 known={**{k: disk[k] for k in ("per_spilled", "per_disk_probe")},
                        **(known or {})}, clock=clock)
    consts["calibration_id"] = "calibrated-" + time.strftime("%Y%m%dT%H%M%S")
    model = replace(CostModel(), **{k: float(v) if k != "calibration_id" else v
                                   for k, v in consts.items() if k in CostModel.__dataclass_fields__})
    per_run = metrics.assign(predicted=model.worker_cost(metrics)).groupby("run")
    r2_runs = r_squared(per_run[clock].sum(), per_run["predicted"].sum())
    result = {**model.to_dict(), "r2": consts["r2"], "r2_runs": r2_runs, "rows": len(metrics),
              "spill_store": disk["spill_store"]}
    _write_json(out, result)
    return result


def _measure_run(spark, run: CalibrationRun, i: int, rng: np.random.Generator, seed: int,
                 repeats: int) -> tuple[pd.DataFrame, pd.Series]:
    """Run ``i`` of the calibration ``repeats`` times: its metrics with each (micro-batch,
    worker) row's median time, and each micro-batch's median wall time."""
    from joins.online import run_stream

    r = pd.DataFrame({"key": _keys(rng, run.r_tuples, run.domain, run.r_zipf)})
    s = pd.DataFrame({"key": _keys(rng, run.s_tuples, run.domain, 0.0)})
    options = dict(operator=run.operator, joiners=run.joiners, seed=seed + i,
                   batch_size=run.batch_size, progress=False)
    if run.operator == "dynamic":
        options["warmup"] = run.r_tuples // 10
    if run.spill:
        options.update(memory_budget_tuples=(run.r_tuples + run.s_tuples) // (run.joiners * 2),
                       spill="disk")
    measured = [run_stream(spark, r, s, **options).metrics
                .sort_values(["batch", "worker"]).reset_index(drop=True)
                for _ in range(repeats)]
    m = measured[0]
    counts = ["received", "outputs", "migrated"]
    if any(not o[counts].equals(m[counts]) for o in measured[1:]):
        raise RuntimeError("calibration run's counts differ between repeats")
    m = m.assign(run=i, **{c: np.median([o[c].to_numpy() for o in measured], axis=0)
                           for c in ("seconds", "cpu_seconds") if c in m.columns})
    wall = pd.concat([o.groupby("batch")["batch_wall_seconds"].first() for o in measured],
                     axis=1).median(axis=1)
    return m, wall


def _write_json(out: str | Path | None, result: dict) -> None:
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(result, indent=2))


# --- per-count calibration ---------------------------------------------------------------------
# Each experiment is a few engine runs that differ in ONE count and hold the others as far as
# the engine allows; a constant is the slope of the runs' total worker seconds on that count
# (ordinary least squares over every (run, repeat) point, with its standard error).


class CountRun(NamedTuple):
    """One engine run of a per-count experiment: inputs of ``sizes`` tuples (one per input),
    keys uniform over ``domain``, split into ``batches`` micro-batches (or ``tick``-cut when
    the inputs carry event times over ``span``)."""

    operator: str
    sizes: tuple[int, ...]
    domain: int
    batches: int = 5
    joiners: int = 4
    options: tuple = ()  # (name, value) pairs for run_stream (r_units, window, tick...)
    span: float | None = None  # event times uniform over [0, span) (windowed runs)
    collect: bool = False  # materialise the result pairs (collect_output)


class CountExperiment(NamedTuple):
    name: str
    count: str  # the metrics column that varies (``tuples``: received deliveries per tuple)
    runs: tuple[CountRun, ...]
    what: str  # what is held, and how
    also: tuple[str, ...] = ()  # counts that inevitably co-vary: fitted jointly (OLS)


_HUGE = 10**12  # a key domain where no two keys meet: no outputs


def count_experiments(n: int = 20_000) -> tuple[CountExperiment, ...]:
    """The per-count experiments at ``n`` tuples per input (the default is small: a run is a
    few seconds on 2 cores)."""
    return (*_output_experiments(n), *_delivery_experiments(n), *_state_experiments(n),
            *_nway_experiments(n))


def _output_experiments(n: int) -> tuple[CountExperiment, ...]:
    """The outputs, with result pairs materialised or only counted."""
    return (
        CountExperiment(
            "output_pairs", "outputs",
            tuple(CountRun("shj", (n, n), d, collect=True) for d in (_HUGE, n // 5, n // 20)),
            "shj, same tuples, deliveries, probes and stored; the key domain (none meet, n/5, "
            "n/20) sets the outputs (0, 5n, 20n); the result pairs are materialised"),
        CountExperiment(
            "output_count_only", "outputs",
            tuple(CountRun("shj", (n, n), d) for d in (_HUGE, n // 5, n // 20, n // 100)),
            "as output_pairs and domain n/100 (100n outputs), outputs only counted (how the "
            "published experiments run: no pairs)"),
    )


def _delivery_experiments(n: int) -> tuple[CountExperiment, ...]:
    """The three delivery designs: store-only, probe-only, and stored-and-probing."""
    h, q = n // 2, n // 4
    bic = (("r_units", 1),)  # 1 R unit, 7 S units: an R tuple probes 7 units, an S tuple 1
    return (
        CountExperiment(
            "store_received", "store_received",
            tuple(CountRun("join_biclique", sz, _HUGE, joiners=8, options=bic)
                  for sz in ((n, n), (h, 9 * h), (q, 25 * q))),
            "join_biclique (1, 7): 7|R| + |S| = 8n probe deliveries held, |R| + |S| = 2n, 5n, "
            "6.5n store deliveries; no outputs"),
        CountExperiment(
            "probe_received", "probe_received",
            tuple(CountRun("join_biclique", sz, _HUGE, joiners=8, options=bic)
                  for sz in ((q, 7 * q), (n, n), (7 * q, q))),
            "join_biclique (1, 7): |R| + |S| = 2n store deliveries held, 3.5n, 8n, 12.5n probe "
            "deliveries (each one probe); no outputs"),
        CountExperiment(
            "both_received", "received",
            tuple(CountRun("shj", (k, k), _HUGE) for k in (h, n, 3 * h)),
            "shj: a delivery is stored and probes (role BOTH); n, 2n, 3n deliveries in 5 "
            "micro-batches; no outputs"),
    )


def _state_experiments(n: int) -> tuple[CountExperiment, ...]:
    """Expiry, stored state and rows, and moved state."""
    q = n // 4
    win = lambda w: (("window", w), ("tick", 100.0), ("time", "t"))  # noqa: E731
    return (
        CountExperiment(
            "expired", "expired",
            tuple(CountRun("shj", (n, n), _HUGE, batches=0, span=1000.0, options=win(w))
                  for w in (1e9, 400.0, 100.0, 20.0)),
            "shj, same tuples, deliveries, probes and rows, event times over 1000 cut into 10 "
            "ticks of 100; window none (1e9), 400, 100, 20 sets what expires and what stays "
            "stored: both fitted jointly (per_expired and per_stored)",
            also=("stored_batches",)),
        CountExperiment(
            "state_and_rows", "stored_batches",
            (CountRun("shj", (n, n), _HUGE, batches=5), CountRun("shj", (n, n), _HUGE, batches=20),
             CountRun("shj", (n, n), _HUGE, batches=40), CountRun("shj", (q, q), _HUGE, batches=40),
             CountRun("shj", (n, n), _HUGE, batches=20, joiners=16)),
            "shj, no outputs: 5, 20, 40 micro-batches of n tuples per input, 40 of n/4, 20 with "
            "16 joiners; the stored tuple-batches and the (micro-batch, worker) rows vary apart "
            "(fitted jointly: per_stored and per_worker), the deliveries are charged first at "
            "both_received's slope; the runs' wall time beyond the workers' gives "
            "fixed_per_batch (slope on micro-batches, jointly with the deliveries)",
            also=("rows",)),
        CountExperiment(
            "migrated", "moved",
            tuple(CountRun("shj", (n, n), _HUGE, joiners=8, batches=10,
                           options=(("groups", 64),) + (() if k == 8 else
                                                       (("rescale", ((n, (k,)),)),)))
                  for k in (8, 4, 6)),
            "shj on 8 joiners with 64 partition groups, scaled in to 4 or 6 joiners (or not) "
            "at the middle of the stream: the groups whose joiner changes move (sent and "
            "received: about 1/2 of the state for 4, more for 6, as a group's joiner is its "
            "number modulo the joiners); the same deliveries, no outputs; rows and stored "
            "state are charged first at the state_and_rows constants"),
    )


def _nway_experiments(n: int) -> tuple[CountExperiment, ...]:
    """n-way probes (checks): mjoin on 3 inputs."""
    return (
        CountExperiment(
            "mjoin3_received", "received",
            tuple(CountRun("mjoin", (k, k, k), _HUGE) for k in (n // 3, 2 * n // 3, n)),
            "mjoin on 3 inputs (a tuple is stored and probes once: no partial matches), "
            "n, 2n, 3n deliveries in 5 micro-batches; compare with both_received"),
        CountExperiment(
            "mjoin3_probes", "nway_probes",
            tuple(CountRun("mjoin", (n, n, n), d) for d in (_HUGE, n, n // 3)),
            "mjoin on 3 inputs, same tuples; a smaller key domain adds second-step probes of "
            "partial matches (and some outputs, charged at per_output before the slope)"),
    )


def _inputs(rng, run: CountRun) -> list[pd.DataFrame]:
    out = []
    for size in run.sizes:
        f = pd.DataFrame({"key": rng.integers(0, run.domain, size).astype(np.int64)})
        if run.span is not None:
            f["t"] = np.sort(rng.uniform(0, run.span, size))
        out.append(f)
    return out


def measure_counts(spark, experiments: tuple[CountExperiment, ...] | None = None, *,
                   repeats: int = 3, seed: int = 0, n: int = 20_000,
                   log=print, backend: str = "spark") -> pd.DataFrame:
    """Run every experiment's runs ``repeats`` times (interleaved: repeat 1 of every run, then
    repeat 2..., so that the machine's load drifts over all levels alike); one row per
    (experiment, run, repeat) with the run's summed counts and worker seconds.
    ``backend="local"``: the designs' counts only (tests); never for the times."""
    from joins.online import run_stream

    experiments = experiments or count_experiments(n)
    cores = spark.sparkContext.defaultParallelism if spark is not None else 1
    rows = []
    for rep in range(repeats):
        for e in experiments:
            for i, run in enumerate(e.runs):
                rng = np.random.default_rng(seed + 1000 * i + 7)  # same data every repeat
                frames = _inputs(rng, run)
                opts = dict(run.options)
                total = sum(run.sizes)
                if "tick" not in opts:
                    opts["batch_size"] = -(-total // run.batches)
                kw = dict(operator=run.operator, joiners=run.joiners, seed=seed,
                          progress=False, collect_output=run.collect, backend=backend,
                          **opts)
                if len(frames) == 2:
                    kw.update(r=frames[0], s=frames[1])
                else:
                    kw["inputs"] = {nm: f for nm, f in zip("ABC", frames, strict=False)}
                t0 = time.perf_counter()
                m = run_stream(spark, **kw).metrics
                wall = time.perf_counter() - t0
                sums = m.select_dtypes("number").sum()
                row = {"experiment": e.name, "run": i, "repeat": rep, "wall": wall,
                       "rows": len(m), "batches": m["batch"].nunique(),
                       "stored_batches": float((m["r_stored"] + m["s_stored"]).sum()),
                       "cores": cores}
                for c in ("seconds", "cpu_seconds", "received", "store_received",
                          "probe_received", "probes", "nway_probes", "outputs", "expired",
                          "migrated", "sent", "spilled", "disk_probes"):
                    row[c] = float(sums.get(c, 0.0))
                row["moved"] = row["migrated"] + row["sent"]  # what per_migrated charges
                rows.append(row)
                log(f"[{rep}] {e.name} run {i}: {row['seconds']:.3f} worker s "
                    f"({row['cpu_seconds']:.3f} CPU), "
                    f"{e.count}={row[e.count]:.0f}, wall {wall:.1f}s")
    return pd.DataFrame(rows)


def slope(x: np.ndarray, y: np.ndarray, *others: np.ndarray) -> tuple[float, float]:
    """OLS slope of y on x (with an intercept and any ``others`` fitted jointly) and its
    standard error."""
    return slopes_ols(y, x, *others)[0]


def slopes_ols(y: np.ndarray, *xs: np.ndarray) -> list[tuple[float, float]]:
    """OLS of y on an intercept and ``xs``: each slope with its standard error."""
    y = np.asarray(y, float)
    a = np.column_stack([np.ones(len(y))] + [np.asarray(x, float) for x in xs])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = y - a @ coef
    dof = max(1, len(y) - a.shape[1])
    s2 = float(resid @ resid) / dof
    cov = s2 * np.linalg.pinv(a.T @ a)
    return [(float(coef[k]), float(np.sqrt(max(cov[k, k], 0.0)))) for k in range(1, a.shape[1])]


def experiment_slopes(data: pd.DataFrame, experiments: tuple[CountExperiment, ...],
                      adjust: dict[str, dict[str, float]] | None = None,
                      clock: str = "cpu_seconds") -> dict[str, dict]:
    """Per experiment: the slope of total worker ``clock`` seconds on its count, its standard error,
    the median-difference slope between its extreme runs, and the range of every other count
    (what was held). ``adjust``: {experiment: {count: constant}} charged before the slope
    (a count that inevitably varies with the measured one, at its own measured constant)."""
    out = {}
    for e in experiments:
        d = data[data["experiment"] == e.name]
        if d.empty:
            continue
        y = d[clock].to_numpy(float)
        for c, v in (adjust or {}).get(e.name, {}).items():
            y = y - v * d[c].to_numpy(float)
        fitted = slopes_ols(y, d[e.count], *(d[c] for c in e.also))
        b, se = fitted[0]
        joint = {c: {"slope": v, "se": err} for c, (v, err) in zip(e.also, fitted[1:],
                                                                    strict=True)}
        for c, v in joint.items():  # the median-difference check net of the joint terms
            y = y - v["slope"] * d[c].to_numpy(float)
        med = d.assign(y=y).groupby("run")[["y", e.count]].median()
        lo, hi = med.index.min(), med.index.max()
        dcount = med.loc[hi, e.count] - med.loc[lo, e.count]
        held = {c: [float(d[c].min()), float(d[c].max())]
                for c in ("received", "store_received", "probe_received", "probes",
                          "nway_probes", "outputs", "expired", "stored_batches", "rows")
                if c != e.count}
        out[e.name] = {"count": e.count, "slope": b, "se": se,
                       "median_diff_slope": float((med.loc[hi, "y"] - med.loc[lo, "y"]) / dcount)
                       if dcount else float("nan"),
                       "levels": [float(v) for v in med[e.count]],
                       "seconds_median": [float(v) for v in med["y"]],
                       "points": len(d), "held": held, "what": e.what, "joint": joint,
                       "adjusted_by": (adjust or {}).get(e.name, {})}
    return out


# which experiments measure which constant, and how (the model's terms: per_received on every
# delivery, per_store_received on store deliveries, per_probe on probes; a store-only delivery
# costs S = per_received + per_store_received, a probe-only one P = per_received + per_probe,
# a stored-and-probing one B = per_received + per_store_received + per_probe)
DERIVED = {
    "per_output": ("output_pairs", "slope on outputs, result pairs materialised"),
    "per_store_received": ("both_received - probe_received", "B - P"),
    "per_probe": ("both_received - store_received", "B - S"),
    "per_received": ("store_received + probe_received - both_received", "S + P - B"),
    "per_expired": ("expired", "slope on expired, fitted jointly with stored_batches"),
    "per_stored": ("state_and_rows", "slope on stored tuple-batches, jointly with rows"),
    "per_worker": ("state_and_rows", "slope on (micro-batch, worker) rows, jointly with the "
                                     "stored tuple-batches"),
    "per_migrated": ("migrated", "slope on moved tuples (sent + received)"),
    "per_nway_probe": ("mjoin3_probes", "slope on mjoin's probes of partial combinations, "
                                        "deliveries held"),
    "fixed_per_batch": ("state_and_rows", "slope of the runs' wall time beyond the workers' "
                                          "(their seconds over the cores) on micro-batches"),
}
# measured for the record (checks), not constants of the model
CHECKS = ("output_count_only", "mjoin3_received")
# constants the per-count runs do not vary: kept from the calibration in force
KEPT = ("per_spilled", "per_disk_probe")


def derive_constants(slopes: dict[str, dict], base: dict, *, z: float = 2.0,
                     tolerance: float = 0.02) -> dict:
    """The model's constants from the experiments' slopes.

    A constant whose estimate is above ``z`` standard errors is that estimate. One that is not
    is 0 and recorded as measured as negligible when its upper bound (estimate + ``z`` errors)
    is below ``tolerance`` times what a stored-and-probing delivery costs (the both_received
    slope): then charging it could not matter. Otherwise it was not measured precisely enough
    to call it negligible: it keeps its estimate (at least 0) and is recorded as imprecise.
    The constants no per-count run varies are kept from ``base``."""
    judge = _Judge(z, tolerance, slopes["both_received"]["slope"])
    constants, records = {}, {}
    for name, (val, se) in _estimates(slopes).items():
        runs, how = DERIVED[name]
        value, negligible, note = judge(val, se)
        constants[name] = value
        records[name] = {"estimate": float(val), "se": float(se), "runs": runs, "how": how,
                         "negligible": negligible}
        if note:
            records[name]["note"] = note
    for name in KEPT:
        constants[name] = float(base.get(name, getattr(CostModel(), name)))
        records[name] = {"estimate": constants[name], "runs": "kept",
                         "how": f"not varied by the per-count runs: kept from "
                                f"{base.get('calibration_id', 'the defaults')}",
                         "negligible": False}
    c0 = slopes["output_count_only"]
    v0, neg0, note0 = judge(c0["slope"], c0["se"])
    records["per_output"]["count_only"] = {
        "estimate": c0["slope"], "se": c0["se"], "value": v0, "negligible": neg0,
        "note": "outputs only counted (no pairs), as the published experiments run; " + note0}
    return {"constants": constants, "records": records}


def _estimates(slopes: dict[str, dict]) -> dict[str, tuple[float, float]]:
    """Each constant's estimate and standard error from the slopes (:data:`DERIVED`)."""
    sl = {k: (v["slope"], v["se"]) for k, v in slopes.items()}

    def comb(plus: tuple[str, ...], minus: tuple[str, ...]) -> tuple[float, float]:
        val = sum(sl[k][0] for k in plus) - sum(sl[k][0] for k in minus)
        return val, float(np.sqrt(sum(sl[k][1] ** 2 for k in plus + minus)))

    rows = slopes["state_and_rows"]["joint"]["rows"]
    return {
        "per_output": sl["output_pairs"],
        "per_store_received": comb(("both_received",), ("probe_received",)),
        "per_probe": comb(("both_received",), ("store_received",)),
        "per_received": comb(("store_received", "probe_received"), ("both_received",)),
        "per_expired": sl["expired"],
        "per_stored": sl["state_and_rows"],
        "per_worker": (rows["slope"], rows["se"]),
        "per_migrated": sl["migrated"],
        "per_nway_probe": sl["mjoin3_probes"],
        "fixed_per_batch": (slopes["fixed_per_batch"]["slope"], slopes["fixed_per_batch"]["se"]),
    }


class _Judge:
    """An estimate's value: itself when above ``z`` errors; 0 when negligible (bounded
    within ``tolerance`` times a delivery's cost ``both``); else imprecise or inconsistent.
    Called as ``judge(val, se) -> (value, negligible, note)``."""

    def __init__(self, z: float, tolerance: float, both: float):
        self.z, self.tolerance, self.both = z, tolerance, both
        self.scale = tolerance * both

    def __call__(self, val: float, se: float) -> tuple[float, bool, str]:
        z, scale = self.z, self.scale
        if val > z * se:
            return float(val), False, ""
        if val + z * se < scale and val - z * se > -scale:
            return 0.0, True, (f"measured as negligible: {val:.3g} s ± {se:.2g}, upper bound "
                               f"{val + z * se:.2g} s < {self.tolerance:g} x a delivery's "
                               f"{self.both:.3g} s")
        if val + z * se < 0:
            return 0.0, False, (f"inconsistent: {val:.3g} s ± {se:.2g} is below 0 by more than "
                                f"{z:g} errors (the designs' additive model does not hold)")
        return max(0.0, float(val)), False, (f"imprecise: {val:.3g} s ± {se:.2g} (not above "
                                             f"{z:g} errors, not bounded within ±{scale:.2g} s)")


def fixed_per_batch(runs: pd.DataFrame) -> dict:
    """The per-micro-batch cost beyond the workers' (scheduling, task launch, the driver's
    step): the slope of each run's wall time less its workers' elapsed seconds over the cores,
    on its micro-batches, fitted jointly with its deliveries (loading and routing the input)."""
    y = runs["wall"].to_numpy(float) - runs["seconds"].to_numpy(float) / runs["cores"].to_numpy(float)
    (b, se), _ = slopes_ols(y, runs["batches"], runs["received"])
    return {"count": "batches", "slope": b, "se": se, "points": len(runs),
            "levels": sorted({float(v) for v in runs["batches"]}),
            "what": "wall time beyond the workers' on micro-batches (state_and_rows runs)"}


def check_zero_constants(data: dict) -> list[str]:
    """The rule of the per-count calibration file: every constant of 0 carries a measurement
    that found it negligible. Returns the constants that break it."""
    bad = []
    recs = data.get("measurements", {})
    for name, val in data["online"].items():
        if name.startswith("per_") and val == 0:
            rec = recs.get(name) or {}
            if not (rec.get("negligible") and "estimate" in rec and "se" in rec):
                bad.append(name)
    return bad


def calibrate_per_count(spark, *, n: int = 200_000, repeats: int = 5, seed: int = 0,
                        base: dict | None = None, out: str | Path | None = None,
                        log=print, data: pd.DataFrame | None = None,
                        clock: str = "cpu_seconds") -> dict:
    """Measure the constants one count at a time (:func:`count_experiments`) and write them
    with the experiments that measured them. ``base``: the online constants in force (those
    no per-count run varies are kept from it). The windowed runs' ``per_stored`` is charged
    before the slopes of runs whose stored state changes with the measured count. ``data``: reuse
    measured runs instead of measuring (the file keeps them under ``runs``). ``clock``: ``cpu_seconds`` (the worker thread's CPU
    time, which other jobs on a loaded machine do not inflate) or ``seconds`` (elapsed); the
    slopes of the other one are recorded too."""
    import os

    base = dict(base or {})
    experiments = count_experiments(n)
    if data is None:
        data = measure_counts(spark, experiments, repeats=repeats, seed=seed, n=n, log=log)
    adjust = _adjustments(data, experiments, base, clock)
    slopes = experiment_slopes(data, experiments, adjust, clock)
    elapsed = experiment_slopes(data, experiments, adjust, "seconds")
    if "state_and_rows" in {e.name for e in experiments}:
        slopes["fixed_per_batch"] = fixed_per_batch(data[data["experiment"] == "state_and_rows"])
    derived = derive_constants(slopes, base)
    _record_checks(derived["records"], slopes)
    model = CostModel(**{**derived["constants"],
                         "calibration_id": "percount-" + time.strftime("%Y%m%dT%H%M%S")})
    result = {
        "online": model.to_dict(), "measurements": derived["records"],
        "experiments": slopes, "clock": clock,
        "elapsed_slopes": {k: {"slope": v["slope"], "se": v["se"]} for k, v in elapsed.items()},
        "n": n, "repeats": repeats, "seed": seed,
        "runs": data.to_dict(orient="records"),
        "load_average": list(os.getloadavg()),
        "note": "per-count calibration (joins.online.calibration.calibrate_per_count) on the "
                f"Spark backend; slopes of the workers' {clock} in the step",
    }
    _write_json(out, result)
    return result


def _adjustments(data: pd.DataFrame, experiments: tuple[CountExperiment, ...], base: dict,
                 clock: str) -> dict[str, dict[str, float]]:
    """What each experiment charges before its slope: the stored state grows with the stored
    deliveries (about 3 stored tuple-batches per one in 5 micro-batches): the delivery
    designs charge it first at per_stored, which state_and_rows measures with the deliveries
    charged first at both_received's slope; the two are solved together by a few rounds of
    substitution (from the per_stored in force)."""
    per_stored = float(base.get("per_stored", 0.0))
    names = {e.name for e in experiments}
    for _ in range(4):
        adjust = {e: {"stored_batches": per_stored}
                  for e in ("store_received", "probe_received", "both_received",
                            "mjoin3_received", "mjoin3_probes", "output_pairs",
                            "output_count_only")}
        first = experiment_slopes(data, experiments, adjust, clock)
        # mjoin materialises its results: charge them at per_output before the probes' slope
        adjust["mjoin3_probes"]["outputs"] = max(0.0, first["output_pairs"]["slope"])
        if "state_and_rows" not in names:
            break
        both = first["both_received"]["slope"]
        adjust["state_and_rows"] = {"received": both}
        state = experiment_slopes(data, experiments, adjust, clock)["state_and_rows"]
        per_stored = state["slope"]
    if "migrated" in names:
        state = experiment_slopes(data, experiments, adjust, clock)["state_and_rows"]
        adjust["migrated"] = {"received": first["both_received"]["slope"],
                              "stored_batches": state["slope"],
                              "rows": state["joint"]["rows"]["slope"]}
    return adjust


def _record_checks(records: dict, slopes: dict[str, dict]) -> None:
    """The windowed runs' per_stored and the checks, recorded beside the constants."""
    joint = slopes["expired"]["joint"]["stored_batches"]
    records["per_stored"]["windowed"] = {
        "estimate": joint["slope"], "se": joint["se"], "runs": "expired",
        "note": "per stored tuple per tick in windowed runs (expiry scans the stored state "
                "every tick), fitted jointly with expired; not charged: the model has one "
                "per_stored"}
    for name in CHECKS:
        records.setdefault("checks", {})[name] = {
            "slope": slopes[name]["slope"], "se": slopes[name]["se"],
            "count": slopes[name]["count"]}
