"""One representative point per family, rerun with today's code against its published result.

    python -m benchmarks.bench_reproduce [families=rpj,diner,...] [against=REV] [repeat=1]

Each point (RPJ, DINER, MINER, D-CAPE, BiStream, Squall, AM-Join) runs as ``make reproduce``
runs it (``python -m experiments.run``, one Spark application, ``force=true``) into
``scratch/bench/reproduce/``, never into ``results/``. For each it prints the published
(committed) point's ``wall_time_s``, the new one, their ratio (the family's speed-up), and whether every
metric that is not a time is identical to the published one (row by row; a time is a metric
whose unit or name says so, :func:`experiments.results.is_time`). Writes
``scratch/bench/reproduce.json``. Local wall times of this machine, alternating nothing: on a
shared machine, read the ratios with the load beside them (``uptime`` is recorded).

``against=REV`` is the A/B form, the one to read as a speed-up: each point runs with the code
of ``REV`` (a detached worktree in ``scratch/bench/base-REV``, sharing this checkout's
``scratch/`` so both read the same cached inputs) and with today's code, alternately, in one
session, ``repeat`` times; the speed-up is the ratio of their median wall times and the counts
are compared between the two runs (a point whose settings changed since ``REV`` does other
work: its row says so and its ratio is not a code speed-up; ``SAME_WORK`` gives today's code
the base's settings for the points whose settings changed, ``same_work=false`` drops it). Writes
``scratch/bench/reproduce-ab.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from experiments.results import compare_counts  # noqa: E402
from runtime.paths import SCRATCH  # noqa: E402

# family -> (figure, series, x as the config writes it): points of 20-60 s when published
POINTS = {
    "rpj": ("diner/fig14", "rpj", "1"),
    "diner": ("diner/fig7", "diner", "0.05"),
    "miner": ("diner/fig20", "miner_3", "0.2"),
    "dcape": ("dcape/fig17", "distributed", "3"),
    "bistream": ("bistream/fig7", "jb8", "eq5"),
    "squall": ("squall/fig5k", "dynamic_exact", "2"),
    "amjoin": ("amjoin/fig7", "am_join", "16"),
}
# The A/B form's head-side overrides where a point's settings changed since the base it is
# timed against, so both sides do the same work (checked: their counts must be identical).
# 9bd4fcb: RPJ's 1 ms series had 100 buckets (now the bucket rule's); MINER's MaxOuterMem
# was 19 blocks at every scale (now scaled with the memory); BiStream read equal projected
# bytes (overhead 248) and rates as totals (now stored bytes, 291, and rates per stream).
SAME_WORK = {
    "bistream": ["++figure.series.jb8.overrides={run.model: jb, run.units: 8, "
                 "run.stream_balance: projected, run.tuple_overhead_bytes: 248, "
                 "workload.params.rate_reading: total}"],
    "rpj": ["++figure.series.rpj.overrides={run.time_unit_ms: 1.0, "
            "run.operator_params.n_part: 100}"],
    "miner": ["++figure.series.miner_3.overrides={workload.params.inputs: 3, "
              "run.operator_params.max_outer_mem: 19}"],
}


def _point_file(root: Path, figure: str, series: str, x: str) -> Path | None:
    import pandas as pd

    for path in sorted((root / figure).glob("*.parquet")):
        head = pd.read_parquet(path, columns=["series", "x_label"]).iloc[0]
        if head["series"] == series and str(head["x_label"]) == x:
            return path
    return None


def _committed(path: Path):
    """The point as committed (git HEAD), else as it is in the checkout."""
    import io

    import pandas as pd

    rel = path.relative_to(ROOT).as_posix()
    shown = subprocess.run(["git", "show", f"HEAD:{rel}"], cwd=ROOT, capture_output=True)
    return pd.read_parquet(io.BytesIO(shown.stdout) if shown.returncode == 0 else path)


def _worktree(rev: str) -> Path:
    """A detached checkout of ``rev`` whose scratch/ is this checkout's (same input cache)."""
    sha = subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, text=True,
                         capture_output=True, check=True).stdout.strip()
    tree = SCRATCH / "bench" / f"base-{sha}"
    if not tree.exists():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT,
                       check=True, capture_output=True)
    link = tree / "scratch"
    if not link.exists():
        link.symlink_to(SCRATCH)
    return tree


