"""Evaluate a figure's ``targets:`` on its results: met, not met, unstable, by construction,
or not checkable (and why).

Checks read the tidy result rows only. A check whose series or points have no results is
"not checkable" with the reason, never "met". A check that cannot fail on this setup is
"by construction", never "met": either the target says why (``by_construction: <reason>``, or
``identity: <reason>`` for a check of the harness's own formula or a count identity) or the
checker finds it (:func:`_cannot_discriminate`: the compared values are identical, or the
compared series have identical counts, so their modeled times cannot differ).

Seeds: ``replicates: [{series: its replicate series}, ...]`` names the same comparison on other
seeds (data and operator), ``replicates: seeds`` every replicate the figure's ``seed_replicates``
declare (:func:`experiments.figure_spec.with_seed_replicates`); the check runs on each, and its verdict counts only if all agree,
otherwise it is "unstable" with every value. ``sensitivity: <reason>``: a second reading of a
claim whose primary reading is another target; it is evaluated and shown, never counted.

Scale (rule 4 of the verdicts, issue 37): a counted "not met" on a time or a rate (its metric's
unit or name says so: :func:`experiments.results.is_time`) is evaluated again on the figure's
results at the second scale (:class:`SecondScale`); met there, it is "scale-sensitive" with both
values; otherwise it stays "not met" with both values, or with the reason the second scale has
none (not run yet, or the same data as this scale).

Cause (issue 37): a counted "not met" names what decides it, ``cause: "<class>: <which>"``, the
class one of :data:`CAUSES`: the paper (a genuine non-reproduction), a reading (an ambiguity of
the paper resolved by a written choice), our limitation (what this setup cannot produce), or the
scale. REPORT.md counts the not-mets by class and shows a not-met that names none.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import spearmanr

from experiments.results import is_time

FAILED = {"oom", "timeout", "overflow"}


@dataclass
class Verdict:
    id: str
    claim: str
    check: str
    verdict: str  # met | not met | unstable | scale-sensitive | by construction | not checkable
    measured: str
    counted: bool = True  # False: a sensitivity reading (shown, not counted as a claim)
    # a not-met time or rate at the second scale: "" (not one), "not run", "same data",
    # "flips" (the verdict is scale-sensitive) or the verdict there ("not met", ...)
    second_scale: str = ""
    cause: str = ""  # the target's ``cause`` (its class: :func:`cause_class`)
    # rule 3: how far the deciding value is from the check's threshold (relative; None where
    # a check has no threshold), and whether a verdict that near was judged on one seed only
    margin: float | None = None
    one_seed: bool = False


@dataclass
class SecondScale:
    """A figure's results at the second scale of rule 4 (issue 37), for verdicts at ``of``."""

    name: str  # the second scale, e.g. "medium"
    of: str  # the scale whose verdicts it checks, e.g. "small"
    results: pd.DataFrame | None  # None: no usable results (``missing`` says why)
    targets: list[dict[str, Any]] | None = None  # resolved at that scale (default: the same)
    missing: str = "not run"  # "not run", or "same data" where it runs the same inputs
    why: str = ""  # the reason in words (shown in the measured text)


CAUSES = {"paper": "the paper", "reading": "a reading", "limitation": "our limitation",
          "scale": "the scale"}


def cause_class(cause: str) -> str:
    """The class of a target's ``cause: "<class>: <which>"``; a ValueError names the valid
    classes when it is none of them or says nothing after the class."""
    head, sep, rest = str(cause).partition(":")
    if head.strip() not in CAUSES or not sep or not rest.strip():
        raise ValueError(f"cause {cause!r} must read '<class>: <which>' with the class one of "
                         f"{', '.join(CAUSES)}")
    return head.strip()


# Rule 3: a verdict whose deciding value is within this share of its threshold holds only on
# 3 seeds (``replicates``); one judged on one seed is marked, unless the target says why one
# seed suffices (``one_seed_suffices: <why>``).
NEAR = 0.2

