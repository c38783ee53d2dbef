"""The results notebook executes on real result rows (written by the runner's own code)."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from experiments import kinds
from experiments.paths import ROOT
from experiments.run import compose, run_point


@pytest.mark.slow
def test_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.setitem(kinds.KINDS, "batch_join", "tests.experiments.fake_kind:run_point")
    for series in ("hash_join", "broadcast_join"):
        for x in (0.0, 1.0):
            run_point(compose(["figure=amjoin/fig5", "scale=tiny", f"results_root={tmp_path}",
                               f"point.series={series}", f"point.x={x}"]))
    monkeypatch.setenv("SKEWJOINS_RESULTS_ROOT", str(tmp_path))
    monkeypatch.setenv("SKEWJOINS_SCALE", "tiny")
    nb = nbformat.read(ROOT / "notebooks" / "inspect_results.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = "".join(str(o) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert "amjoin/fig5: 4 rows, 4 points" in outputs
    assert "T6-broadcast" in outputs and "image/png" in outputs
