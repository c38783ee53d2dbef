"""The arena's decision table (beyond the papers): the best operator per cell and metric on the
seeds, its margin over the second, ties, "unstable" where the seeds disagree, the "why" from
the counts, and the sensitivity rule's changes; REPORT.md gives it a section of its own."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.decision_table import decision_table, markdown, sensitivity_changes, swap_factor
from experiments.figure_spec import with_seed_replicates

FIGURE = with_seed_replicates({
    "id": "arena/test", "x": {"name": "z"},
    "series": {"a": {"algorithm": "a", "label": "A"}, "b": {"algorithm": "b", "label": "B"},
               "c": {"algorithm": "c", "label": "C"}, "yard": {"algorithm": "y"},
               "c_per_unit": {"algorithm": "c", "label": "C, M / J", "sensitivity": True,
                              "overrides": {"run.resources": "equal_per_unit"}}},
    "seed_replicates": [{"series": ["a", "b", "c", "yard"], "seeds": [1, 2],
                         "set": ["workload.params.seed"]}],
    "decision": {"exclude": ["yard"], "metrics": [
        {"metric": "time", "better": "lower", "why": "time_terms"},
        {"metric": "share", "better": "higher", "margin": "difference", "why": ["after"]},
        {"metric": "load", "better": "lower", "among": "distributed", "why": ["after"]}]},
})


def _rows(values: dict[tuple[str, float], dict[str, float]]) -> pd.DataFrame:
    """Result rows (scalar metrics, status ok) from {(series, x): {metric: value}}."""
    out = []
    for (series, x), metrics in values.items():
        for metric, v in metrics.items():
            out.append({"series": series, "x": x, "x_label": f"{x:g}", "metric": metric,
                        "value": float(v), "t": np.nan, "status": "ok", "seed": 0})
    return pd.DataFrame(out)


def _point(time, share=1.0, load=1.0, units=4, probe=0.0, output=0.0, after=0.0):
    return {"time": time, "share": share, "load": load, "units": units,
            "time_term_probe": probe, "time_term_output": output, "after": after}


def test_a_stable_best_with_its_margin_and_why_and_an_unstable_cell():
    vals = {}
    for suffix in ("", "_seed1", "_seed2"):  # x = 0: A wins on every seed, B second
        vals[(f"a{suffix}", 0.0)] = _point(1.0, probe=0.2, output=0.8)
        vals[(f"b{suffix}", 0.0)] = _point(1.5, probe=0.7, output=0.8)
        vals[(f"c{suffix}", 0.0)] = _point(3.0, share=0.5, units=1, after=40)
        vals[(f"yard{suffix}", 0.0)] = _point(0.1)  # excluded: never the best
    # x = 1: A best on seeds 0 and 1, B on seed 2: unstable
    for suffix, ta, tb in (("", 1.0, 1.2), ("_seed1", 1.0, 1.3), ("_seed2", 1.4, 1.1)):
        vals[(f"a{suffix}", 1.0)] = _point(ta, load=2.0)
        vals[(f"b{suffix}", 1.0)] = _point(tb, load=1.5)
        vals[(f"c{suffix}", 1.0)] = _point(5.0, units=1)
    cells = {(c.x, c.metric): c for c in decision_table(FIGURE, _rows(vals))}
    t0 = cells[(0.0, "time")]
    assert (t0.best, t0.second, t0.stable, t0.seeds) == ("a", "b", True, 3)
    assert t0.margin == np.float64(0.5)  # B takes 1.5x A's time: +50%
    assert "probe" in t0.why and "A" in t0.why and "B" in t0.why  # the term that differs most
    t1 = cells[(1.0, "time")]
    assert t1.best == "a" and not t1.stable  # mean 1.133 against B's 1.2; seed 2 says B
    assert t1.per_seed_best == {0: ["a"], 1: ["a"], 2: ["b"]}
    s0 = cells[(0.0, "share")]  # A and B tie at 1.0; C's 0.5 is the second, 0.5 behind
    assert (s0.best, s0.tied, s0.second, s0.margin) == ("a", ["b"], "c", 0.5)
    assert cells[(1.0, "load")].best == "b"  # among distributed: C's single site not ranked
    text = "\n".join(markdown(FIGURE, list(cells.values())))
    assert "**unstable**: seed 0: A; seed 1: A; seed 2: B" in text
    assert "50% over B" in text and "tie (2 operators), +0.5 over C" in text
    assert "stable (3 seeds)" in text and "yard" not in text


def test_the_why_says_when_a_cost_constant_decides_the_time_ranking():
    # A 1.0 s with 0.9 s of probes, B 1.5 s with 0.2: probes at 1.71x their constant swap them
    assert swap_factor(1.0, 1.5, 0.9, 0.2) == np.float64(1.0 + 0.5 / 0.7)
    assert swap_factor(1.0, 1.5, 0.2, 0.7) == np.inf  # only at 0x: no positive factor
    assert swap_factor(1.0, 1.5, 0.4, 0.4) == np.inf  # the term is the same for both
    vals = {}
    for suffix in ("", "_seed1", "_seed2"):
        for x in (0.0, 1.0, 2.0):
            vals[(f"a{suffix}", x)] = _point(1.0, probe=0.9, output=0.1)
        vals[(f"b{suffix}", 0.0)] = _point(1.5, probe=0.2, output=1.3)  # output differs most
        vals[(f"b{suffix}", 1.0)] = _point(3.0, probe=2.6, output=0.4)
        vals[(f"b{suffix}", 2.0)] = _point(3.0, probe=0.2, output=0.1)
    cells = {c.x: c for c in decision_table(FIGURE, _rows(vals)) if c.metric == "time"}
    # output at 1 + 0.5 / (0.1 - 1.3) = 0.58x its constant (probe at 1.71x): within 0.5x-2x
    assert "a cost constant decides: the output constant at 0.58x" in cells[0.0].why
    assert "no factor on one cost constant swaps the two" in cells[1.0].why  # B has more
    assert "probe constant would have to be 3.9x" in cells[2.0].why  # 1 + 2 / 0.7


def test_a_time_to_a_share_of_the_join_is_explained_by_its_own_terms():
    """modeled_time_50 is ranked on the terms up to 50% of the join, not the whole run's."""
    figure = {**FIGURE, "decision": {"exclude": ["yard"], "metrics": [
        {"metric": "modeled_time_50", "better": "lower", "why": "time_terms"}]}}
    vals = {}
    for suffix in ("", "_seed1", "_seed2"):
        for name, t, probe50, read50, read in (("a", 1.0, 0.9, 0.1, 5.0),
                                               ("b", 2.0, 0.2, 1.8, 0.0)):
            vals[(f"{name}{suffix}", 0.0)] = {
                "modeled_time_50": t, "units": 4, "time_term_probe_to_50": probe50,
                "time_term_disk_read_to_50": read50, "time_term_probe": 2 * probe50,
                "time_term_disk_read": read}  # the whole run's reads would say otherwise
    (cell,) = decision_table(figure, _rows(vals))
    assert cell.best == "a" and "largest difference of the time model's terms is disk read: " \
        "0.1 modeled s for A against 1.8 for B (the slowest unit of each tick, to 50% of the " \
        "join)" in cell.why


