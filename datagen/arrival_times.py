"""Arrival times of one timed relation (the DINER paper's streams and trace stand-ins):
exponential gaps, then silent periods.

``pauses`` is a list of [fraction of the relation, length]: every tuple from that fraction on
arrives ``length`` later. ``fragments`` > 0 cuts the relation into that many fragments of
equal size and, after each but the last, pauses for ``fragment_delay`` times the fragment's
own transmission time (the paper's network delays, Figs 16, 17, 19 and Table 3); each relation
keeps its own clock.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from datagen.params import check


def check_delays(pauses: Sequence, fragments: int, fragment_delay: float) -> None:
    check(fragments >= 0 and fragment_delay >= 0, "fragments and fragment_delay must be >= 0")
    for p in pauses:
        check(len(p) == 2 and 0 <= p[0] <= 1 and p[1] >= 0,
              f"a pause is [fraction in 0..1, length >= 0], got {p}")


def arrival_times(n: int, lam: float, rng: np.random.Generator, pauses: Sequence = (),
                  fragments: int = 0, fragment_delay: float = 0.0) -> np.ndarray:
    """``n`` non-decreasing arrival times at rate ``lam`` per time unit, with the pauses."""
    t = np.cumsum(rng.exponential(1.0 / lam, n))
    for frac, length in pauses:
        t[int(frac * n):] += length
    if fragments and n:
        base = t.copy()
        bounds = np.linspace(0, n, fragments + 1).astype(int)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):  # fragment [lo, hi)
            if lo == hi or hi >= n:
                continue  # nothing follows the last fragment
            duration = base[hi - 1] - (base[lo - 1] if lo else 0.0)
            t[hi:] += fragment_delay * duration
    return t