VERDICTS = ("met", "not met", "unstable", "scale-sensitive", "by construction", "not checkable")
# Result units that are counts of the run's work (what a cost model charges), not settings,
# times or checks: two series with all of them equal at a point did the same work there.
COUNT_UNITS = {"count", "rows", "tuples", "bytes", "records", "tasks", "stages"}
IDENTICAL_RTOL = 1e-9
# Units of a time the cost model derives from counts (local wall time is measured, never so).
MODELED_TIME_UNITS = {"modeled s", "modeled ms"}


class _NoData(Exception):
    pass


def _in_range(frame: pd.DataFrame, spec: dict) -> pd.DataFrame:
    if "at" in spec:
        return frame[(frame["x"] - float(spec["at"])).abs() < 1e-9]
    lo, hi = spec.get("x_min", float("-inf")), spec.get("x_max", float("inf"))
    return frame[(frame["x"] >= lo - 1e-9) & (frame["x"] <= hi + 1e-9)]


def _status(results: pd.DataFrame, series: str, spec: dict) -> pd.Series:
    sub = _in_range(results[results.series == series], spec)
    if sub.empty:
        raise _NoData(f"no results for {series}")
    return sub.groupby("x")["status"].first()


def _metric(results: pd.DataFrame, series: str, metric: str, spec: dict) -> pd.Series:
    sub = _in_range(results[(results.series == series) & (results.metric == metric)], spec)
    # a check may accept points with other statuses, e.g. overflow (its time includes the spill)
    sub = sub[sub.status.isin(spec.get("statuses", ["ok"]))]
    if sub.empty:
        raise _NoData(f"no successful {metric} results for {series}")
    return sub.groupby("x")["value"].mean().sort_index()


def _rel(value: float, threshold: float) -> float:
    """How far ``value`` is from ``threshold``, relative to it (rule 3's "within 20%")."""
    return abs(value / threshold - 1) if threshold and np.isfinite(threshold) else float("inf")


def _band_margin(values: pd.Series, spec: dict) -> float:
    """The closest any value comes to the check's ``min`` or ``max`` (relative)."""
    bounds = [spec[b] for b in ("min", "max") if b in spec]
    return min((_rel(float(v), b) for v in values for b in bounds), default=float("inf"))


def _pairs_margin(frame: pd.DataFrame, names: list[str]) -> float:
    """The closest two neighbours of an order come to each other at any x (relative)."""
    return min((_rel(float(frame[a][x]), float(frame[b][x]))
                for a, b in zip(names, names[1:], strict=False) for x in frame.index),
               default=float("inf"))


def _fmt(values: pd.Series) -> str:
    return ", ".join(f"{x:g}: {v:.3g}" for x, v in values.items())


def _check_status(results, spec):
    expect_fail = spec.get("expect", "fail") == "fail"
    parts, ok = [], True
    for s in spec["series"]:
        st = _status(results, s, spec)
        good = st.isin(FAILED) if expect_fail else st.eq("ok")
        ok &= bool(good.all())
        parts.append(f"{s}: " + ", ".join(f"{x:g}={v}" for x, v in st.items()))
    return ok, "; ".join(parts)


def _check_ratio(results, spec):
    """numerator / denominator per x; a list of denominators means the smallest of them at
    each x (a claim such as "faster than all others" is judged against the best other; one
    that failed at every point is left out, one without results makes the check not
    checkable)."""
    num = _metric(results, spec["numerator"], spec["metric"], spec)
    names = spec["denominator"]
    if isinstance(names, str):
        den, label = _metric(results, names, spec["metric"], spec), names
    else:
        # an other series that failed at every point in range is beaten by any result
        ran = [s for s in names if not _status(results, s, spec).isin(FAILED).all()]
        if not ran:
            raise _NoData("every denominator series failed")
        frame = pd.DataFrame({s: _metric(results, s, spec["metric"], spec) for s in ran})
        reduce = spec.get("reduce", "min")  # "max": against the slowest other (e.g. "slowest")
        if reduce not in ("min", "max"):
            raise ValueError(f"ratio reduce must be 'min' or 'max', got {reduce!r}")
        den = frame.min(axis=1) if reduce == "min" else frame.max(axis=1)
        best = frame.idxmin(axis=1) if reduce == "min" else frame.idxmax(axis=1)
        label = f"{reduce}(" + ", ".join(names) + ")"
    ratio = (num / den).dropna()
    if ratio.empty:
        raise _NoData("no x value has both series")
    ok = bool(((ratio >= spec.get("min", float("-inf"))) & (ratio <= spec.get("max", float("inf")))).all())
    measured = f"{spec['numerator']}/{label} at " + _fmt(ratio)
    if not isinstance(names, str):
        measured += f" ({'smallest' if reduce == 'min' else 'largest'}: " + ", ".join(f"{x:g}: {best[x]}" for x in ratio.index) + ")"
    return ok, measured, _band_margin(ratio, spec)


