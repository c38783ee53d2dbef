"""Run and plot a set of figures: ``python -m experiments.reproduce <figure|paper|headline|all>``.

Each figure's sweep runs in its own process (one Spark application per figure), then its chart
is redrawn from the results, also in a process of its own (``python -m figures.plot``:
``experiments`` never imports ``figures``, which reads experiments' registry and results).
``data_only=true`` only generates (and caches) the inputs.
"""

from __future__ import annotations

import subprocess
import sys
import time

from experiments.figures import draw_charts, select
from runtime.paths import ROOT


def main(argv: list[str]) -> int:
    names = [a for a in argv if "=" not in a]
    opts = [a for a in argv if "=" in a]
    data_only = "data_only=true" in opts
    opts = [o for o in opts if not o.startswith("data_only=")]
    if len(names) != 1:
        print("usage: python -m experiments.reproduce <figure|paper|headline|all> "
              "[scale=..] [spark=..] [hydra overrides]", file=sys.stderr)
        return 2
    try:
        ids = select(names[0])
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    scale = next((o.split("=", 1)[1] for o in opts if o.startswith("scale=")), "small")
    force = "force=true" in opts
    expected = {f: 0.0 if data_only else expected_seconds(f, scale, force) for f in ids}
    failed = []
    start, done_expected = time.perf_counter(), 0.0
    for i, figure_id in enumerate(ids, 1):
        print(f"== [{i}/{len(ids)}] {figure_id} (scale={scale})", flush=True)
        t0 = time.perf_counter()
        module = "experiments.prepare" if data_only else "experiments.run"
        rc = subprocess.run([sys.executable, "-m", module, f"figure={figure_id}", *opts],
                            cwd=ROOT).returncode
        if rc != 0:
            failed.append(figure_id)
            continue
        if not data_only and draw_charts([figure_id], scale) != 0:
            failed.append(figure_id)
            continue
        print(f"== {figure_id} done in {time.perf_counter() - t0:.0f}s", flush=True)
        done_expected += expected[figure_id]
        line = overall(i, len(ids), time.perf_counter() - start, done_expected,
                       sum(expected.values()))
        if line:
            print(line, flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def expected_seconds(figure_id: str, scale: str, force: bool) -> float:
    """The local wall time a figure's run should take here: the published points'
    ``wall_time_s`` of those that will run (stale, or all with ``force=true``; a current
    point is skipped), their median for a point not run yet; 0 for a figure that draws
    another's runs. NaN where nothing is published (another scale)."""
    import math

    from experiments.figure_spec import series_x_values
    from experiments.figures import load_figure, results_id
    from experiments.report import stale_points
    from experiments.results import read_results

    figure = load_figure(figure_id, scale)
    if figure.get("runs_of"):
        return 0.0
    if scale != "small":
        return math.nan
    results = read_results(ROOT / "results", results_id(figure))
    if results.empty:
        return math.nan
    firsts = results.groupby("point_id")[["wall_time_s", "reused_from"]].first()
    # a point copied from another figure's (experiments.point_cache) takes no time to copy again
    walls = firsts["wall_time_s"].where(firsts["reused_from"].fillna("").eq(""), 0.0)
    rerun = walls if force else walls.reindex(stale_points(figure, results)).dropna()
    points = sum(len(series_x_values(figure, series, scale)) for series in figure["series"])
    missing = max(0, points - len(walls))
    return float(rerun.sum() + missing * walls.median())


def overall(done: int, total: int, elapsed: float, done_expected: float,
            all_expected: float) -> str | None:
    """One line of overall progress with the time left at the pace so far (the published
    wall times rescaled by how this machine keeps up with them), or None without estimates."""
    import math

    if not math.isfinite(all_expected) or all_expected <= 0:
        return None
    pace = elapsed / done_expected if done_expected > 0 else 1.0
    left = max(0.0, all_expected - done_expected) * pace
    return (f"== overall: {done}/{total} figures, about {_hm(left)} left "
            f"({_hm(elapsed)} so far; {_hm(all_expected)} of published point time in all)")


def _hm(seconds: float) -> str:
    minutes = int(round(seconds / 60))
    return f"{minutes // 60}h{minutes % 60:02d}m"


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
