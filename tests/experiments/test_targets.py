"""Each target check can be met, not met, by construction, or not checkable."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments.targets import evaluate


def _results(values: dict[str, dict[float, float]], status: dict[str, str] | None = None):
    rows = []
    for series, points in values.items():
        for x, v in points.items():
            st = (status or {}).get(series, "ok")
            rows.append({"series": series, "x": x, "metric": "t", "value": v, "status": st})
    return pd.DataFrame(rows)


R = _results({"a": {0.0: 1.0, 0.5: 2.0, 1.0: 3.0}, "b": {0.0: 2.0, 0.5: 2.5, 1.0: 2.0},
              "c": {0.0: 5.0, 1.0: 5.0}}, status={"c": "oom"})


def _verdict(check: dict) -> str:
    return evaluate([{"id": "T", "claim": "c", "check": check}], R)[0].verdict


@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ({"type": "status", "series": ["c"], "expect": "fail"}, "met"),
        ({"type": "status", "series": ["a"], "expect": "fail"}, "not met"),
        ({"type": "status", "series": ["a", "b"], "expect": "ok"}, "met"),
        ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "x_max": 0.5,
          "max": 1.0}, "met"),
        ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "max": 1.0},
         "not met"),
        # a list of denominators: the smallest at each x; c (failed everywhere) is left out
        ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": ["b", "c"],
          "x_max": 0.5, "max": 1.0}, "met"),
        ({"type": "ratio", "metric": "t", "numerator": "b", "denominator": ["a", "c"],
          "max": 1.0}, "not met"),
        ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": ["c"]},
         "not checkable"),
        ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": ["b", "zzz"]},
         "not checkable"),
        ({"type": "ratio", "metric": "t", "numerator": "b", "denominator": ["a"],
          "reduce": "max", "at": 0.0, "min": 1.0}, "met"),  # b is the slowest at 0
        ({"type": "ratio", "metric": "t", "numerator": "b", "denominator": ["a"],
          "reduce": "max", "min": 1.0}, "not met"),
        # a: 1 -> 3 (drop -2), b: 2 -> 2 (0): b drops most
        ({"type": "drop", "metric": "t", "series": "b", "among": ["a"], "from_x": 0.0,
          "to_x": 1.0}, "met"),
        ({"type": "drop", "metric": "t", "series": "a", "among": ["b"], "from_x": 0.0,
          "to_x": 1.0}, "not met"),
        ({"type": "drop", "metric": "t", "series": "a", "among": ["b"], "from_x": 0.0,
          "to_x": 0.7}, "not checkable"),
        # b/a = 2, 1.25, 0.67 and a/b = 0.5, 0.8, 1.5: b/a above a/b only up to x = 0.5
        ({"type": "ratio_order", "metric": "t", "ratios": [["b", "a"], ["a", "b"]],
          "x_max": 0.5}, "met"),
        ({"type": "ratio_order", "metric": "t", "ratios": [["b", "a"], ["a", "b"]]},
         "not met"),
        ({"type": "ordering", "metric": "t", "at": 0.0, "order": ["a", "b"]}, "met"),
        ({"type": "ordering", "metric": "t", "at": 1.0, "order": ["a", "b"]}, "not met"),
        ({"type": "trend", "metric": "t", "series": "a", "direction": "increasing"}, "met"),
        ({"type": "trend", "metric": "t", "series": "a", "direction": "decreasing"}, "not met"),
        ({"type": "bound", "metric": "t", "series": "b", "max_over_min": 1.3}, "met"),
        ({"type": "bound", "metric": "t", "series": "a", "max": 2.5}, "not met"),
        ({"type": "crossover", "metric": "t", "a": "a", "b": "b"}, "met"),
        ({"type": "crossover", "metric": "t", "a": "a", "b": "b", "x_max": 0.5}, "not met"),
        ({"type": "trend", "metric": "t", "series": "zzz"}, "not checkable"),
        ({"type": "ratio", "metric": "t", "numerator": "c", "denominator": "a"}, "not checkable"),
        ({"type": "not_checkable", "reason": "needs 1000 machines"}, "not checkable"),
    ],
)
def test_check(check, expected):
    assert _verdict(check) == expected


def test_unknown_check_type_is_an_error():
    with pytest.raises(ValueError, match="valid"):
        _verdict({"type": "vibes"})


def test_report_lists_the_findings_of_targets_that_have_one():
    from experiments.report import _findings

    figure = {"targets": [{"id": "T1", "claim": "c", "finding": "two | parts\nmeasured"},
                          {"id": "T2", "claim": "d"}]}
    lines = _findings(figure)
    assert lines[0].startswith("**Findings**")
    assert lines[2] == "- **T1**: two \\| parts measured" and len(lines) == 4
    assert _findings({"targets": [{"id": "T2", "claim": "d"}]}) == []


def test_bound_below_another_metric_of_each_point():
    """`below`: each point's metric under that point's own bound (e.g. Ineq. 3 at its ℓ_max)."""
    rows = pd.concat([_results({"a": {0.5: 1.0, 1.0: 2.0}}),
                      _results({"a": {0.5: 1.7, 1.0: 2.7}}).assign(metric="u")])
    check = {"type": "bound", "metric": "t", "series": "a", "below": "u"}
    verdict = evaluate([{"id": "T", "claim": "c", "check": check}], rows)[0]
    assert verdict.verdict == "met" and verdict.measured == "0.5: 1 < 1.7, 1: 2 < 2.7"
    tight = rows.assign(value=rows.value.where(rows.metric == "u", 2.0))
    assert evaluate([{"id": "T", "claim": "c", "check": check}], tight)[0].verdict == "not met"
    missing = {**check, "below": "nope"}
    assert evaluate([{"id": "T", "claim": "c", "check": missing}], rows)[0].verdict == "not checkable"


def test_report_names_the_points_of_the_sweep_that_never_ran():
    from experiments.report import missing_points

    figure = {"series": {"a": {}, "b": {}, "c": {}},
              "x": {"values": [0.0, 1.0], "values_by_scale": {"tiny": [0.0]}}}
    results = R.assign(scale="small")
    # b ran at 0.0 and 1.0 (and 0.5, beyond the grid); c only at 0.0 and 1.0 (failed)
    assert missing_points({**figure, "series": {"a": {}, "b": {}}}, results, "small") == []
    assert missing_points({**figure, "series": {**figure["series"], "d": {}}}, results,
                          "small") == ["d__0.0", "d__1.0"]
    assert missing_points(figure, results, "tiny") == ["a__0.0", "b__0.0", "c__0.0"]
    # named as the result file would be (an x of 16.0 is written as 16)
    assert missing_points({**figure, "x": {"values": [16.0]}}, results, "small") == \
        ["a__16", "b__16", "c__16"]


def test_report_gives_a_figures_result_as_a_table_of_series_by_x():
    from experiments.report import results_table

    over = results_table({"plot": {"y": "t"}, "series": {"c": {}}}, R.assign(status="overflow"))
    assert over[4] == "| c | 5 (overflow) | not run | 5 (overflow) |"  # drawn on the chart too

    figure = {"plot": {"y": "t", "ylabel": "modeled time (s)"},
              "series": {"a": {"label": "A"}, "c": {"label": "C"}, "z": {}}}
    lines = results_table(figure, R)
    assert lines[0] == "**modeled time (s)**" and lines[2] == "| series \\ x | 0 | 0.5 | 1 |"
    assert lines[4] == "| A | 1 | 2 | 3 |"
    assert lines[5] == "| C | oom | not run | oom |"  # failures by status; z never ran
    assert len(lines) == 7


@pytest.mark.parametrize(("reduce", "expected"), [("min", "not met"), ("max", "met")])
def test_a_ratio_over_denominators_that_all_ran_takes_the_fastest_or_the_slowest(reduce,
                                                                                 expected):
    """At x = 1: a = 3, b = 2, d = 6; a/min = 1.5 and a/max = 0.5 (against max: 1.0)."""
    frame = _results({"a": {1.0: 3.0}, "b": {1.0: 2.0}, "d": {1.0: 6.0}})
    check = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": ["b", "d"],
             "reduce": reduce, "max": 1.0}
    [result] = evaluate([{"id": "T", "claim": "c", "check": check}], frame)
    assert result.verdict == expected
    assert result.measured == {"min": "a/min(b, d) at 1: 1.5 (smallest: 1: b)",
                               "max": "a/max(b, d) at 1: 0.5 (largest: 1: d)"}[reduce]


def _timed(values: dict[str, dict[float, float]], counts: dict[str, dict[float, float]]):
    """Modeled times (unit "modeled s") and one count metric per series and x."""
    times = _results(values).assign(unit="modeled s")
    work = _results(counts).assign(metric="tasks", unit="count")
    return pd.concat([times, work], ignore_index=True)


def test_a_ratio_of_identical_modeled_times_is_by_construction_not_met():
    """Spark3-Join vs Hash-Join when the skew split never fires: a ratio of exactly 1."""
    rows = _timed({"a": {0.0: 2.0, 0.5: 3.0}, "b": {0.0: 2.0, 0.5: 3.0}},
                  {"a": {0.0: 5, 0.5: 7}, "b": {0.0: 5, 0.5: 7}})
    check = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b",
             "min": 0.9, "max": 1.5}
    [v] = evaluate([{"id": "T", "claim": "c", "check": check}], rows)
    assert v.verdict == "by construction"
    assert "identical t" in v.measured and "the check passes" in v.measured


def test_identical_counts_make_different_looking_times_by_construction():
    """Counts equal over every metric that tells some series apart: times cannot differ
    (here they do by a hair, as a model's rounding could); a count all series share (c's
    tasks equal a's at x = 0 only) is not what tells them apart."""
    rows = _timed({"a": {0.0: 2.0}, "b": {0.0: 2.0000001}, "c": {0.0: 9.0}},
                  {"a": {0.0: 5}, "b": {0.0: 5}, "c": {0.0: 8}})
    check = {"type": "ratio", "metric": "t", "numerator": "b", "denominator": "a", "min": 1.0}
    [v] = evaluate([{"id": "T", "claim": "c", "check": check}], rows)
    assert v.verdict == "by construction" and "identical counts" in v.measured
    differ = rows.assign(value=rows.value.where(~((rows.series == "b") & (rows.metric == "tasks")), 6))
    assert evaluate([{"id": "T", "claim": "c", "check": check}], differ)[0].verdict == "met"


def test_equal_counts_are_a_real_check_when_the_claim_is_about_counts():
    """DYNAMIC keeping STATICMID's mapping (equal ILFs) could have failed: not by construction."""
    rows = _results({"a": {0.0: 4.0}, "b": {0.0: 4.0}}).assign(unit="tuples")
    check = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "max": 1.0}
    assert evaluate([{"id": "T", "claim": "c", "check": check}], rows)[0].verdict == "met"


