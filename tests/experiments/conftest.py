"""Fixtures shared by the experiment-runner tests."""

from __future__ import annotations

import pytest

from experiments import kinds
from experiments.config import compose
from experiments.run import run_point
from tests.experiments import fake_kind


@pytest.fixture
def scripted(monkeypatch, tmp_path):
    """``run(series, x, *overrides)`` runs one amjoin/fig5 point at tiny scale into a scratch
    results folder with a scripted kind standing in for batch_join (no Spark)."""
    monkeypatch.setitem(kinds.KINDS, "batch_join", "tests.experiments.fake_kind:run_point")
    fake_kind.CALLS.clear()

    def run(series: str, x: float, *extra: str) -> str:
        cfg = compose(["figure=amjoin/fig5", "scale=tiny", f"results_root={tmp_path}",
                       f"point.series={series}", f"point.x={x}", *extra])
        return run_point(cfg)

    return run, tmp_path
