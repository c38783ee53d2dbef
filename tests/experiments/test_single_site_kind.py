"""The DINER paper's experiment kind (single_site_join) and generator (diner_streams): a tiny
diner/fig10 point per series through the real command line, every total checked against the
exact join size, plotted; the generator's streams as the paper describes them."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from datagen.diner_streams import generate
from datagen.errors import GeneratorError
from experiments.kinds.single_site import exact_join_size
from figures.plot import plot_figure
from runtime.paths import ROOT


@pytest.mark.slow
def test_a_tiny_fig10_point_per_series(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "experiments.run", "figure=diner/fig10",
                           "scale=tiny", "point.x=3.0", f"results_root={tmp_path}"],
                          cwd=ROOT, text=True, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = pd.concat([pd.read_parquet(f) for f in (tmp_path / "diner" / "fig10").glob("*.parquet")])
    from experiments.figures import load_figure

    assert set(res["series"]) == set(load_figure("diner/fig10", "tiny")["series"])
    assert (res["status"] == "ok").all()
    v = res.pivot_table(index="series", columns="metric", values="value")
    assert (v["total_results"] == v["oracle_rows"]).all()
    assert (v["online_results"] <= v["total_results"]).all()
    assert (v["memory_max"] <= v["memory_budget_tuples"]).all()
    pauses = [s for s in v.index if "pauses" in s]  # WaitThresh read as: only injected pauses
    assert len(pauses) == 4 and (v.loc[pauses, "reactive_episodes"] == 0).all()
    assert v.loc["diner", "reactive_episodes"] > 0
    png = plot_figure("diner/fig10", "tiny", str(tmp_path))
    assert png is not None and png.exists() and png.with_suffix(".pdf").exists()


def test_streams_as_the_paper_describes_them(tmp_path):
    rows = generate({"n_r": 20000, "n_s": 5000, "s": 2.0, "seed": 3,
                     "pauses": [[0.5, 1000.0]]}, tmp_path)
    assert rows == {"R": 20000, "S": 5000}  # the rows written, as the files hold them:
    r = pd.read_parquet(tmp_path / "R.parquet")
    assert len(r) == 20000 and len(pd.read_parquet(tmp_path / "S.parquet")) == 5000
    assert r["key"].between(1, 999).all() and (r["key"] == 1).mean() > 0.5  # Zipf s = 2
    gaps = np.diff(r["t"].to_numpy())
    assert 9 < np.median(gaps[gaps < 500]) / np.log(2) < 11  # exponential, mean 1/0.1
    assert (gaps > 1000).sum() == 1  # the pause
    shifted = generate({"n_r": 20000, "n_s": 20000, "keys": "normal", "mean_shift": 40.0,
                        "variance_shift": 150.0, "seed": 1}, tmp_path / "n")
    assert shifted == {"R": 20000, "S": 20000}
    a, b = (pd.read_parquet(tmp_path / "n" / f"{t}.parquet")["key"] for t in "RS")
    assert abs(b.mean() - a.mean() - 40) < 1 and abs(b.var() / a.var() - 4) < 0.3
    generate({"n_r": 20000, "n_s": 5000, "s": 2.0, "seed": 3,
              "pauses": [[0.5, 1000.0]]}, tmp_path / "again")
    assert pd.read_parquet(tmp_path / "again" / "R.parquet").equals(r)  # seeded: the same
    with pytest.raises(GeneratorError, match="keys must be zipf or normal"):
        generate({"keys": "uniform"}, tmp_path / "bad")


def test_exact_join_size_from_key_counts():
    r = pd.DataFrame({"key": pd.array([1, 1, 2, None, 5], dtype="Int64")})
    s = pd.DataFrame({"key": pd.array([1, 2, 2, 2, None], dtype="Int64")})
    assert exact_join_size(r, s) == 2 * 1 + 1 * 3
