"""The results notebook executes on real result rows (written by the runner's own code), for a
chart figure and for a table-kind figure (whose plot names no single metric ``y``)."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from experiments import kinds
from experiments.config import compose
from experiments.run import run_point
from runtime.paths import ROOT

# figure -> (the points to write, what the executed notebook must show)
CASES = {
    # a lines chart; rows from a scripted kind (no Spark)
    "amjoin/fig5": ([(s, x) for s in ("hash_join", "broadcast_join") for x in (0.0, 1.0)],
                    ["amjoin/fig5: 4 rows, 4 points", "T6-broadcast"]),
    # a table; rows from the real kind (closed forms, no Spark), its two fastest checks
    "squall/theory": ([("theory", "fig2"), ("theory", "fig3")],
                      ["squall/theory: ", " rows, 2 points", "ilf_square_gb", "T1-square"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("figure", list(CASES))
def test_notebook_runs(figure, tmp_path, monkeypatch):
    monkeypatch.setitem(kinds.KINDS, "batch_join", "tests.experiments.fake_kind:run_point")
    points, expected = CASES[figure]
    for series, x in points:
        run_point(compose([f"figure={figure}", "scale=tiny", f"results_root={tmp_path}",
                           f"point.series={series}", f"point.x={x}"]))
    monkeypatch.setenv("SKEWJOINS_FIGURE", figure)
    monkeypatch.setenv("SKEWJOINS_RESULTS_ROOT", str(tmp_path))
    monkeypatch.setenv("SKEWJOINS_SCALE", "tiny")
    nb = nbformat.read(ROOT / "notebooks" / "inspect_results.ipynb", as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    outputs = "".join(str(o) for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    for text in [*expected, "image/png"]:
        assert text in outputs, text
