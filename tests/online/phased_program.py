"""A worker program that names a phase of its own (what DINER does with ``arriving`` and
``reactive``): MJoin whose outputs from the third tick on are labelled ``late``. It is plugged
in without touching the engine (the test swaps :func:`joins.online.programs.load`)."""

from __future__ import annotations

from joins.online.programs.mjoin import MJoin


class _Labelled:
    """The output collector with a phase on every add."""

    def __init__(self, out, phase: str) -> None:
        self.out, self.phase = out, phase

    def add(self, n, *tids, phase=None) -> None:
        self.out.add(n, *tids, phase=phase or self.phase)


class LatePhaseMJoin(MJoin):
    name = "late_phase_mjoin"

    def deliver(self, ws, d, ctx, c, out):
        super().deliver(ws, d, ctx, c, _Labelled(out, "late") if ctx.batch >= 2 else out)
