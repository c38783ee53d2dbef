"""Write REPORT.md: per figure the chart, the paper-vs-reproduced table and each target's
verdict (met / not met / unstable / scale-sensitive / by construction / not checkable), from
results/ only; first, per paper, its claims and their verdicts. ``make report``.

A not-met time or rate is also judged on the figure's results at the second scale
(:func:`second_scale_of`, ``results/medium/``; rule 4 of issue 37); where that scale has not run,
the first table counts it under "second scale not run".

The charts are redrawn first, by ``python -m figures.plot`` in a child process
(:func:`experiments.figures.draw_charts`): ``figures`` reads experiments' registry and
results, so ``experiments`` does not import it."""

from __future__ import annotations

import sys
from collections import Counter
from datetime import UTC, datetime
from functools import cache

import pandas as pd

from experiments.config import compose
from experiments.figure_spec import (
    DERIVED_SCALES,
    config_hash,
    no_larger_scale,
    series_x_values,
    x_label,
    x_numeric,
)
from experiments.figures import (
    BEYOND_PAPERS,
    beyond_papers,
    chart_base,
    draw_charts,
    figure_ids,
    load_figure,
    results_id,
)
from experiments.results import Point, read_results
from experiments.targets import CAUSES, VERDICTS, SecondScale, cause_class, evaluate
from runtime.paths import ROOT


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _paper_table(figure: dict, results: pd.DataFrame, scale: str = "small") -> list[str]:
    """The paper's stated numbers beside ours, each with its own unit and scale (a paper's
    MB at 10G is not our MB at sf 0.01). A run's status is shown only when it failed: "15"
    beside the paper's 10 is a mismatch, whatever the run's status."""
    paper = figure.get("paper_values", [])
    if not paper:
        return ["The paper gives no plotted numbers for this figure (its claims are the "
                "targets below)."]
    lines = ["| series | x | metric | paper | reproduced | note |", "|---|---|---|---|---|---|"]
    for p in paper:
        metric = p.get("metric", figure["plot"].get("y"))
        hit = results[(results.series == p["series"]) & (results.metric == metric)
                      & ((results.x - float(p["x"])).abs() < 1e-9)]
        unit = str(hit.unit.iloc[0]) if len(hit) and "unit" in hit and pd.notna(hit.unit.iloc[0]) else ""
        if not len(hit):
            ours = "not run"
        else:
            ours = f"{hit.value.mean():.4g} {unit} (scale={scale})".replace("  ", " ")
            if hit.status.iloc[0] != "ok":
                ours += f", run {hit.status.iloc[0]}"
        theirs = f"{p['value']} {p.get('unit') or unit} (paper)".replace("  ", " ")
        lines.append(f"| {p['series']} | {p['x']} | {metric} | {_cell(theirs)} | {_cell(ours)} "
                     f"| {_cell(p.get('note', ''))} |")
    return lines


def stale_points(figure: dict, results: pd.DataFrame) -> list[str]:
    """Points whose settings changed since they ran (their config hash is not the current one).

    A figure that draws another figure's runs (``runs_of``) has no hash of its own: its points
    were made, and hashed, by that figure, so they are stale exactly when they are stale there
    (judged against that figure's current settings, at each point's scale). Only the points of
    its own series are its points; the other figure's other series are not drawn here."""
    first = results.groupby("point_id")[["series", "scale", "seed", "config_hash"]].first()
    if figure.get("runs_of"):
        first = first[first.series.isin(list(figure["series"]))]
        maker = {scale: load_figure(figure["runs_of"], scale) for scale in first.scale.unique()}
    else:
        maker = dict.fromkeys(first.scale.unique(), figure)
    return sorted(pid for pid, r in first.iterrows()
                  if r.series not in maker[r.scale]["series"]
                  or r.config_hash != config_hash(maker[r.scale], r.scale, int(r.seed), r.series))


