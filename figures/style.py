"""Shared look of every chart: series colours, failure marks, the paper overlay, the footer."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

FAILED = ("oom", "timeout", "error")  # no value to draw; overflow points keep theirs
FAIL_MARKERS = {"oom": "x", "timeout": "X", "overflow": "*", "error": "$!$"}
FAIL_LABELS = {"oom": "out of memory (scaled budget)", "timeout": "deadline passed",
               "overflow": "overflow to disk", "error": "error"}


def series_colors(names: list[str]) -> dict[str, str]:
    """tab10 for the first ten series, then black and Dark2's darker shades (drawn dashed),
    so an eleventh series is not drawn in the first one's colour."""
    palettes = [plt.get_cmap("tab10").colors, [(0.0, 0.0, 0.0)], plt.get_cmap("Dark2").colors]
    colors = [tuple(c) for pal in palettes for c in pal]
    return {n: colors[i % len(colors)] for i, n in enumerate(names)}


def series_linestyles(names: list[str]) -> dict[str, str]:
    """Solid for the first ten series, then dashed, dotted (the second palette's series)."""
    styles = ("-", "--", ":")
    return {n: styles[(i // 10) % len(styles)] for i, n in enumerate(names)}


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