def test_a_flat_series_is_by_construction_and_a_target_may_say_why():
    rows = _timed({"a": {0.0: 2.0, 0.5: 2.0, 1.0: 2.0}}, {"a": {0.0: 1, 0.5: 2, 1.0: 3}})
    flat = {"type": "bound", "metric": "t", "series": "a", "max_over_min": 1.5}
    assert evaluate([{"id": "T", "claim": "c", "check": flat}], rows)[0].verdict == \
        "by construction"
    moving = rows.assign(value=rows.value.where(rows.x != 1.0, 2.5))
    assert evaluate([{"id": "T", "claim": "c", "check": flat}], moving)[0].verdict == "met"
    said = {"id": "T", "claim": "c", "check": flat, "by_construction": "routing ignores z"}
    [v] = evaluate([said], moving)
    assert v.verdict == "by construction" and v.measured.endswith("routing ignores z)")


def test_a_tie_by_construction_with_the_deciding_one_of_a_list_is_flagged():
    """"Fastest of all" against [b, c, d] where b runs a's plan (the same counts and time,
    Spark3-Join beside Hash-Join): b decides the ratio (exactly 1), so the check cannot fail;
    without b the real competitors decide and it is met."""
    rows = _timed({"a": {0.0: 2.0}, "b": {0.0: 2.0}, "c": {0.0: 2.6}, "d": {0.0: 3.0}},
                  {"a": {0.0: 5}, "b": {0.0: 5}, "c": {0.0: 9}, "d": {0.0: 8}})
    check = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": ["b", "c", "d"],
             "max": 1.0}
    [v] = evaluate([{"id": "T", "claim": "c", "check": check}], rows)
    assert v.verdict == "by construction" and "a and b have identical t" in v.measured
    real = {**check, "denominator": ["c", "d"]}
    assert evaluate([{"id": "T", "claim": "c", "check": real}], rows)[0].verdict == "met"


