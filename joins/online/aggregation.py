"""Online aggregation over a distributed join (BiStream App. B, §3.4.2): each unit keeps a
local view (group -> partial aggregates) of its own results, and a merger merges the local
views into the global one. What a unit sends the merger, counted exactly from the result rows
(the unit that produced each, its group, its virtual time):

- *unbatched* (immediate push): every result updates the local view and the update is sent at
  once, one message per result;
- *batched* (the paper's lazy update): a unit sends each group it changed once per
  ``period`` of event time, one message per (unit, dirty group, period).

The local view's own cost is one update per result at the unit and one merge per message at
the merger, at ``per_view_update`` seconds, measured by :func:`measure_view_update` (a run
that varies the number of updates alone) and kept in ``calibration/view-update.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

VIEW_CALIBRATION = Path(__file__).resolve().parents[2] / "calibration" / "view-update.json"


def batched_messages(units: np.ndarray, groups: np.ndarray, at: np.ndarray,
                     period: float) -> pd.DataFrame:
    """The batched view-update messages: one row per (unit ``u``, group ``g``, period
    ``p``) with a result, at the time ``t`` of its first result."""
    if period <= 0:
        raise ValueError(f"the batching period must be > 0, got {period}")
    t = np.asarray(at, float)
    if np.isnan(t).any():
        raise ValueError("batched view updates need each result's time (run with time=)")
    frame = pd.DataFrame({"u": units, "g": pd.factorize(pd.Series(groups), sort=False)[0],
                          "p": np.floor(t / period), "t": t})
    return frame.drop_duplicates(["u", "g", "p"])


def view_messages(units: np.ndarray, groups: np.ndarray, at: np.ndarray,
                  period: float) -> dict[str, int]:
    """Messages from the units to the merger: one per result (unbatched), one per (unit,
    group, period) with a result (batched)."""
    return {"unbatched": int(len(units)),
            "batched": int(len(batched_messages(units, groups, at, period)))}


def _update_views(units: np.ndarray, groups: np.ndarray, values: np.ndarray,
                  n_units: int, n_groups: int) -> np.ndarray:
    """The local views' work: sum and count per (unit, group), one update per result."""
    flat = units * n_groups + groups
    view = np.zeros((2, n_units * n_groups))
    np.add.at(view[0], flat, values)
    np.add.at(view[1], flat, 1.0)
    return view


def measure_view_update(sizes: tuple[int, ...] = (0, 250_000, 1_000_000, 2_000_000),
                        repeats: int = 9, units: int = 16, groups: int = 25,
                        seed: int = 0) -> dict:
    """Seconds per local view update: the least-squares slope of the view updates' CPU time
    (the median of ``repeats`` runs per size: single runs see page faults) on their number,
    every other count held (the units, groups and values drawn the same way)."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for n in sizes:
        u, g, v = rng.integers(0, units, n), rng.integers(0, groups, n), rng.random(n)
        times = []
        for _ in range(repeats):
            t0 = time.process_time()
            _update_views(u, g, v, units, groups)
            times.append(time.process_time() - t0)
        xs.append(n)
        ys.append(float(np.median(times)))
    x, y = np.asarray(xs, float), np.asarray(ys, float)
    slope, intercept = np.polyfit(x, y, 1)
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - slope * x - intercept) ** 2).sum()) / ss if ss > 0 else float("nan")
    return {"per_view_update": float(slope), "intercept_s": float(intercept), "r2": r2,
            "sizes": list(sizes), "median_s": ys, "repeats": repeats,
            "clock": "process CPU seconds, median of the repeats",
            "design": f"{units} units x {groups} groups, sum and count per result (np.add.at)"}


def load_view_update(path: Path = VIEW_CALIBRATION) -> float:
    """The measured seconds per view update (``python -m joins.online.aggregation``)."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run python -m joins.online.aggregation")
    return float(json.loads(path.read_text())["per_view_update"])


if __name__ == "__main__":
    import datetime as dt

    out = measure_view_update()
    out["measured"] = dt.date.today().isoformat()
    out["command"] = "python -m joins.online.aggregation"
    VIEW_CALIBRATION.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
