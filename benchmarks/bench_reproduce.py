"""One representative point per family, rerun with today's code against its published result.

    python -m benchmarks.bench_reproduce [families=rpj,diner,...] [repeat=1]

Each point (RPJ, DINER, MINER, D-CAPE, BiStream, Squall, AM-Join) runs as ``make reproduce``
runs it (``python -m experiments.run``, one Spark application, ``force=true``) into
``scratch/bench/reproduce/``, never into ``results/``. For each it prints the published
(committed) point's ``wall_time_s``, the new one, their ratio (the family's speed-up), and whether every
metric that is not a time is identical to the published one (row by row; a time is a metric
whose unit or name says so, :func:`experiments.results.is_time`). Writes
``scratch/bench/reproduce.json``. Local wall times of this machine, alternating nothing: on a
shared machine, read the ratios with the load beside them (``uptime`` is recorded).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def run_one(family: str, out: Path) -> dict:
    import pandas as pd

    figure, series, x = POINTS[family]
    published = _point_file(ROOT / "results", figure, series, x)
    if published is None:
        raise SystemExit(f"{family}: no published point {figure} {series} x={x}")
    cmd = [sys.executable, "-m", "experiments.run", f"figure={figure}",
           f"point.series={series}", f"point.x={x}", "scale=small", "force=true",
           f"results_root={out}", "progress=false"]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{family}: {' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    new_path = _point_file(out, figure, series, x)
    old, new = _committed(published), pd.read_parquet(new_path)
    rows, differ = compare_counts(old, new)
    was, now = float(old["wall_time_s"].iloc[0]), float(new["wall_time_s"].iloc[0])
    return dict(family=family, figure=figure, series=series, x=x, published_s=was,
                new_s=now, speedup=was / now if now else float("nan"), process_s=elapsed,
                rows_compared=rows, rows_differ=len(differ), differ=differ[:5],
                status=str(new["status"].iloc[0]))


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    families = opts.get("families", ",".join(POINTS)).split(",")
    unknown = [f for f in families if f not in POINTS]
    if unknown:
        print(f"error: unknown families {unknown}; valid: {', '.join(POINTS)}", file=sys.stderr)
        return 2
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