def _check_ordering(results, spec):
    values = {s: _metric(results, s, spec["metric"], spec) for s in spec["order"]}
    frame = pd.DataFrame(values).dropna()
    if frame.empty:
        raise _NoData("no x value has all series")
    ok = bool(all((frame[a] < frame[b]).all() for a, b in zip(spec["order"], spec["order"][1:], strict=False)))
    return (ok, "; ".join(f"{s}: {_fmt(v)}" for s, v in values.items()),
            _pairs_margin(frame, list(spec["order"])))


def _check_trend(results, spec):
    if "numerator" in spec:  # the trend of a ratio between two series (e.g. a speedup)
        values = (_metric(results, spec["numerator"], spec["metric"], spec)
                  / _metric(results, spec["denominator"], spec["metric"], spec)).dropna()
        spec = {**spec, "series": f"{spec['numerator']}/{spec['denominator']}"}
    else:
        values = _metric(results, spec["series"], spec["metric"], spec)
    if len(values) < 3:
        raise _NoData(f"{len(values)} points of {spec['series']} (need 3)")
    rho = spearmanr(values.index, values.to_numpy()).statistic
    sign = 1 if spec.get("direction", "increasing") == "increasing" else -1
    # a rank correlation over n points takes few values (-0.8 exactly over 5 points), which
    # scipy returns a rounding below: compare with the same tolerance as identical values
    ok = bool(sign * rho >= spec.get("min_spearman", 0.8) - IDENTICAL_RTOL)
    return (ok, f"Spearman ρ = {rho:.2f} over {len(values)} points",
            _rel(sign * rho, spec.get("min_spearman", 0.8)))


def _check_bound(results, spec):
    values = _metric(results, spec["series"], spec["metric"], spec)
    if "below" in spec:  # a bound that is itself a metric of each point, e.g. Ineq. 3 at its ℓ_max
        bound = _metric(results, spec["series"], spec["below"], spec)
        both = pd.DataFrame({"v": values, "b": bound}).dropna()
        if both.empty:
            raise _NoData(f"no point of {spec['series']} has both {spec['metric']} and {spec['below']}")
        return (bool((both.v < both.b).all()),
                ", ".join(f"{x:g}: {r.v:.3g} < {r.b:.3g}" for x, r in both.iterrows()),
                min(_rel(r.v, r.b) for _, r in both.iterrows()))
    ok = bool(((values >= spec.get("min", float("-inf"))) & (values <= spec.get("max", float("inf")))).all())
    margin = _band_margin(values, spec)
    if "max_over_min" in spec:
        ok &= bool(values.max() / values.min() <= spec["max_over_min"])
        margin = min(margin, _rel(values.max() / values.min(), spec["max_over_min"]))
        return ok, f"max/min = {values.max() / values.min():.2f}; " + _fmt(values), margin
    return ok, _fmt(values), margin


def _check_crossover(results, spec):
    a = _metric(results, spec["a"], spec["metric"], spec)
    b = _metric(results, spec["b"], spec["metric"], spec)
    diff = (a - b).dropna()
    if len(diff) < 2:
        raise _NoData("fewer than 2 common x values")
    signs = diff.apply(lambda v: v > 0)
    ok = bool(signs.nunique() > 1)
    return ok, f"{spec['a']}-{spec['b']} at " + _fmt(diff)


