"""A stand-in experiment kind for runner tests: no Spark, scripted outcomes, counted calls."""

from __future__ import annotations

from experiments.kinds import PointContext, PointOutcome

CALLS: list[tuple[str, object]] = []


def run_point(pc: PointContext) -> PointOutcome:
    CALLS.append((pc.series, pc.x))
    if pc.series == "spark3_join":
        raise RuntimeError("scripted crash")
    if pc.series == "broadcast_join":
        return PointOutcome(status="oom", error="scripted budget", metrics={"memory_needed_bytes": (9.0, "bytes")})
    return PointOutcome(status="ok", metrics={"modeled_time": (float(pc.x) + 1.0, "modeled s")},
                        spark_version="test", spark_master="none")
