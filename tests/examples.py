"""How many examples a property test draws: its CI count times ``PROPERTY_EXAMPLES_SCALE``.

CI keeps the counts small (one Spark session, two cores); a bug hunt runs the same tests with,
e.g., ``PROPERTY_EXAMPLES_SCALE=20 make test`` (also ``HYPOTHESIS_SEED`` to vary the draw).
"""

from __future__ import annotations

import os


def examples(ci_count: int) -> int:
    raw = os.environ.get("PROPERTY_EXAMPLES_SCALE", "1")
    try:
        scale = float(raw)
    except ValueError as exc:
        raise ValueError(f"PROPERTY_EXAMPLES_SCALE must be a number, got {raw!r}") from exc
    return max(1, round(ci_count * scale))