def results_table(figure: dict, results: pd.DataFrame) -> list[str]:
    """The chart's y values as a table (series by x), failures named by their status: for a
    figure whose result the paper states in words (``plot.results_table: true``)."""
    y = figure["plot"]["y"]
    rows = results[results.metric == y]
    status = results.groupby(["series", "x"])["status"].first()
    xs = sorted(status.index.get_level_values("x").unique())
    head = [f"**{figure['plot'].get('ylabel', y)}**", "",
            f"| series \\ {figure.get('x', {}).get('label', 'x')} | "
            + " | ".join(f"{x:g}" for x in xs) + " |",
            "|---|" + "---|" * len(xs)]
    lines = []
    for series, spec in figure["series"].items():
        if series not in status.index.get_level_values("series"):
            continue
        cells = []
        for x in xs:
            st = status.get((series, x))
            hit = rows[(rows.series == series) & (rows.x == x)]
            if st is None:
                cells.append("not run")
            elif st == "ok" and len(hit):
                cells.append(f"{hit.value.mean():.3g}")
            elif st == "overflow" and len(hit):  # drawn on the chart too, marked
                cells.append(f"{hit.value.mean():.3g} (overflow)")
            else:
                cells.append(str(st))
        lines.append(f"| {(spec or {}).get('label', series)} | " + " | ".join(cells) + " |")
    return [*head, *lines, ""]


def missing_points(figure: dict, results: pd.DataFrame, scale: str) -> list[str]:
    """Points of the figure's sweep at ``scale`` (every series at each of its x values) that have no
    result at all: a figure drawn without them must say so."""
    have = {(r.series, round(float(r.x), 9)) for r in
            results[results.scale == scale][["series", "x"]].drop_duplicates().itertuples()}
    return [Point(figure.get("id", ""), series, x_numeric(figure, x), x_label(x)).point_id
            for series in figure["series"] for x in series_x_values(figure, series, scale)
            if (series, round(x_numeric(figure, x), 9)) not in have]


@cache
def _results_root(scale: str) -> str:
    return compose([f"scale={scale}"]).scale.results_root


def second_scale_of(figure: dict, scale: str = "small") -> SecondScale | None:
    """The results of ``figure`` (as loaded at ``scale``) at the second scale of its verdicts
    (the derived scale whose base ``scale`` is: medium for small), or None where ``scale`` has
    none. Its stale points (run under other settings) are no results: the figure is then "not
    run" there. The figure is composed at the second scale only where it has results there."""
    name = next((n for n, d in DERIVED_SCALES.items() if d.base == scale), None)
    if name is None:
        return None
    same = no_larger_scale(figure, name)
    if same:
        return SecondScale(name, scale, None, None, "same data", same)
    rows = read_results(_results_root(name), results_id(figure))
    if rows.empty:
        return SecondScale(name, scale, None, None, "not run",
                           f"not run (`make reproduce-{figure['id'].replace('/', '-')} "
                           f"SCALE={name}`)")
    there = load_figure(figure["id"], name)
    stale = stale_points(there, rows)
    if stale:
        return SecondScale(name, scale, None, None, "not run",
                           f"not run: {len(stale)} stale point(s)")
    return SecondScale(name, scale, rows, there.get("targets"))


def _choices(figure: dict) -> list[str]:
    choices = figure.get("choices") or {}
    if not choices:
        return []
    lines = ["<details><summary>Choices where the paper is ambiguous or the scale differs "
             f"({len(choices)})</summary>", ""]
    lines += [f"- **{name}**: {_cell(text).strip()}" for name, text in choices.items()]
    return [*lines, "", "</details>", ""]