SEEDS = _results({"a": {0.0: 1.0}, "b": {0.0: 2.0},  # seed 0: a/b = 0.5
                  "a1": {0.0: 1.5}, "b1": {0.0: 2.0},  # seed 1: 0.75
                  "a2": {0.0: 2.4}, "b2": {0.0: 2.0}})  # seed 2: 1.2
RATIO = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "max": 1.0}


def test_a_target_that_flips_between_seeds_is_unstable_with_every_value():
    t = {"id": "T", "claim": "c", "check": RATIO,
         "replicates": [{"a": "a1", "b": "b1"}, {"a": "a2", "b": "b2"}]}
    v = evaluate([t], SEEDS)[0]
    assert v.verdict == "unstable"
    assert "seed 0: met" in v.measured and "seed 2: not met" in v.measured
    assert "1.2" in v.measured


def test_a_target_that_holds_on_every_seed_counts_once():
    t = {"id": "T", "claim": "c", "check": {**RATIO, "max": 1.5},
         "replicates": [{"a": "a1", "b": "b1"}, {"a": "a2", "b": "b2"}]}
    v = evaluate([t], SEEDS)[0]
    assert v.verdict == "met" and "all 3 seeds agree" in v.measured and v.counted


def test_an_identity_is_never_met_and_a_sensitivity_reading_is_not_counted():
    ident = {"id": "T", "claim": "c", "check": RATIO, "identity": "5:4 messages per tuple"}
    sens = {"id": "T-literal", "claim": "c", "check": RATIO, "sensitivity": "literal reading"}
    a, b = evaluate([ident, sens], SEEDS)
    assert a.verdict == "by construction" and "identity: 5:4" in a.measured
    assert b.verdict == "met" and not b.counted and "not counted" in b.measured


