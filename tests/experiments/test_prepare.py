"""``make data`` (experiments.prepare) generates the inputs of online figures, not only batch
ones: the online_join kind describes its inputs with the same ``inputs(pc)`` its run uses."""

from __future__ import annotations

import datagen
import runtime.paths
import runtime.spark_session
from datagen import read_manifest
from experiments import prepare


def test_prepare_lists_each_distinct_input_of_an_online_figure_once(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **kw: None)
    monkeypatch.setattr(datagen, "materialize",
                        lambda gen, params, **kw: calls.append((gen, params)) or "FOLDER")
    assert prepare.main(["figure=squall/table2", "scale=tiny"]) == 0
    # the series x 2 z values at tiny, but the algorithm does not change the input: one input
    # per query, z and skew reading (seed 0), E_Q7 STATICMID's two replicate seeds and E_Q5
    # SHJ's two (rule 3): 16 inputs
    got = sorted((g, p["query"], float(p["z"]), p["sf"], p["skew"], p["seed"]) for g, p in calls)
    want = [("squall_query", q, z, 0.002, skew, 0) for q in ("eq5", "eq7") for z in (0.0, 1.0)
            for skew in ("foreign_keys", "query_columns")]
    want += [("squall_query", q, z, 0.002, "query_columns", seed) for q in ("eq5", "eq7")
             for z in (0.0, 1.0) for seed in (1, 2)]
    assert got == sorted(want)
    assert capsys.readouterr().out.count("squall/table2: squall_query -> FOLDER") == 16


def test_prepare_produces_an_online_figure_input(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runtime.paths, "DATA_CACHE", tmp_path)
    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **kw: None)
    assert prepare.main(["figure=squall/fig5k", "scale=tiny", "progress=false"]) == 0
    # one input per seed: the figure's and its two replicates' (rule 3)
    folders = sorted(tmp_path.glob("squall_query-*"))
    manifests = [read_manifest(f) for f in folders]
    assert sorted(m["params"]["seed"] for m in manifests) == [0, 1, 2]
    out = capsys.readouterr().out
    for folder, m in zip(folders, manifests, strict=True):
        assert (m["params"]["query"], m["params"]["sf"]) == ("fluct", 0.001)
        assert m["rows"]["R"] > 0 and m["rows"]["S"] > 0
        assert f"squall/fig5k: squall_query -> {folder}" in out


def test_prepare_lists_the_arenas_inputs_per_workload_and_seed(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(runtime.spark_session, "get_spark", lambda *a, **kw: None)
    monkeypatch.setattr(datagen, "materialize",
                        lambda gen, params, **kw: calls.append((gen, params)) or "FOLDER")
    assert prepare.main(["figure=arena/fluctuation", "scale=tiny"]) == 0
    # 20 series, but every operator reads the same streams: the two workloads (x, with their
    # own parameters: the Fluct-join order on the event times, the drifting keys) x 3 seeds
    got = sorted((p.get("order", "-"), p.get("periods", 1), p["seed"]) for _, p in calls)
    assert got == sorted((o, n, seed) for o, n in (("fluct", 1), ("-", 10))
                         for seed in (0, 1, 2))
    assert all(g == "diner_streams" for g, _ in calls)
    assert capsys.readouterr().out.count("arena/fluctuation: diner_streams -> FOLDER") == 6
