"""The README's figure table, generated from conf/figure/ and results/: ``make readme``."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass

import pandas as pd

from experiments.figures import beyond_papers, figure_ids, load_figure, results_id
from experiments.report import missing_points, second_scale_of
from experiments.results import read_results
from experiments.targets import evaluate
from runtime.paths import ROOT

START, END = "<!-- figures:start -->", "<!-- figures:end -->"


def figure_table(results_root: str = "results") -> str:
    """One row per figure, then the total local wall time. Each run is counted once: a figure
    that draws another figure's runs (``runs_of``) shows "runs of X" for its wall time, which
    is X's, and adds nothing to the total; a point copied from another figure's point with the
    same settings (``reused_from``, experiments.point_cache) adds nothing either."""
    lines = ["| figure | what | `make` target | results (scale=small) | local wall time "
             "| targets met / checked |",
             "|---|---|---|---|---:|---|"]
    total, elapsed, runs = 0.0, 0.0, 0
    for fid in figure_ids():
        fig = load_figure(fid)
        res = read_results(results_root, results_id(fig))
        if res.empty:
            status, verdict, wall = "not run yet", "–", "–"
        else:
            points = res.groupby("point_id")["status"].first().value_counts()
            status = ", ".join(f"{n} {s}" for s, n in points.items())
            own = own_runs(res)
            if own.copied:
                status += f" ({own.copied} copied from another figure's runs)"
            if fig.get("runs_of"):
                wall = f"runs of `{fig['runs_of']}`"
            else:
                wall, runs = _minutes(own.seconds), runs + own.ran
                total, elapsed = total + own.seconds, elapsed + own.elapsed
            missing = missing_points(fig, res, "small")
            if missing:
                status += f", {len(missing)} not run"
            verdicts = [v.verdict for v in evaluate(fig.get("targets", []), res,
                                                    second_scale_of(fig)) if v.counted]
            checked = [v for v in verdicts if v in ("met", "not met", "unstable",
                                                    "scale-sensitive")]
            verdict = f"{verdicts.count('met')} / {len(checked)} (of {len(verdicts)})"
            for kind in ("unstable", "scale-sensitive", "by construction"):
                if kind in verdicts:
                    verdict += f", {verdicts.count(kind)} {kind}"
        if beyond_papers(fid):  # no claims: REPORT.md's decision table instead
            verdict = "beyond the papers: decision table in REPORT.md"
        star = " ★" if fig.get("headline") else ""
        lines.append(f"| `{fid}`{star} | {fig['title']} | `make reproduce-{fid.replace('/', '-')}` "
                     f"| {status} | {wall} | {verdict} |")
    lines.append(f"| **total** | every run once | `make reproduce-all` | {runs} points "
                 f"| **{_minutes(total)}** ({total / 3600:.1f} h) | |")
    lines.append(f"| **elapsed** | the same runs, two one-core points at once counted once "
                 f"| | | **{_minutes(elapsed)}** ({elapsed / 3600:.1f} h) | |")
    return "\n".join(lines)


@dataclass
class OwnRuns:
    """A figure's runs made for it: their summed wall time, the time they occupied the machine
    (the union of their [start, start + wall] intervals: two one-core points that ran at once
    count once), how many, and how many points were copied from another figure's runs
    (``reused_from``), whose time is theirs."""

    seconds: float
    elapsed: float
    ran: int
    copied: int


def own_runs(res: pd.DataFrame) -> OwnRuns:
    first = res.groupby("point_id")[["wall_time_s", "reused_from", "start_time"]].first()
    copied = first["reused_from"].fillna("").ne("")
    own = first[~copied]
    starts = pd.to_datetime(own["start_time"], format="ISO8601", errors="coerce", utc=True)
    known = starts.notna()  # a point without its start (hand-made rows) overlaps nothing
    seconds = (starts[known] - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    intervals = sorted(zip(seconds, seconds + own.loc[known, "wall_time_s"], strict=True))
    elapsed, end = float(own.loc[~known, "wall_time_s"].sum()), float("-inf")
    for begin, finish in intervals:
        elapsed += max(0.0, finish - max(begin, end))
        end = max(end, finish)
    return OwnRuns(float(own["wall_time_s"].sum()), elapsed, int(len(own)), int(copied.sum()))


def _minutes(seconds: float) -> str:
    """Seconds as minutes (a point's ``wall_time_s``: this machine, each input generated, then
    cached, in the first point that needs it)."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def update_readme() -> tuple[bool, str]:
    """Rewrite the README's figure table; whether it changed, and its two total rows."""
    path = ROOT / "README.md"
    text = path.read_text()
    table = figure_table()
    new = re.sub(f"{re.escape(START)}.*?{re.escape(END)}",
                 lambda _: f"{START}\n{table}\n{END}", text, flags=re.S)
    path.write_text(new)
    return new != text, "\n".join(table.splitlines()[-2:])


if __name__ == "__main__":
    changed, total = update_readme()
    print("README.md figure table " + ("updated" if changed else "already up to date"))
    print(total)
    sys.exit(0)
