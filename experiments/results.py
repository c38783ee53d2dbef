"""Tidy result rows with provenance: one Parquet file per sweep point, written atomically.

A figure's rows read back with ``pandas.read_parquet("results/<paper>/<fig>")``. Files whose
names start with ``.`` (in-progress writes) are ignored by pyarrow, so a killed sweep never
leaves a half-written point behind, and finished points are skipped on rerun.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from runtime.paths import ROOT

# Statuses that are results (drawn as the paper draws them); "error" points are retried.
# "n/a": the series cannot run this point (e.g. a hash join on a band predicate).
FINAL_STATUSES = ("ok", "oom", "timeout", "overflow", "n/a")

COLUMNS = [
    "figure", "series", "x", "x_label", "metric", "value", "unit", "status", "t",
    "config_hash", "point_id", "seed", "scale", "spark_version", "spark_master",
    "calibration_id", "git_commit", "start_time", "wall_time_s", "error", "reused_from",
]
# ``t`` positions a row of a within-run time series (e.g. ILF at a fraction of the input
# processed, or at a micro-batch); it is NaN for a point's scalar metrics. ``reused_from``
# names the other figure's point a point was copied from (experiments.point_cache), whose run
# its provenance is; empty for a point run for its own figure.
_STR_COLS = [c for c in COLUMNS if c not in ("x", "value", "seed", "wall_time_s", "t")]


class ResultsError(RuntimeError):
    pass


@dataclass(frozen=True)
class Point:
    figure: str
    series: str
    x: float
    x_label: str
    seed: int = 0

    @property
    def point_id(self) -> str:
        """``<series>__<x>``, plus ``__seed<n>`` for seeds other than 0: each seed of a
        ``seed=0,1,..`` sweep keeps its own file (plots and checks average over seeds)."""
        name = f"{self.series}__{self.x_label}" + (f"__seed{self.seed}" if self.seed else "")
        return re.sub(r"[^A-Za-z0-9_.+-]", "_", name)


def results_dir(root: str | Path, figure: str) -> Path:
    base = Path(root)
    if not base.is_absolute():
        base = ROOT / base
    return base / figure


def ensure_writable(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".probe-{uuid.uuid4().hex}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ResultsError(f"results folder {folder} is not writable: {exc.strerror}") from exc


def point_path(folder: Path, point: Point) -> Path:
    return folder / f"{point.point_id}.parquet"


def finished(folder: Path, point: Point, config_hash: str) -> bool:
    """True if this point already has a final result computed from the same configuration."""
    path = point_path(folder, point)
    if not path.exists():
        return False
    try:
        done = pd.read_parquet(path, columns=["status", "config_hash"])
    except Exception:  # unreadable file: redo the point
        return False
    return bool(len(done)) and done["config_hash"].eq(config_hash).all() and done["status"].isin(
        FINAL_STATUSES
    ).all()


def tidy_frame(rows: Iterable[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows))
    for col in COLUMNS:
        if col not in frame:
            frame[col] = None
    frame = frame[COLUMNS]
    frame[_STR_COLS] = frame[_STR_COLS].astype("string")
    frame["x"] = frame["x"].astype("float64")
    frame["t"] = pd.to_numeric(frame["t"], errors="coerce").astype("float64")
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype("float64")
    frame["seed"] = frame["seed"].astype("int64")
    frame["wall_time_s"] = frame["wall_time_s"].astype("float64")
    return frame


def write_point(folder: Path, point: Point, rows: list[dict[str, Any]]) -> Path:
    """Write one point's rows atomically (temp file in the same folder, then rename)."""
    folder.mkdir(parents=True, exist_ok=True)
    final = point_path(folder, point)
    tmp = folder / f".{final.name}.{uuid.uuid4().hex}.tmp"
    try:
        tidy_frame(rows).to_parquet(tmp, index=False)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()
    return final


def read_results(root: str | Path, figure: str) -> pd.DataFrame:
    """All rows of a figure (empty frame with the right columns if none yet)."""
    folder = results_dir(root, figure)
    files = sorted(folder.glob("[!._]*.parquet")) if folder.exists() else []
    if not files:
        return tidy_frame([]).iloc[0:0]
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    for col in COLUMNS:  # a column added since the oldest file was written (reused_from)
        if col not in frame:
            frame[col] = pd.Series(pd.NA, index=frame.index, dtype="string")
    return frame


# Units of a time (modeled or local wall) or of a rate over one: what may change when the
# code gets faster. Every other metric is a count, or derived from counts, and must not.
_TIME_UNIT = re.compile(r"modeled ms|modeled s\b|^s$|^s \(|local wall|ms \(modeled\)|tuples/s|"
                        r"tuples per modeled s|^KB/s|s of event time$|with / without")


# metrics that are times whatever their unit says (some batch metrics carry unit "count")
_TIME_METRIC = re.compile(r"(_seconds|_ms|_ms_total|_wall_s|_time_s)$")


def is_time_unit(unit: object) -> bool:
    return bool(_TIME_UNIT.search(str(unit or "")))


def is_time(metric: object, unit: object) -> bool:
    """A metric that may change when the code gets faster: a time by its unit or its name."""
    return is_time_unit(unit) or bool(_TIME_METRIC.search(str(metric)))


def compare_counts(old: pd.DataFrame, new: pd.DataFrame, rtol: float = 1e-9
                   ) -> tuple[int, list[str]]:
    """Rows of one point compared metric by metric, times left out (:func:`is_time`):
    how many rows were compared and a line per row that differs in value (beyond ``rtol``,
    the rounding of a sum taken in another order) or status, or is missing in ``new``."""
    def keyed(frame: pd.DataFrame) -> pd.DataFrame:
        f = frame.assign(t=frame["t"].astype("float64").fillna(-1.0))
        f["n"] = f.groupby(["series", "x", "metric", "t"]).cumcount()
        return f.set_index(["series", "x", "metric", "t", "n"])

    a, b = keyed(old), keyed(new)
    a = a[[not is_time(m, u) for m, u in zip(a.index.get_level_values("metric"), a["unit"],
                                              strict=True)]]
    b = b.reindex(a.index)
    differ = []
    for idx, va, vb, sa, sb in zip(a.index, a["value"], b["value"], a["status"], b["status"],
                                   strict=True):
        same = (pd.isna(va) and pd.isna(vb)) or (
            pd.notna(va) and pd.notna(vb) and abs(va - vb) <= rtol * max(abs(va), abs(vb)))
        if not same or str(sa) != str(sb):
            series, x, metric, t, _ = idx
            at = "" if t == -1.0 else f" t={t:g}"
            differ.append(f"{series} x={x:g} {metric}{at}: {va} -> {vb}"
                          + (f" (status {sa} -> {sb})" if str(sa) != str(sb) else ""))
    return len(a), differ