def test_a_time_to_a_share_falls_back_to_the_whole_run_where_a_run_lacks_its_terms():
    """A run recorded before the terms to a share existed: the two are compared whole-run."""
    figure = {**FIGURE, "decision": {"exclude": ["yard"], "metrics": [
        {"metric": "modeled_time_50", "better": "lower", "why": "time_terms"}]}}
    vals = {}
    for suffix in ("", "_seed1", "_seed2"):
        vals[(f"a{suffix}", 0.0)] = {"modeled_time_50": 1.0, "units": 4,
                                     "time_term_probe_to_50": 0.9, "time_term_probe": 1.8,
                                     "time_term_disk_read": 5.0}
        vals[(f"b{suffix}", 0.0)] = {"modeled_time_50": 2.0, "units": 4,
                                     "time_term_probe": 0.4, "time_term_disk_read": 0.0}
    (cell,) = decision_table(figure, _rows(vals))
    assert "terms is disk read: 5 modeled s for A against 0 for B (the slowest unit of each " \
        "tick, whole run)" in cell.why


def test_a_metric_with_one_operator_ranked_has_no_cell():
    # arena/three_inputs: D-CAPE is its only distributed operator, so load decides nothing
    vals = {(f"{n}{suffix}", 0.0): _point(t, units=u) for suffix in ("", "_seed1", "_seed2")
            for n, t, u in (("a", 1.0, 4), ("b", 2.0, 1), ("c", 3.0, 1))}
    cells = {(c.x, c.metric) for c in decision_table(FIGURE, _rows(vals))}
    assert (0.0, "time") in cells and (0.0, "load") not in cells


def test_the_sensitivity_rule_changes_a_best_where_it_does():
    vals = {("a", 0.0): _point(2.0), ("b", 0.0): _point(3.0), ("c", 0.0): _point(2.5, units=1),
            ("c_per_unit", 0.0): _point(1.0, units=1)}
    changes = sensitivity_changes(FIGURE, _rows(vals))
    assert changes == ["z = 0, time: A under the primary rule, C under the sensitivity rule"]
    vals[("c_per_unit", 0.0)] = _point(4.0, units=1)
    assert sensitivity_changes(FIGURE, _rows(vals)) == []


def test_the_report_keeps_the_arena_out_of_the_papers_claims():
    from experiments.figures import beyond_papers, papers, select

    assert "arena" not in papers() and beyond_papers("arena/skew")
    assert "arena/skew" in select("arena") and "arena/skew" in select("all")


def test_the_arena_section_shows_exactness_and_the_decision_table():
    from experiments.figure_spec import config_hash
    from experiments.figures import load_figure
    from experiments.report import beyond_section

    figure = load_figure("arena/skew", "tiny")
    rows = []
    for series, time in (("shj", 2.0), ("diner", 1.0)):
        for metric, v in (("modeled_time_100", time), ("exact", 1.0), ("units", 4.0)):
            rows.append({"series": series, "x": 1.5, "x_label": "1.5", "metric": metric,
                         "value": v, "t": np.nan, "status": "ok", "seed": 0, "scale": "tiny",
                         "point_id": f"{series}__1.5", "git_commit": "abc",
                         "calibration_id": "cal",
                         "config_hash": config_hash(figure, "tiny", 0, series)})
    text = "\n".join(beyond_section("arena/skew", "tiny", pd.DataFrame(rows)))
    assert "(beyond the papers)" in text and "2 exact, 0 not" in text
    assert "| 1.5 | modeled_time_100 | DINER | 1 | 100% over SHJ (Squall) | stable (1 seed) |" \
        in text
    assert "**Targets**" not in text  # no claims: nothing counted