def _check_ratio_order(results, spec):
    """Ratios of series pairs (``ratios: [[num, den], ...]``, e.g. speedups at two executor
    counts) in decreasing order at every x in range."""
    values = {f"{n}/{d}": (_metric(results, n, spec["metric"], spec)
                           / _metric(results, d, spec["metric"], spec))
              for n, d in spec["ratios"]}
    frame = pd.DataFrame(values).dropna()
    if frame.empty:
        raise _NoData("no x value has every ratio")
    names = list(values)
    ok = bool(all((frame[a] > frame[b]).all() for a, b in zip(names, names[1:], strict=False)))
    return ok, "; ".join(f"{n}: {_fmt(frame[n])}" for n in names), _pairs_margin(frame, names)


def _check_drop(results, spec):
    """``series`` has the largest absolute drop of the metric from x = ``from_x`` to ``to_x``
    among ``among`` (e.g. the most time saved by more executors)."""
    drops = {}
    for s in [spec["series"], *spec["among"]]:
        v = _metric(results, s, spec["metric"], {**spec, "x_min": spec["from_x"],
                                                 "x_max": spec["to_x"]})
        if spec["from_x"] not in v.index or spec["to_x"] not in v.index:
            raise _NoData(f"{s} lacks x = {spec['from_x']} or {spec['to_x']}")
        drops[s] = float(v[spec["from_x"]] - v[spec["to_x"]])
    top = max(drops, key=drops.get)
    first, second = sorted(drops.values(), reverse=True)[:2] if len(drops) > 1 else (0.0, 0.0)
    return (top == spec["series"],
            ", ".join(f"{s}: {d:.3g}" for s, d in sorted(drops.items(), key=lambda kv: -kv[1])),
            _rel(first, second))


def _compared_series(spec: dict) -> list[str]:
    """The series a check compares with each other (empty for a check of one series)."""
    kind = spec.get("type")
    if kind == "ratio" and isinstance(spec["denominator"], str):
        return [spec["numerator"], spec["denominator"]]
    if kind == "trend" and "numerator" in spec:
        return [spec["numerator"], spec["denominator"]]
    if kind == "ordering":
        return list(spec["order"])
    if kind == "crossover":
        return [spec["a"], spec["b"]]
    return []


def _decisive_pair(results: pd.DataFrame, spec: dict) -> list[str]:
    """For a ratio against a list of series: the numerator and the one series that decides the
    ratio at every x (the fastest other, say), when one does; a tie by construction with it
    (Spark3-Join running Hash-Join's plan) must not pass for a win over all."""
    if spec.get("type") != "ratio" or isinstance(spec.get("denominator"), str):
        return []
    values = {}
    for name in spec["denominator"]:
        try:
            values[name] = _metric(results, name, spec["metric"], spec)
        except _NoData:  # failed everywhere: beaten by any result, decides nothing
            continue
    frame = pd.DataFrame(values).dropna(how="all")
    if frame.empty:
        return []
    best = frame.idxmin(axis=1) if spec.get("reduce", "min") == "min" else frame.idxmax(axis=1)
    return [spec["numerator"], best.iloc[0]] if best.nunique() == 1 else []


def _same(a: pd.Series, b: pd.Series) -> bool:
    both = pd.DataFrame({"a": a, "b": b}).dropna()
    scale = both.abs().max(axis=1).clip(lower=1e-300)
    return bool(len(both)) and bool(((both.a - both.b).abs() <= IDENTICAL_RTOL * scale).all())


def _count_profile(results: pd.DataFrame, series: str, spec: dict) -> pd.Series:
    """The series' count metrics at every x in range, indexed by (metric, x)."""
    sub = _in_range(results[(results.series == series) & results.unit.isin(COUNT_UNITS)], spec)
    sub = sub[sub.status.isin(spec.get("statuses", ["ok"]))]
    return sub.groupby(["metric", "x"])["value"].mean()