# Rule 4 (scale): a not-met time or rate is judged again at the second scale.
SLOWER = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "min": 2.0}


def _scaled(a: float, b: float, unit: str) -> pd.DataFrame:
    return _results({"a": {0.0: a}, "b": {0.0: b}}).assign(unit=unit)


def _second(results: pd.DataFrame | None, missing: str = "not run"):
    from experiments.targets import SecondScale

    return SecondScale("medium", "small", results, missing=missing)


def _rule4(small: pd.DataFrame, second, check: dict = SLOWER):
    return evaluate([{"id": "T", "claim": "c", "check": check}], small, second)[0]


def test_a_not_met_time_that_is_met_at_the_second_scale_is_scale_sensitive():
    v = _rule4(_scaled(3.0, 2.0, "modeled s"), _second(_scaled(5.0, 2.0, "modeled s")))
    assert v.verdict == "scale-sensitive" and v.counted and v.second_scale == "flips"
    assert v.measured == ("scale=small: a/b at 0: 1.5; scale=medium: met (a/b at 0: 2.5)")


def test_a_not_met_rate_that_holds_at_the_second_scale_stays_not_met_with_both_values():
    v = _rule4(_scaled(3.0, 2.0, "tuples per modeled s"),
               _second(_scaled(3.2, 2.0, "tuples per modeled s")))
    assert v.verdict == "not met" and v.second_scale == "not met"
    assert "scale=small: a/b at 0: 1.5" in v.measured and "scale=medium: not met (a/b at 0: 1.6)" \
        in v.measured


def test_at_the_second_scale_seed_replicates_count_only_where_they_ran():
    """Rule 4 runs seed 0 at the second scale; its replicates there are not 'not checkable'."""
    small = _results({s: {0.0: v} for s, v in (("a", 3.0), ("b", 2.0), ("a1", 3.1), ("b1", 2.0),
                                               ("a2", 3.2), ("b2", 2.0))}).assign(unit="modeled s")
    target = {"id": "T", "claim": "c", "check": SLOWER,
              "replicates": [{"a": "a1", "b": "b1"}, {"a": "a2", "b": "b2"}]}
    v = evaluate([target], small, _second(_scaled(3.2, 2.0, "modeled s")))[0]
    assert v.verdict == "not met" and v.second_scale == "not met"
    assert v.measured.endswith("scale=medium: not met (a/b at 0: 1.6; seed 0 (the seed "
                               "replicates are not run at this scale))")
    assert "not checkable" not in v.measured