def _run_point(code: Path, family: str, out: Path,
               extra: Sequence[str] = ()) -> tuple[object, float]:
    """Run ``family``'s point as ``make reproduce`` does, with the code in ``code``, into
    ``out``; its result rows and the process's seconds."""
    import pandas as pd

    figure, series, x = POINTS[family]
    cmd = [sys.executable, "-m", "experiments.run", f"figure={figure}",
           f"point.series={series}", f"point.x={x}", "scale=small", "force=true",
           f"results_root={out}", "progress=false", *extra]
    env = {**os.environ, "PYTHONPATH": str(code)}
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=code, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{family}: {' '.join(cmd)} in {code} failed:\n{done.stderr[-2000:]}")
    return pd.read_parquet(_point_file(out, figure, series, x)), elapsed


def run_one(family: str, out: Path) -> dict:
    figure, series, x = POINTS[family]
    published = _point_file(ROOT / "results", figure, series, x)
    if published is None:
        raise SystemExit(f"{family}: no published point {figure} {series} x={x}")
    new, elapsed = _run_point(ROOT, family, out)
    old = _committed(published)
    rows, differ = compare_counts(old, new)
    was, now = float(old["wall_time_s"].iloc[0]), float(new["wall_time_s"].iloc[0])
    return dict(family=family, figure=figure, series=series, x=x, published_s=was,
                new_s=now, speedup=was / now if now else float("nan"), process_s=elapsed,
                rows_compared=rows, rows_differ=len(differ), differ=differ[:5],
                status=str(new["status"].iloc[0]))


def main_ab(families: list[str], rev: str, repeat: int, same_work: bool = True) -> int:
    import statistics

    base = _worktree(rev)
    out = SCRATCH / "bench" / "reproduce-ab"
    load = os.getloadavg()
    results = []
    print(f"A/B against {rev} ({base.name}), {repeat} run(s) each, alternating")
    print(f"{'family':<9} {'point':<34} {'base s':>8} {'head s':>8} {'speed-up':>8}  counts")
    for family in families:
        walls: dict[str, list[float]] = {"base": [], "head": []}
        rows = {}
        for _ in range(repeat):
            for side, code in (("base", base), ("head", ROOT)):
                extra = SAME_WORK.get(family, []) if side == "head" and same_work else []
                rows[side], _ = _run_point(code, family, out / side, extra)
                walls[side].append(float(rows[side]["wall_time_s"].iloc[0]))
        n, differ = compare_counts(rows["base"], rows["head"])
        was, now = statistics.median(walls["base"]), statistics.median(walls["head"])
        figure, series, x = POINTS[family]
        r = dict(family=family, figure=figure, series=series, x=x, base_s=walls["base"],
                 head_s=walls["head"], speedup=was / now, rows_compared=n,
                 rows_differ=len(differ), differ=differ[:5])
        results.append(r)
        same = "identical" if not differ else f"{len(differ)} rows differ: other work"
        print(f"{family:<9} {figure + ' ' + series + ' ' + x:<34} {was:>8.1f} {now:>8.1f} "
              f"{r['speedup']:>8.2f}  {same} ({n} rows)", flush=True)
    path = SCRATCH / "bench" / "reproduce-ab.json"
    path.write_text(json.dumps({"against": rev, "load_before": load,
                                "load_after": os.getloadavg(), "points": results},
                               indent=1, default=str))
    print(f"wrote {path.relative_to(ROOT)} (load average {load[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f})")
    return 0


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    families = opts.get("families", ",".join(POINTS)).split(",")
    unknown = [f for f in families if f not in POINTS]
    if unknown:
        print(f"error: unknown families {unknown}; valid: {', '.join(POINTS)}", file=sys.stderr)
        return 2
    if "against" in opts:
        return main_ab(families, opts["against"], int(opts.get("repeat", 1)),
                       opts.get("same_work", "true") == "true")
    out = SCRATCH / "bench" / "reproduce"
    out.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()
    results = []
    print(f"{'family':<9} {'point':<38} {'published s':>11} {'new s':>8} {'speed-up':>8}  counts")
    for family in families:
        r = run_one(family, out)
        results.append(r)
        same = "identical" if not r["rows_differ"] else f"{r['rows_differ']} rows differ"
        point = f"{r['figure']} {r['series']} {r['x']}"
        print(f"{family:<9} {point:<38} {r['published_s']:>11.1f} {r['new_s']:>8.1f} "
              f"{r['speedup']:>8.2f}  {same} ({r['rows_compared']} rows)", flush=True)
    path = SCRATCH / "bench" / "reproduce.json"
    path.write_text(json.dumps({"load_before": load, "load_after": os.getloadavg(),
                                "points": results}, indent=1, default=str))
    print(f"wrote {path.relative_to(ROOT)} (load average {load[0]:.1f} -> "
          f"{os.getloadavg()[0]:.1f})")
    return 1 if any(r["rows_differ"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
