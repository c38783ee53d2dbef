"""Every figure config composes against the schema; bad names fail with the valid choices."""

from __future__ import annotations

import pytest

from experiments.figure_spec import x_values
from experiments.figures import figure_ids, load_figure
from experiments.kinds import KINDS
from experiments.run import compose, main
from experiments.targets import CHECKS
from figures.kinds import KINDS as PLOT_KINDS
from joins.registry import ALGORITHMS

FIGURES = figure_ids()


def test_there_are_figures():
    assert "amjoin/fig5" in FIGURES


@pytest.mark.parametrize("figure_id", FIGURES)
@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_figure_composes(figure_id, scale):
    fig = load_figure(figure_id, scale)
    assert fig["id"] == figure_id
    assert fig["kind"] in KINDS
    assert fig["plot"].get("kind", "lines") in PLOT_KINDS
    assert x_values(fig, scale), "every figure sweeps at least one x value per scale"
    assert fig["series"]
    assert fig["targets"], "every figure states the paper's claims as targets"
    for t in fig["targets"]:
        assert t["id"] and t["claim"]
        kind = t["check"]["type"]
        assert kind in CHECKS or (kind == "not_checkable" and t["check"].get("reason"))


@pytest.mark.parametrize("figure_id", FIGURES)
def test_series_algorithms_are_registered(figure_id):
    fig = load_figure(figure_id)
    for name, series in fig["series"].items():
        algorithm = series.get("algorithm", series.get("operator"))
        if algorithm is not None:
            assert algorithm in ALGORITHMS, f"{figure_id} series {name}: {algorithm} unregistered"


@pytest.mark.parametrize("spark", ["local", "local_cluster", "standalone", "yarn", "k8s"])
def test_spark_presets_compose(spark):
    cfg = compose([f"spark={spark}"])
    assert cfg.spark.name == spark


def test_unknown_key_fails_at_once():
    with pytest.raises(Exception, match="titel"):
        compose(["figure.titel=x"])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("figure=amjoin/fig99", "amjoin/fig5"),  # the message lists the valid figures
        ("scale=huge", "small"),
        ("spark=yarnn", "local_cluster"),
        ("seed=abc", "seed"),
        ("point.x", "point.x"),
    ],
)
def test_bad_input_exits_2_with_valid_choices(override, expected, capsys):
    with pytest.raises(SystemExit) as exc:
        main([override])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and expected in err


def test_config_hash_ignores_prose_but_not_settings():
    from experiments.figure_spec import config_hash

    fig = {"id": "p/f", "run": {"executors": 4}, "choices": {"why": "a"}, "description": "d"}
    base = config_hash(fig, "small", 0)
    assert config_hash({**fig, "choices": {"why": "b"}, "description": "e"}, "small", 0) == base
    assert config_hash({**fig, "run": {"executors": 8}}, "small", 0) != base
    assert config_hash(fig, "tiny", 0) != base and config_hash(fig, "small", 1) != base


def test_config_hash_of_a_point_ignores_other_series_and_x_values():
    from experiments.figure_spec import config_hash

    fig = {"id": "p/f", "x": {"param": "a", "values": [0, 1]},
           "series": {"s": {"algorithm": "x", "label": "S"}}}
    base = config_hash(fig, "small", 0, "s")
    grown = {**fig, "x": {"param": "a", "values": [0, 1, 2]},
             "series": {"s": {"algorithm": "x", "label": "renamed"}, "t": {"algorithm": "y"}}}
    assert config_hash(grown, "small", 0, "s") == base
    assert config_hash({**fig, "x": {"param": "b", "values": [0, 1]}}, "small", 0, "s") != base
    changed = {**fig, "series": {"s": {"algorithm": "x", "overrides": {"run.k": 1}}}}
    assert config_hash(changed, "small", 0, "s") != base