def test_a_count_target_is_never_scale_sensitive():
    v = _rule4(_scaled(3.0, 2.0, "tuples"), _second(_scaled(5.0, 2.0, "tuples")))
    assert v.verdict == "not met" and v.second_scale == "" and v.measured == "a/b at 0: 1.5"


def test_a_not_met_time_without_second_scale_results_is_not_met_and_marked_not_run():
    v = _rule4(_scaled(3.0, 2.0, "modeled s"), _second(None))
    assert v.verdict == "not met" and v.second_scale == "not run"
    assert v.measured.endswith("; scale=medium: not run")
    same = _rule4(_scaled(3.0, 2.0, "modeled s"), _second(None, missing="same data"))
    assert same.verdict == "not met" and same.second_scale == "same data"
    # a met time, or a sensitivity reading, is not looked at again
    met = _rule4(_scaled(5.0, 2.0, "modeled s"), _second(None))
    assert met.verdict == "met" and met.second_scale == ""
    sens = evaluate([{"id": "T", "claim": "c", "check": SLOWER, "sensitivity": "r"}],
                    _scaled(3.0, 2.0, "modeled s"), _second(None))[0]
    assert sens.second_scale == "" and not sens.counted


def test_the_first_table_counts_scale_sensitive_claims_and_second_scales_not_run():
    from collections import Counter

    from experiments.report import paper_table

    lines = paper_table({"p": Counter({"met": 2, "not met": 3, "scale-sensitive": 1,
                                       "second scale not run": 2, "sensitivity": 4})})
    assert "| scale-sensitive |" in lines[0] and lines[0].endswith(
        "second scale not run | near threshold, one seed |")
    assert lines[2] == "| p | 6 | 2 | 3 | 0 | 1 | 0 | 0 | 4 | 2 | 0 |"


def test_a_spearman_exactly_at_its_threshold_is_met():
    """Over 5 points the ranks (3, 4, 1, 2, 0) give rho = -0.8 exactly; scipy returns
    -0.7999999999999999, which must not fail a trend that asks for at least 0.8."""
    r = _results({"a": dict(zip([0.0, 1.0, 2.0, 3.0, 4.0], [3.0, 4.0, 1.0, 2.0, 0.0],
                                strict=True))})
    check = {"type": "trend", "metric": "t", "series": "a", "direction": "decreasing",
             "min_spearman": 0.8}
    assert evaluate([{"id": "T", "claim": "c", "check": check}], r)[0].verdict == "met"


def test_a_not_met_names_its_cause_class_in_the_report_and_the_cause_table():
    """Issue 37: every counted not-met names what decides it; one that names none is counted
    under "not named", so REPORT shows it."""
    from collections import Counter
    from unittest import mock

    from experiments import report

    slower = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "max": 0.5}
    rows = _results({"a": {0.0: 3.0}, "b": {0.0: 2.0}})
    rows = rows.assign(point_id=rows.series, git_commit="c", calibration_id="k")
    figure = {"id": "p/f", "title": "F", "plot": {}, "targets": [
        {"id": "T1", "claim": "c", "check": slower, "finding": "measured",
         "cause": "limitation: a stand-in input"},
        {"id": "T2", "claim": "c", "check": slower},
        {"id": "T3", "claim": "c", "check": slower, "sensitivity": "another reading",
         "cause": "reading: x"}]}
    with mock.patch.object(report, "load_figure", return_value=figure), \
            mock.patch.object(report, "second_scale_of", return_value=None), \
            mock.patch.object(report, "stale_points", return_value=[]), \
            mock.patch.object(report, "missing_points", return_value=[]):
        lines, tally = report.figure_section("p/f", "small", rows)
    assert any(line.startswith("| T1 |") and line.endswith("**not met** (our limitation) |")
               for line in lines)
    assert any(line.startswith("| T2 |") and line.endswith("**not met** (not named) |")
               for line in lines)
    assert "- **T1**: measured *Cause: limitation: a stand-in input.*" in lines
    assert tally["cause limitation"] == 1 and tally["cause not named"] == 1
    assert tally["cause reading"] == 0  # a sensitivity reading is not a counted not-met
    table = report.cause_table({"p": Counter(tally)})
    assert table[0] == ("| paper | not met | the paper | a reading | our limitation | the scale "
                        "| not named |")
    assert table[2] == "| p | 2 | 0 | 0 | 1 | 0 | 1 |"


