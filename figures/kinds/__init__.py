"""Plot kinds: ``draw(figure_config, results) -> matplotlib Figure``; one module each."""

from __future__ import annotations

import importlib

KINDS = {
    "lines": "figures.kinds.lines:draw",
    "bars": "figures.kinds.bars:draw",
    "timeseries": "figures.kinds.timeseries:draw",
    "table": "figures.kinds.table:draw",
    "speedup": "figures.kinds.speedup:draw",
    "box": "figures.kinds.box:draw",
}


def load(name: str):
    if name not in KINDS:
        raise KeyError(f"unknown plot kind {name!r}; valid: {', '.join(sorted(KINDS))}")
    module, _, attr = KINDS[name].partition(":")
    return getattr(importlib.import_module(module), attr)