def _cannot_discriminate(results: pd.DataFrame, spec: dict) -> str | None:
    """Why a check cannot fail on these results, or None.

    Only for checks of a modeled time, which the cost model computes from counts. Two cases.
    The compared times are identical (a ratio of exactly 1 at every point, a "flat" series
    equal at every x): the model charged no difference. Or the compared series have identical
    counts at every point, over the count metrics that tell some series of the figure apart
    (a count equal for all series, e.g. the output rows of exact joins, says nothing): their
    modeled times cannot differ, e.g. Spark3-Join and Hash-Join when Spark's skew split does
    not fire. A claim about the counts themselves (DYNAMIC keeps STATICMID's mapping, so their
    ILFs are equal) is a real check: the counts could have differed."""
    metric = spec.get("metric")
    names = _compared_series(spec)
    if "unit" not in results.columns:
        return None
    if not names:
        names = _decisive_pair(results, spec)
    units = set(results.loc[results.metric == metric, "unit"].dropna().unique())
    if not units or not units <= MODELED_TIME_UNITS:
        return None
    try:
        if names and metric:
            values = [_metric(results, s, metric, spec) for s in names]
            if all(_same(values[0], v) for v in values[1:]):
                return (f"{' and '.join(names)} have identical {metric} at every compared x")
        elif spec.get("type") == "bound" and "max_over_min" in spec:
            values = _metric(results, spec["series"], metric, spec)
            if len(values) > 1 and values.max() - values.min() <= IDENTICAL_RTOL * values.abs().max():
                return f"{spec['series']} has the same {metric} at every x"
        if len(names) >= 2:
            profiles = [_count_profile(results, s, spec) for s in names]
            everyone = [_count_profile(results, s, spec) for s in results.series.unique()]
            frame = pd.DataFrame(everyone).T  # (metric, x) by series
            telling = frame.index[frame.nunique(axis=1, dropna=True) > 1]
            common = [p.reindex(telling).dropna() for p in profiles]
            if len(telling) and all(len(c) for c in common) and all(
                    _same(common[0], c) for c in common[1:]):
                shown = sorted({m for m, _ in common[0].index})
                return (f"{' and '.join(names)} have identical counts at every compared x "
                        f"({', '.join(shown[:6])}{', ...' if len(shown) > 6 else ''}), so the "
                        "modeled times cannot differ")
    except _NoData:
        return None
    return None


CHECKS = {
    "status": _check_status, "ratio": _check_ratio, "ordering": _check_ordering,
    "trend": _check_trend, "bound": _check_bound, "crossover": _check_crossover,
    "drop": _check_drop, "ratio_order": _check_ratio_order,
}


def describe(spec: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in spec.items())


def _renamed(spec: dict, names: dict[str, str]) -> dict:
    """The check with its series renamed (a replicate on another seed)."""
    def rename(v):
        if isinstance(v, str):
            return names.get(v, v)
        if isinstance(v, list):
            return [rename(x) for x in v]
        return v
    keys = ("series", "numerator", "denominator", "order", "a", "b", "among", "ratios")
    return {k: rename(v) if k in keys else v for k, v in spec.items()}


def _one(t: dict, spec: dict, results: pd.DataFrame) -> Verdict:
    kind = spec.get("type", "not_checkable")
    try:
        ok, measured, *margin = CHECKS[kind](results, spec)
        why = t.get("identity") or t.get("by_construction") or \
            _cannot_discriminate(results, spec)
        if why:
            label = "identity" if t.get("identity") else "it cannot fail here"
            return Verdict(t["id"], t["claim"], describe(spec), "by construction",
                           f"{measured} (the check {'passes' if ok else 'fails'}; "
                           f"{label}: {str(why).strip()})")
        return Verdict(t["id"], t["claim"], describe(spec), "met" if ok else "not met",
                       measured, margin=margin[0] if margin else None)
    except _NoData as exc:
        return Verdict(t["id"], t["claim"], describe(spec), "not checkable", str(exc))


def _replicated(t: dict, spec: dict, results: pd.DataFrame) -> Verdict:
    """The check on the primary series and on each replicate: agreeing verdicts count, a
    disagreement is "unstable" with every seed's value."""
    runs = [_one(t, spec, results)] + [_one(t, _renamed(spec, names), results)
                                       for names in t["replicates"]]
    kinds = {v.verdict for v in runs}
    first = runs[0]
    values = "; ".join(f"seed {i}: {v.verdict} ({v.measured})" for i, v in enumerate(runs))
    if kinds <= {"met", "not met"} and len(kinds) == 2:
        return Verdict(first.id, first.claim, first.check, "unstable", values)
    if kinds == {first.verdict} and first.verdict in ("met", "not met"):
        return Verdict(first.id, first.claim, first.check, first.verdict,
                       f"{first.measured}; all {len(runs)} seeds agree ({values})")
    # a replicate without results, or one that cannot fail: the primary decides, as shown
    return Verdict(first.id, first.claim, first.check, first.verdict,
                   f"{first.measured}; replicates: {values}")