@pytest.mark.parametrize("cause", ["luck: it rained", "paper", "paper:  ", "scale -- small"])
def test_a_cause_must_name_one_of_the_classes_and_which(cause):
    from experiments.figure_keys import FigureKeyError, check_figure_keys
    from experiments.targets import cause_class

    with pytest.raises(ValueError, match="paper, reading, limitation, scale"):
        cause_class(cause)
    figure = {"id": "p/f", "kind": "first_iteration", "plot": {},
              "targets": [{"id": "T1", "claim": "c", "check": {"type": "not_checkable"},
                           "cause": cause}]}
    with pytest.raises(FigureKeyError, match="target T1"):
        check_figure_keys(figure)
    assert cause_class(" scale : 5K tuples per joiner") == "scale"


def test_a_misspelt_target_key_fails_at_load():
    from experiments.figure_keys import FigureKeyError, check_figure_keys

    figure = {"id": "p/f", "kind": "first_iteration", "plot": {},
              "targets": [{"id": "T1", "claim": "c", "check": {"type": "not_checkable"},
                           "casue": "paper: x"}]}
    with pytest.raises(FigureKeyError, match="did you mean 'cause'"):
        check_figure_keys(figure)


@pytest.mark.parametrize(("check", "margin"), [
    ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "min": 0.4}, 0.25),
    ({"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "max": 0.6}, 1 / 6),
    ({"type": "ordering", "metric": "t", "order": ["a", "b"]}, 0.2),
    ({"type": "bound", "metric": "t", "series": "a", "min": 0.9, "max": 3.3}, 1 - 3 / 3.3),
    ({"type": "bound", "metric": "t", "series": "b", "max_over_min": 1.3}, 1 - 1.25 / 1.3),
    ({"type": "trend", "metric": "t", "series": "a", "min_spearman": 0.8}, 0.25),
    ({"type": "status", "series": ["c"], "expect": "fail"}, None),
])
def test_each_check_says_how_far_its_deciding_value_is_from_the_threshold(check, margin):
    v = evaluate([{"id": "T", "claim": "c", "check": check}], R)[0]
    assert v.margin == (pytest.approx(margin) if margin is not None else None)


def test_a_verdict_near_its_threshold_on_one_seed_is_marked_and_three_seeds_clear_it():
    """Rule 3: within 20% of the threshold a verdict needs three seeds."""
    near = {"type": "ratio", "metric": "t", "numerator": "a", "denominator": "b", "max": 0.6,
            "at": 0.0}
    far = {**near, "max": 2.0}
    one = evaluate([{"id": "T", "claim": "c", "check": near}], R)[0]
    assert one.verdict == "met" and one.one_seed
    assert one.measured.endswith("16.7% from its threshold, on one seed (rule 3 asks for three)")
    assert not evaluate([{"id": "T", "claim": "c", "check": far}], R)[0].one_seed
    seeds = _results({"a": {0.0: 1.0, 0.5: 2.0, 1.0: 3.0}, "b": {0.0: 2.0, 0.5: 2.5, 1.0: 2.0},
                      "a1": {0.0: 1.0}, "b1": {0.0: 2.1}, "a2": {0.0: 1.1}, "b2": {0.0: 2.0}})
    replicated = evaluate([{"id": "T", "claim": "c", "check": near,
                            "replicates": [{"a": "a1", "b": "b1"}, {"a": "a2", "b": "b2"}]}],
                          seeds)[0]
    assert replicated.verdict == "met" and not replicated.one_seed
    exempt = evaluate([{"id": "T", "claim": "c", "check": near,
                        "one_seed_suffices": "a closed form, no draw"}], R)[0]
    assert exempt.verdict == "met" and not exempt.one_seed