def figure_section(figure_id: str, scale: str,
                   results: pd.DataFrame) -> tuple[list[str], Counter]:
    """The figure's part of the report, from its results (its chart drawn beforehand) and, for
    rule 4, its results at the second scale."""
    figure = load_figure(figure_id, scale)
    second = second_scale_of(figure, scale)
    lines = [f"## {figure_id}: {figure['title']}", ""]
    tally: Counter = Counter()
    if results.empty:
        lines += [f"No results at scale={scale} yet (`make reproduce-"
                  f"{figure_id.replace('/', '-')}`).", ""]
        tally["no results"] += 1
        return lines, tally
    png = chart_base(figure_id, scale).with_suffix(".png")
    if png.exists():
        lines += [f"![{figure_id}]({png.relative_to(ROOT)})", ""]
    points = results.groupby("point_id")["status"].first()
    commits = ", ".join(sorted(results.git_commit.dropna().unique()))
    lines += [f"{len(points)} points ({', '.join(f'{n} {s}' for s, n in points.value_counts().items())});"
              f" commit {commits}; calibration {', '.join(results.calibration_id.dropna().unique())}.",
              ""]
    if second is not None and second.results is not None:
        there = second.results.groupby("point_id")["status"].first()
        lines += [f"At the second scale (scale={second.name}, `{_results_root(second.name)}/`; "
                  "only for rule 4: a not-met time or rate is judged there too): "
                  f"{len(there)} points "
                  f"({', '.join(f'{n} {s}' for s, n in there.value_counts().items())}); commit "
                  f"{', '.join(sorted(second.results.git_commit.dropna().unique()))}.", ""]
    stale = stale_points(figure, results)
    if stale:
        maker = figure.get("runs_of") or figure_id
        whose = (f"the settings of {maker}, whose runs this figure draws," if maker != figure_id
                 else "the figure's settings")
        lines += [f"**{len(stale)} stale point(s)**: {whose} changed since they ran "
                  f"({', '.join(stale)}); `make reproduce-{maker.replace('/', '-')}` reruns "
                  "them.", ""]
    missing = missing_points(figure, results, scale)
    if missing:
        lines += [f"**{len(missing)} point(s) not run** at scale={scale} ({', '.join(missing)}); "
                  f"`make reproduce-{figure_id.replace('/', '-')}` runs them.", ""]
    if figure["plot"].get("results_table"):
        lines += results_table(figure, results)
    lines += _choices(figure)
    lines += ["**Paper vs reproduced (numbers)**", "", *_paper_table(figure, results, scale), ""]
    lines += ["**Targets**", "", "| id | paper's claim | check | reproduced | verdict |",
              "|---|---|---|---|---|"]
    for v in evaluate(figure.get("targets", []), results, second):
        tally[v.verdict if v.counted else "sensitivity"] += 1
        if v.counted and v.second_scale == "not run":
            tally[SECOND_NOT_RUN] += 1
        if v.counted and v.one_seed:
            tally[ONE_SEED] += 1
        shown = f"**{v.verdict}**" if v.counted else f"**{v.verdict} (sensitivity)**"
        if v.counted and v.verdict == "not met":
            cls = cause_class(v.cause) if v.cause else UNNAMED
            tally[f"cause {cls}"] += 1
            shown += f" ({CAUSES.get(cls, cls)})"
        lines.append(f"| {v.id} | {_cell(v.claim)} | {_cell(v.check)} | {_cell(v.measured)} | "
                     f"{shown} |")
    lines.append("")
    lines += _findings(figure)
    return lines, tally


def _findings(figure: dict) -> list[str]:
    """A target's ``finding``: what was measured that explains its verdict at this scale, and
    its ``cause`` where it names one."""
    found = [(t["id"], " ".join(filter(None, [
        _cell(t.get("finding") or "").strip(),
        f"*Cause: {_cell(t['cause']).strip()}.*" if t.get("cause") else ""])))
        for t in figure.get("targets", []) if t.get("finding") or t.get("cause")]
    if not found:
        return []
    return ["**Findings** (measured at scale=small; why a verdict is what it is)", "",
            *[f"- **{tid}**: {text}" for tid, text in found], ""]


