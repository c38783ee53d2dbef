"""Every figure config composes against the schema; bad names fail with the valid choices."""

from __future__ import annotations

import pytest

from experiments.config import compose
from experiments.figure_keys import CHECK_KEYS, PLOT_KEYS, RUN_KEYS, FigureKeyError
from experiments.figure_spec import series_x_values, x_values
from experiments.figures import beyond_papers, figure_ids, load_figure
from experiments.kinds import KINDS
from experiments.run import main
from experiments.targets import CHECKS
from figures.kinds import KINDS as PLOT_KINDS
from joins.registry import ALGORITHMS

FIGURES = figure_ids()


def test_there_are_figures():
    assert "amjoin/fig5" in FIGURES


@pytest.mark.parametrize("figure_id", FIGURES)
@pytest.mark.parametrize("scale", ["tiny", "small", "medium", "paper"])
def test_figure_composes(figure_id, scale):
    fig = load_figure(figure_id, scale)
    assert fig["id"] == figure_id
    assert fig["kind"] in KINDS
    assert fig["plot"].get("kind", "lines") in PLOT_KINDS
    assert x_values(fig, scale), "every figure sweeps at least one x value per scale"
    assert fig["series"]
    for name, spec in fig["series"].items():
        # a series' own x values are the figure's (raises otherwise); a replicate's series exists
        assert series_x_values(fig, name, scale), name
        assert (spec or {}).get("replicate_of", name) in fig["series"], name
    if beyond_papers(figure_id):  # the arena checks no paper's claim: its decision table
        assert not fig["targets"] and fig["decision"]["metrics"]
    else:
        assert fig["targets"], "every figure states the paper's claims as targets"
    for t in fig["targets"]:
        assert t["id"] and t["claim"]
        kind = t["check"]["type"]
        assert kind in CHECKS or (kind == "not_checkable" and t["check"].get("reason"))


@pytest.mark.parametrize("figure_id", FIGURES)
def test_series_algorithms_are_registered(figure_id):
    fig = load_figure(figure_id)
    for name, series in fig["series"].items():
        # a seed replicate runs what its base runs (its algorithm key only restates the base's)
        source = fig["series"][series["replicate_of"]] if "replicate_of" in series else series
        algorithm = source.get("algorithm", source.get("operator"))
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
    ("override", "message"),
    [
        ("+figure.plot.logyy=true", "plot (kind lines): unknown key 'logyy' (did you mean 'logy'?)"),
        ("+figure.run.partitions_per_executr=3",
         "run (kind batch_join): unknown key 'partitions_per_executr'"),
        ("+figure.x.lable=alpha", "x: unknown key 'lable'"),
        ("+figure.plot.extra_panels=[{y: shuffle_bytes, logx: true}]",
         "plot (kind lines).extra_panels: unknown key 'logx'"),
        ("+figure.targets.0.check.mni=1", "check (type not_checkable): unknown key 'mni'"),
        ("+figure.series.hash_join.overrides={run.executorz: 4}",
         "series hash_join overrides run.: unknown key 'executorz'"),
    ],
)
def test_misspelt_key_in_a_block_fails_at_load_with_the_valid_keys(override, message):
    with pytest.raises(FigureKeyError) as exc:
        compose(["figure=amjoin/fig5", override])
    assert message in str(exc.value) and "; valid: " in str(exc.value)


def test_misspelt_key_lists_the_keys_the_code_reads():
    with pytest.raises(FigureKeyError, match="valid: algorithm_params, executors, partitions, "
                                             "partitions_per_executor, schedule, seed$"):
        compose(["figure=amjoin/fig5", "+figure.run.partitions_per_executr=3"])


def test_every_kind_and_check_type_has_its_keys():
    assert set(RUN_KEYS) == set(KINDS)
    assert set(PLOT_KEYS) == set(PLOT_KINDS)
    assert set(CHECK_KEYS) == {*CHECKS, "not_checkable"}


