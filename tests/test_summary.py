"""Run summaries: exact counts as integers with separators, every metric with a unit."""

from __future__ import annotations

from joins.summary import format_value, lines, meaning, unit


def test_counts_are_integers_with_separators_and_ratios_have_decimals():
    assert format_value("output_rows", 91600.0) == "91,600"
    assert format_value("shuffle_write_bytes", 1.5e9) == "1,500,000,000"
    assert format_value("task_imbalance", 3.14159) == "3.14"
    assert format_value("modeled_s", 0.5) == "0.500"
    assert format_value("hot_keys_left", 12.0) == "12"  # an algorithm's own count


def test_every_line_has_a_unit_and_explain_adds_the_meaning():
    plain = lines({"output_rows": 91600, "wall_s": 2.0})
    assert plain[0].split() == ["output_rows", "91,600", "rows"]
    assert plain[1].split() == ["wall_s", "2.000", "local", "wall", "s"]
    explained = lines({"output_rows": 91600}, explain=True)
    assert explained[0].rstrip().endswith(meaning("output_rows"))
    assert unit("rows_hh_left") == "count"