def beyond_section(figure_id: str, scale: str, results: pd.DataFrame) -> list[str]:
    """A figure beyond the papers (the arena): its chart, its points and their exactness
    against DuckDB, its equal-resources rule, its decision table and where the sensitivity
    rule changes a best; no targets, nothing counted in the papers' claims."""
    from experiments.decision_table import decision_table, markdown, sensitivity_changes

    figure = load_figure(figure_id, scale)
    lines = [f"## {figure_id}: {figure['title']} (beyond the papers)", "",
             f"_{_cell(figure.get('description', '')).strip()}_", ""]
    if results.empty:
        return [*lines, f"No results at scale={scale} yet (`make reproduce-"
                        f"{figure_id.replace('/', '-')}`).", ""]
    png = chart_base(figure_id, scale).with_suffix(".png")
    if png.exists():
        lines += [f"![{figure_id}]({png.relative_to(ROOT)})", ""]
    points = results.groupby("point_id")["status"].first()
    exact = results[results.metric == "exact"]
    lines += [f"{len(points)} points ({', '.join(f'{n} {s}' for s, n in points.value_counts().items())}); "
              f"checked against DuckDB as a multiset: {int((exact.value == 1).sum())} exact, "
              f"{int((exact.value != 1).sum())} not; commit "
              f"{', '.join(sorted(results.git_commit.dropna().unique()))}; calibration "
              f"{', '.join(results.calibration_id.dropna().unique())}.", ""]
    stale = stale_points(figure, results)
    if stale:
        lines += [f"**{len(stale)} stale point(s)** ({', '.join(stale)}).", ""]
    missing = missing_points(figure, results, scale)
    if missing:
        lines += [f"**{len(missing)} point(s) not run** at scale={scale}.", ""]
    lines += _choices(figure)
    lines += ["**Decision table** (per cell and metric: the best operator by its mean over the "
              "seeds, its margin over the second, whether every seed has the same best, and "
              "why; for a time, *a cost constant decides* where one constant between 0.5x and "
              "2x its calibrated value would swap the best and the second, to first order)",
              "", *markdown(figure, decision_table(figure, results)), ""]
    changes = sensitivity_changes(figure, results)
    if any((s or {}).get("sensitivity") for s in figure["series"].values()):
        lines += ["**Sensitivity** (the series marked so, seed 0, in place of their primary "
                  "runs): " + ("; ".join(changes) + "." if changes else
                               "no best of the decision table changes."), ""]
    return lines


# of the not-met times and rates, those whose figure has not run at the second scale yet
SECOND_NOT_RUN = "second scale not run"
# of the met and not-met claims, those within 20% of their threshold judged on one seed (rule 3)
ONE_SEED = "near threshold, one seed"
UNNAMED = "not named"  # a counted not-met whose target names no cause


def cause_table(papers: dict[str, Counter]) -> list[str]:
    """Per paper, its counted not-mets by the class of their cause (``cause:`` of a target)."""
    classes = [*CAUSES, UNNAMED]
    out = ["| paper | not met | " + " | ".join(CAUSES.get(c, c) for c in classes) + " |",
           "|---|" + "---|" * (len(classes) + 1)]
    total: Counter = Counter()
    for paper, t in sorted(papers.items()):
        total.update(t)
        out.append(f"| {paper} | {t['not met']} | " +
                   " | ".join(str(t[f'cause {c}']) for c in classes) + " |")
    out.append(f"| **all** | **{total['not met']}** | " +
               " | ".join(f"**{total[f'cause {c}']}**" for c in classes) + " |")
    return out


def paper_table(papers: dict[str, Counter]) -> list[str]:
    """The first table: per paper, its counted claims and their verdicts."""
    cols = VERDICTS  # the counted verdicts: every claim has exactly one
    out = ["| paper | claims | " + " | ".join(cols) + " | sensitivity (not counted) | "
           f"not met, {SECOND_NOT_RUN} | {ONE_SEED} |",
           "|---|" + "---|" * (len(cols) + 4)]
    total: Counter = Counter()
    for paper, t in sorted(papers.items()):
        total.update(t)
        out.append(f"| {paper} | {sum(t[c] for c in cols)} | " +
                   " | ".join(str(t[c]) for c in cols) +
                   f" | {t['sensitivity']} | {t[SECOND_NOT_RUN]} | {t[ONE_SEED]} |")
    out.append(f"| **all** | **{sum(total[c] for c in cols)}** | " +
               " | ".join(f"**{total[c]}**" for c in cols) +
               f" | {total['sensitivity']} | {total[SECOND_NOT_RUN]} | {total[ONE_SEED]} |")
    return out