def test_runner_rejects_a_misspelt_key_with_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["figure=amjoin/fig5", "+figure.plot.logyy=true"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("error: amjoin/fig5: plot (kind lines): unknown key")


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


def test_a_series_runs_at_its_own_x_values_and_they_are_not_in_its_hash():
    """A seed replicate may run only where its verdict is near its threshold (rule 3): its
    ``x_values`` (per scale or not) pick from the figure's; a value the figure lacks is an
    error; without them the series runs everywhere, a point.x beyond the list included."""
    from experiments.figure_spec import at_scale, config_hash, series_runs_at

    fig = {"id": "p/f", "x": {"param": "a", "values": [0, 0.5, 1],
                              "values_by_scale": {"tiny": [0, 1]}},
           "series": {"s": {"algorithm": "x"},
                      "r": {"algorithm": "x", "x_values": [0.5, 1]},
                      "t": {"algorithm": "x", "x_values": {"small": [0.5], "tiny": [1]}}}}
    assert series_x_values(fig, "s", "small") == [0, 0.5, 1]
    assert series_x_values(fig, "r", "small") == [0.5, 1]
    assert series_x_values(fig, "t", "small") == [0.5] and series_x_values(fig, "t", "tiny") == [1]
    # the derived scale's are its base's, as at_scale fills in every per-scale value
    assert series_x_values(at_scale(fig, "medium"), "t", "medium") == [0.5]
    with pytest.raises(ValueError, match="not x values"):
        series_x_values(fig, "r", "tiny")
    assert series_runs_at(fig, "s", 7.0, "small")
    assert series_runs_at(fig, "r", 1.0, "small") and not series_runs_at(fig, "r", 0.0, "small")
    same = {**fig, "series": {**fig["series"], "r": {"algorithm": "x"}}}
    assert config_hash(same, "small", 0, "r") == config_hash(fig, "small", 0, "r")


def test_seed_replicates_are_the_series_they_stand_for():
    """One ``seed_replicates`` group declares a replicate per base series and seed, with the
    hash a hand-written one has, and ``replicates: seeds`` in a target names them all."""
    from experiments.figure_spec import config_hash, with_seed_replicates

    fig = {"id": "p/f", "x": {"param": "a", "values": [0, 1]},
           "series": {"s": {"algorithm": "x", "label": "S", "overrides": {"run.k": 2}},
                      "u": {"label": "U"}},
           "seed_replicates": [{"series": ["s", "u"], "seeds": [1, 2],
                                "set": ["workload.params.seed", "run.seed"], "x_values": [1]}],
           "targets": [{"id": "T", "replicates": "seeds"}]}
    out = with_seed_replicates(fig)
    assert "seed_replicates" not in out and "seed_replicates" in fig  # the input is kept
    assert list(out["series"]) == ["s", "u", "s_seed1", "u_seed1", "s_seed2", "u_seed2"]
    assert out["series"]["s_seed2"] == {
        "algorithm": "x", "label": "S, seed 2", "replicate_of": "s", "x_values": [1],
        "overrides": {"run.k": 2, "workload.params.seed": 2, "run.seed": 2}}
    assert out["series"]["u_seed1"]["algorithm"] == "u"
    assert out["targets"][0]["replicates"] == [{"s": "s_seed1", "u": "u_seed1"},
                                               {"s": "s_seed2", "u": "u_seed2"}]
    by_hand = {**{k: v for k, v in fig.items() if k != "seed_replicates"},
               "series": {**fig["series"], "s_seed2": {
                   "algorithm": "x", "label": "another label", "replicate_of": "s",
                   "overrides": {"workload.params.seed": 2, "run.k": 2, "run.seed": 2}}}}
    assert config_hash(out, "small", 0, "s_seed2") == config_hash(by_hand, "small", 0, "s_seed2")
    assert config_hash(out, "small", 0, "s") == config_hash(fig, "small", 0, "s")
    with pytest.raises(ValueError, match="valid: s, u"):
        with_seed_replicates({**fig, "seed_replicates": [{**fig["seed_replicates"][0],
                                                          "series": ["v"]}]})
    with pytest.raises(ValueError, match="declared twice"):
        with_seed_replicates({**fig, "series": {**fig["series"], "s_seed1": {}}})


def test_the_second_scale_is_small_with_4x_the_data_capped_at_the_papers():
    """``medium`` (rule 4's second scale) is derived, not written per figure: data sizes and a
    paper's scale_factor grow 4x (never past the paper's), every other setting is small's, and
    small's own config (so its points' hashes) is untouched."""
    from experiments.figure_spec import at_scale, by_scale, config_hash, no_larger_scale

    fig = {"id": "p/f", "workload": {"sizes": {"tiny": {"n": 10}, "small": {"n": 100, "sf": 0.05,
                                                                           "cap": 30},
                                               "paper": {"n": 10000, "sf": 10, "cap": 50}}},
           "run": {"scale_factor": {"tiny": 0.0002, "small": 0.002, "paper": 1.0},
                   "joiners": {"tiny": 16, "small": 64, "paper": 64}, "band": {"small": 1036}},
           "rules": {"memory_budget_bytes": {"paper": 2.0e9, "scale_with": "sf"}}}
    medium = at_scale(fig, "medium")
    assert medium["workload"]["sizes"]["medium"] == {"n": 400, "sf": 0.2, "cap": 50}
    assert by_scale(medium["run"]["scale_factor"], "medium") == 0.008
    assert by_scale(medium["run"]["joiners"], "medium") == 64
    assert by_scale(medium["run"]["band"], "medium") == 1036
    assert at_scale(fig, "small") is fig and "medium" not in fig["run"]["joiners"]
    assert config_hash(at_scale(fig, "small"), "small", 0) == config_hash(fig, "small", 0)
    assert no_larger_scale(fig, "medium") is None
    paper_sized = {"workload": {"sizes": {"small": {"n": 100}, "paper": {"n": 100}}}}
    assert "same data" in no_larger_scale(paper_sized, "medium")
    assert compose(["scale=medium"]).scale.results_root == "results/medium"


RUNS_OF = [f for f in FIGURES if load_figure(f).get("runs_of")]


def test_the_figures_that_draw_other_figures_runs():
    """Squall's Fig 5h draws the times of Fig 5g's runs; DINER's Tables 3 and 4 draw the
    buffers of Fig 16's and the online shares of Fig 9's."""
    assert {f: load_figure(f)["runs_of"] for f in RUNS_OF} == {
        "squall/fig5h": "squall/fig5g", "diner/table3": "diner/fig16",
        "diner/table4": "diner/fig9"}


@pytest.mark.parametrize("figure_id", RUNS_OF)
@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_a_runs_of_figure_makes_the_other_figures_points(figure_id, scale):
    from experiments.figures import runs_of_mismatch

    fig = load_figure(figure_id, scale)
    assert runs_of_mismatch(fig, scale) is None
    # a setting that changes a point is caught, by name
    changed = {**fig, "run": {**fig["run"], "joiners": 7}}
    assert "settings differ" in runs_of_mismatch(changed, scale)
    extra = {**fig, "series": {**fig["series"], "shj": {"algorithm": "shj"}}}
    assert "['shj']" in runs_of_mismatch(extra, scale)


def test_running_a_runs_of_figure_runs_the_other_one(capsys):
    from experiments.run import redirect_runs_of

    argv = ["figure=squall/fig5h", "scale=tiny", "point.x=bnci"]
    assert redirect_runs_of(argv) == ["figure=squall/fig5g", "scale=tiny", "point.x=bnci"]
    assert "squall/fig5h draws the runs of squall/fig5g" in capsys.readouterr().out
    assert redirect_runs_of(["figure=squall/fig5g"]) == ["figure=squall/fig5g"]
