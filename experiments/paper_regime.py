"""The paper's regime of a batch point (issue 37, rule 2): its modeled time with every task
carrying the paper's counts, the plan (stages, tasks, executors) as it ran.

Why: at small scale an AM-Join task carries about 5.7K records (about 1.8 ms of record work)
against the calibrated 17 ms per task, at the paper's scale about 337K, so at small scale the
per-task constant decides verdicts about time that per-record work decides in the paper.

The rule, one for the AM-Join paper's batch figures, from the figure's own sizes
(``workload.sizes`` at the run's scale and at ``paper``) and executors (``run.executors``, the
figure's own mapping: 64 <-> 1000 at small scale; fig7's x and fig8's series keep the ratio):
the stages and their tasks stay as run (the same plan on the same E); each task's records in
and shuffle bytes are multiplied by the input's records per partition at the paper's sizes
over the run's, f_in = (N_paper / N_run) x (E_run / E_paper) (58.8 for D(α,100) at small
scale: 5.7K -> 337K records per task), and its rows produced by the join output's expected
pairs per partition, f_out = (O_paper / O_run) x (E_run / E_paper) (O: :func:`expected_output`),
because a join stage's rows produced are its output pairs, which grow faster than the input
(quadratic in a hot key's records).

Validated by ``experiments.regime_check`` at 4x the data (amjoin/fig5, α = 0.65): the
extrapolated modeled time is 5.7% (Hash-Join) and 6.4% (AM-Join) above the real one, the
rows of scan stages (proportional to the input) being overstated by f_out / f_in. The
sensitivity ``modeled_time_regime_records`` multiplies rows produced by f_in too: 2.2% below
AM-Join's real time but 22.8% below Hash-Join's, whose straggler's rows are output pairs.

An x that is a data size (Fig. 9's small relation) scales with the other record sizes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from experiments.figure_spec import by_scale
from runtime.cost_model import BatchCosts, per_task_share, scaled_counts, stage_table

# Per generator: the size parameters that count one relation's records (N), and every data size.
RECORD_SIZES: dict[str, tuple[str, ...]] = {
    "dpair": ("uniform_rows", "rows"),
    "smalllarge": ("large_rows", "small_rows"),
}
DATA_SIZES: dict[str, tuple[str, ...]] = {
    "dpair": ("uniform_rows", "rows", "keys", "uniform_range"),
    "smalllarge": ("large_rows", "small_rows", "key_range"),
}


def expected_output(generator: str, p: dict[str, Any]) -> float:
    """Expected output pairs of the inner equi-join of the generator's two relations.

    dpair: per key the two independent relations hold N_z p_k + N_u/U records each (Zipf keys
    1..K, uniform keys 1..U, K <= U), so E = N_z^2 sum p_k^2 + 2 N_z N_u / U + N_u^2 / U.
    smalllarge: each small record's even key is held by L / (2 key_range) large records.
    """
    if generator == "dpair":
        nz, nu, k, u = (float(p[n]) for n in ("rows", "uniform_rows", "keys", "uniform_range"))
        w = np.arange(1, int(k) + 1, dtype=float) ** -float(p.get("alpha", 0.0))
        zipf = nz * nz * float((w * w).sum() / w.sum() ** 2)
        return zipf + 2 * nz * nu / u + nu * nu / u
    if generator == "smalllarge":
        return float(p["small_rows"]) * float(p["large_rows"]) / (2 * float(p["key_range"]))
    raise KeyError(f"no expected output for generator {generator!r}; known: "
                   f"{', '.join(RECORD_SIZES)}")


def records(generator: str, p: dict[str, Any]) -> float:
    return float(sum(float(p[n]) for n in RECORD_SIZES[generator]))


def grown_params(generator: str, params: dict[str, Any], sizes: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the data sizes of ``sizes``; a data size that ``sizes`` does not hold
    (an x such as Fig. 9's small relation) grows as the records it does hold."""
    out = {**params, **sizes}
    held = [n for n in RECORD_SIZES[generator] if n in sizes]
    growth = (sum(float(sizes[n]) for n in held) / sum(float(params[n]) for n in held)
              if held else 1.0)
    for name in DATA_SIZES[generator]:
        if name not in sizes and name in params:
            out[name] = float(params[name]) * growth
    return out


def factors(generator: str, run: dict[str, Any], target: dict[str, Any],
            executors_run: float, executors_target: float) -> tuple[float, float]:
    """(f_in, f_out): records and output pairs per partition at ``target`` over ``run``."""
    per_partition = executors_run / executors_target
    return (records(generator, target) / records(generator, run) * per_partition,
            expected_output(generator, target) / expected_output(generator, run) * per_partition)


def paper_factors(figure: dict, scale: str, generator: str,
                  params: dict[str, Any]) -> tuple[float, float] | None:
    """The rule's (f_in, f_out) for a point run at ``scale`` with generator ``params``, or None
    where the figure has no paper sizes or its generator no formula."""
    sizes = figure.get("workload", {}).get("sizes", {})
    executors = figure.get("run", {}).get("executors")
    if generator not in RECORD_SIZES or "paper" not in sizes or executors is None:
        return None
    paper = grown_params(generator, params, sizes["paper"])
    return factors(generator, params, paper, float(by_scale(executors, scale)),
                   float(by_scale(executors, "paper")))


def regime_tables(tasks, executors: int, costs: BatchCosts, schedule: str, f_in: float,
                  f_out: float) -> tuple[Any, Any]:
    """The plan's stage tables with each task's counts grown by the rule (records and shuffle
    bytes by f_in, rows produced by f_out), and with rows produced grown by f_in instead (the
    sensitivity)."""
    return (stage_table(scaled_counts(tasks, f_in, f_out), executors, costs, schedule),
            stage_table(scaled_counts(tasks, f_in, f_in), executors, costs, schedule))


def regime_metrics(tasks, executors: int, costs: BatchCosts, schedule: str,
                   f_in: float, f_out: float, as_run=None) -> dict[str, tuple[float, str]]:
    """The point's per-task share as run (``as_run``: its stage table, when the caller has it);
    its modeled time and per-task share in the regime, and the sensitivity's time."""
    if as_run is None:
        as_run = stage_table(tasks, executors, costs, schedule)
    regime, records = regime_tables(tasks, executors, costs, schedule, f_in, f_out)
    return {
        "per_task_share": (per_task_share(as_run), "ratio"),
        "modeled_time_regime": (float(regime["modeled_s"].sum()), "modeled s"),
        "per_task_share_regime": (per_task_share(regime), "ratio"),
        "modeled_time_regime_records": (float(records["modeled_s"].sum()), "modeled s"),
        "regime_records_factor": (f_in, "ratio"),
        "regime_output_factor": (f_out, "ratio"),
    }