def main(argv: list[str]) -> int:
    opts = dict(a.split("=", 1) for a in argv if "=" in a)
    scale = opts.get("scale", "small")
    out = ROOT / opts.get("out", "REPORT.md")
    body, summary = [], []
    results = {fid: read_results(opts.get("results_root") or compose(
        [f"figure={fid}", f"scale={scale}"]).scale.results_root,
        results_id(load_figure(fid, scale))) for fid in figure_ids()}
    if draw_charts([fid for fid, rows in results.items() if not rows.empty], scale,
                   opts.get("results_root")) != 0:
        print("error: redrawing the charts failed (python -m figures.plot); REPORT.md not written",
              file=sys.stderr)
        return 1
    papers: dict[str, Counter] = {}
    beyond = []
    # after the papers, in their titles' order ("Arena 1: ...", "Arena 3: ..."); no claims
    for fid in sorted(filter(beyond_papers, figure_ids()),
                      key=lambda f: load_figure(f, scale)["title"]):
        beyond += beyond_section(fid, scale, results[fid])
    for fid in figure_ids():
        if beyond_papers(fid):
            continue
        lines, tally = figure_section(fid, scale, results[fid])
        body += lines
        papers.setdefault(fid.split("/")[0], Counter()).update(tally)
        summary.append(f"| {fid} | " + " | ".join(str(tally[c]) for c in VERDICTS) +
                       f" | {tally['sensitivity']} | {tally[SECOND_NOT_RUN]} | {tally[ONE_SEED]} | "
                       f"{'no results' if tally['no results'] else ''} |")
    header = [
        "# Reproduction report", "",
        f"Generated {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by `make report` (scale={scale}) from "
        "the result files only. Time axes say whether they show *modeled time* (calibrated costs "
        "of exact counts, scheduled on the modeled executors) or *local wall time* (this "
        "machine); local wall time is never a cluster's time.", "",
        "A target is *by construction* when its check cannot fail on this setup (the target "
        "says why, it checks an identity of our own formulas or counts, or the compared "
        "modeled times or counts are identical); it is never counted as met. A target checked "
        "on several seeds is *unstable* when they disagree (every value is shown). A "
        "*not met* on a time or a rate is judged again on the figure's results at the second "
        "scale (`SCALE=medium`: the data 4x, `results/medium/`): met there, it is "
        "*scale-sensitive*, with both values; not met there, it stays not met, with both; "
        "where that scale has not run yet, it stays not met and is counted under \"second "
        "scale not run\". A *sensitivity* reading of a claim (another reading than the "
        "primary one) is shown and not counted. A met or not-met verdict whose deciding value "
        "is within 20% of its threshold is to hold on three seeds (\"all 3 seeds agree\"); "
        "one still judged on one seed keeps its verdict, says so, and is counted under "
        "\"near threshold, one seed\" (unless its target says why one seed suffices).", "",
        *paper_table(papers), "",
        "Each counted *not met* names what decides it: *the paper* (a faithful run under the "
        "paper's settings does not show the claim), *a reading* (an ambiguity of the paper, "
        "resolved by a choice written in the figure's config), *our limitation* (a condition "
        "this setup cannot produce: a stand-in input, a failure mode it lacks; the finding says "
        "which) or *the scale* (reduced scale decides it, with the evidence).", "",
        *cause_table(papers), "",
        "| figure | " + " | ".join(VERDICTS) + f" | sensitivity (not counted) | not met, "
        f"{SECOND_NOT_RUN} | {ONE_SEED} | note |",
        "|---|" + "---|" * (len(VERDICTS) + 4),
        *summary, "",
    ]
    if beyond:
        body += [f"# Beyond the papers: {', '.join(BEYOND_PAPERS)}", "",
                 "These figures reproduce no paper: every online operator of the four online "
                 "papers meets the same streams under one equal-resources rule (issue 40). They "
                 "check no claim and are counted in none of the tables above.", "", *beyond]
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(header + body) + "\n")
    tmp.replace(out)
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
