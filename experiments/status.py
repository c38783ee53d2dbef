"""The README's figure table, generated from conf/figure/ and results/: ``make readme``."""

from __future__ import annotations

import re
import sys

from experiments.figures import figure_ids, load_figure, results_id
from experiments.report import missing_points
from experiments.results import read_results
from experiments.targets import evaluate
from runtime.paths import ROOT

START, END = "<!-- figures:start -->", "<!-- figures:end -->"


def figure_table(results_root: str = "results") -> str:
    lines = ["| figure | what | `make` target | results (scale=small) | local wall time "
             "| targets met / checked |",
             "|---|---|---|---|---:|---|"]
    for fid in figure_ids():
        fig = load_figure(fid)
        res = read_results(results_root, results_id(fig))
        if res.empty:
            status, verdict, wall = "not run yet", "–", "–"
        else:
            points = res.groupby("point_id")["status"].first().value_counts()
            status = ", ".join(f"{n} {s}" for s, n in points.items())
            wall = _minutes(res.groupby("point_id")["wall_time_s"].first().sum())
            missing = missing_points(fig, res, "small")
            if missing:
                status += f", {len(missing)} not run"
            verdicts = [v.verdict for v in evaluate(fig.get("targets", []), res)]
            checked = [v for v in verdicts if v in ("met", "not met")]
            verdict = f"{verdicts.count('met')} / {len(checked)} (of {len(verdicts)})"
            if "by construction" in verdicts:
                verdict += f", {verdicts.count('by construction')} by construction"
        star = " ★" if fig.get("headline") else ""
        lines.append(f"| `{fid}`{star} | {fig['title']} | `make reproduce-{fid.replace('/', '-')}` "
                     f"| {status} | {wall} | {verdict} |")
    return "\n".join(lines)


def _minutes(seconds: float) -> str:
    """The points' summed ``wall_time_s``: this machine, one point at a time, each input
    generated (then cached) in the first point that needs it."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def update_readme() -> bool:
    path = ROOT / "README.md"
    text = path.read_text()
    new = re.sub(f"{re.escape(START)}.*?{re.escape(END)}",
                 f"{START}\n{figure_table()}\n{END}", text, flags=re.S)
    path.write_text(new)
    return new != text


if __name__ == "__main__":
    changed = update_readme()
    print("README.md figure table " + ("updated" if changed else "already up to date"))
    sys.exit(0)
