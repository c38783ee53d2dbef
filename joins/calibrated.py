"""The online engine's cost model from a calibration (:mod:`runtime.cost_model`): what the
figures' online points and ``python -m joins stream`` charge the engine's exact counts with.

Here, not in ``runtime`` beside the calibration loader, because it builds
:class:`joins.online.CostModel` and ``runtime`` imports nothing above it.
"""

from __future__ import annotations

from typing import Any


def cost_model(calibration: Any, run: dict | None = None):
    """The online engine's cost model from the run's calibration (``calibration.online``);
    the engine's documented uncalibrated defaults when the machine has no online constants.

    Disk costs: a spilled tuple and a probe into spilled state cost what ``make calibrate``
    measured on the spill store (:mod:`joins.online.spill_store`, an on-disk B-tree standing in
    for Squall's BerkeleyDB). When ``run.disk_cost_factor`` is set they cost that many times
    the calibrated in-memory cost of receiving, storing and probing one tuple instead (a stated
    modeling assumption, recorded with the point as ``disk_cost_factor``)."""
    from dataclasses import replace

    from joins.online import CostModel

    online = getattr(calibration, "online", None) or {}
    cost = CostModel.from_dict(online) if online else CostModel()
    factor = (run or {}).get("disk_cost_factor")
    if factor is not None:
        mem = cost.per_received + cost.per_store_received + cost.per_probe
        cost = replace(cost, per_spilled=float(factor) * mem, per_disk_probe=float(factor) * mem)
    elif online and "spill_store" not in online:
        raise ValueError(
            f"calibration {getattr(calibration, 'id', '?')} has no measured spill-store costs: "
            "run `make calibrate ARGS=parts=spill`, or set run.disk_cost_factor")
    return cost
