"""Shared look of every chart: series colours, failure marks, the paper overlay, the footer."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

FAILED = ("oom", "timeout", "error")  # no value to draw; overflow points keep theirs
FAIL_MARKERS = {"oom": "x", "timeout": "X", "overflow": "*", "error": "$!$"}
FAIL_LABELS = {"oom": "out of memory (scaled budget)", "timeout": "deadline passed",
               "overflow": "overflow to disk", "error": "error"}


def series_labels(figure: dict) -> dict[str, str]:
    """Series name -> its legend label (the name itself when the figure gives none)."""
    return {k: (v or {}).get("label", k) for k, v in figure["series"].items()}


# after tab10, black and Dark2: dark shades none of them has (navy, maroon, teal, olive, brown)
EXTRA_COLORS = ((0.0, 0.0, 0.5), (0.5, 0.0, 0.0), (0.0, 0.5, 0.5), (0.33, 0.42, 0.18),
                (0.55, 0.35, 0.0))


def series_colors(names: list[str]) -> dict[str, str]:
    """tab10 for the first ten series, then black, Dark2's darker shades and five more dark
    ones (drawn dashed, then dotted: :func:`series_linestyles`), so up to 24 series have
    colours of their own (the arena's figures draw up to 20)."""
    palettes = [plt.get_cmap("tab10").colors, [(0.0, 0.0, 0.0)], plt.get_cmap("Dark2").colors,
                EXTRA_COLORS]
    colors = [tuple(c) for pal in palettes for c in pal]
    return {n: colors[i % len(colors)] for i, n in enumerate(names)}


def series_linestyles(names: list[str]) -> dict[str, str]:
    """Solid for the first ten series, then dashed, dotted (the second palette's series)."""
    styles = ("-", "--", ":")
    return {n: styles[(i // 10) % len(styles)] for i, n in enumerate(names)}


# Not "s" (the paper overlay's hollow squares) nor the failure marks: a series is its shape too.
SERIES_MARKERS = ("o", "^", "D", "v", "P", "<", ">", "p", "h", "d", "8", "H")
LINE_WIDTH, MARKER_SIZE = 1.5, 3.5
# Per series drawn over it: a covered series is this much wider, so it shows as a rim.
RIM_WIDTH, RIM_MARKER = 2.0, 3.0


def series_markers(names: list[str]) -> dict[str, str]:
    """A marker shape per series, so series with equal values still differ in the legend."""
    return {n: SERIES_MARKERS[i % len(SERIES_MARKERS)] for i, n in enumerate(names)}


def covering_series(values: dict[str, pd.Series], rtol: float = 1e-6) -> dict[str, list[str]]:
    """For each series, the later-drawn series with the same x and equal y at every x.

    Those are drawn exactly over it (fig5: Hash-Join and Spark3-Join under "AQE, no skew
    split" in modeled time), so the chart widens the covered one and names what covers it.
    """
    names = [n for n, v in values.items() if not v.empty]
    return {a: [b for b in names[i + 1:] if values[a].index.equals(values[b].index)
                and np.allclose(values[a].to_numpy(), values[b].to_numpy(), rtol=rtol, atol=0)]
            for i, a in enumerate(names)}


def coincidence_note(label: str, panels: list[int], n_panels: int) -> str:
    """Legend text for a series drawn under ``label`` in ``panels`` (1-based, left to right)."""
    where = "" if len(panels) == n_panels else \
        f" in panel{'s' if len(panels) > 1 else ''} {', '.join(map(str, panels))}"
    return f" (= {label}{where})"


def footer_text(results: pd.DataFrame, y_kind: str) -> str:
    """Provenance footer: what was measured, where, with which code and calibration."""
    def uniq(col: str) -> str:
        vals = sorted({str(v) for v in results[col].dropna().unique() if str(v)})
        return "/".join(vals) if vals else "?"

    return (f"{y_kind} · scale={uniq('scale')} · Spark {uniq('spark_version')} "
            f"({uniq('spark_master')}) · calibration {uniq('calibration_id')} · "
            f"commit {uniq('git_commit')} · {len(results['point_id'].unique())} points")


def y_kind_of(label: str) -> str:
    if "modeled" in label:
        return "modeled time (calibrated costs of exact counts)"
    if "wall" in label:
        return "local wall time (this machine, not a cluster)"
    return "exact counts"