def _target(t: dict, results: pd.DataFrame) -> Verdict:
    """One target's verdict on ``results`` (seeds included), before rule 4 and sensitivity."""
    spec = dict(t.get("check", {}))
    kind = spec.get("type", "not_checkable")
    if kind == "not_checkable":
        return Verdict(t["id"], t["claim"], "—", "not checkable",
                       spec.get("reason", "no check defined"))
    if kind not in CHECKS:
        raise ValueError(f"target {t['id']}: unknown check type {kind!r}; valid: "
                         f"{', '.join(CHECKS)}, not_checkable")
    if t.get("replicates"):
        return _replicated(t, spec, results)
    return _one(t, spec, results)


def _on_one_seed(v: Verdict, t: dict) -> Verdict:
    """Rule 3: a met or not-met verdict within :data:`NEAR` of its threshold, judged on one
    seed, is marked so (its target names no ``replicates``, nor ``one_seed_suffices: <why>``:
    no random draw decides it, or the point repeats its draws itself)."""
    if (v.verdict in ("met", "not met") and v.margin is not None and v.margin < NEAR
            and not t.get("replicates") and not t.get("one_seed_suffices")):
        v.one_seed = True
        v.measured += (f"; {v.margin:.1%} from its threshold, on one seed (rule 3 asks for "
                       "three)")
    return v


def on_time(spec: dict, results: pd.DataFrame) -> bool:
    """Whether a check is on a time or a rate: its metric's unit (or name) says so."""
    metric = spec.get("metric")
    if not metric:
        return False
    units = (results.loc[results.metric == metric, "unit"].dropna().unique()
             if "unit" in results.columns else [])
    return any(is_time(metric, u) for u in units) if len(units) else is_time(metric, None)


def _at_second_scale(v: Verdict, t: dict, results: pd.DataFrame, second: SecondScale) -> Verdict:
    """Rule 4: a counted not-met time or rate, evaluated again at the second scale."""
    if v.verdict != "not met" or t.get("sensitivity") or not on_time(t.get("check", {}), results):
        return v
    if second.results is None or second.results.empty:
        v.second_scale = second.missing
        v.measured += f"; scale={second.name}: {second.why or second.missing}"
        return v
    there = next((u for u in second.targets or [] if u["id"] == t["id"]), t)
    # rule 4 runs seed 0 at the second scale: a replicate counts there only where it has run
    ran = set(second.results["series"]) if "series" in second.results else set()
    kept = [names for names in there.get("replicates") or [] if set(names.values()) <= ran]
    w = _target({**there, "replicates": kept}, second.results)
    if there.get("replicates") and not kept:
        w.measured += "; seed 0 (the seed replicates are not run at this scale)"
    both = f"scale={second.of}: {v.measured}; scale={second.name}: {w.verdict} ({w.measured})"
    if w.verdict == "met":
        return replace(v, verdict="scale-sensitive", measured=both, second_scale="flips")
    return replace(v, measured=both, second_scale=w.verdict)


def evaluate(targets: list[dict[str, Any]], results: pd.DataFrame,
             second: SecondScale | None = None) -> list[Verdict]:
    """Every target's verdict on ``results``; with ``second``, rule 4 for not-met times."""
    verdicts = []
    for t in targets:
        v = _on_one_seed(_target(t, results), t)
        if second is not None:
            v = _at_second_scale(v, t, results, second)
        v.cause = str(t.get("cause") or "")
        if t.get("sensitivity"):
            v.counted = False
            v.measured = f"{v.measured} (sensitivity, not counted: {str(t['sensitivity']).strip()})"
        verdicts.append(v)
    return verdicts
