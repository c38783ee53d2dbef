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
                        spark_version="test", spark_master=pc.spark_cfg["master"])


def run_point_scripted(cfg, job_num: int = 0, total: int = 1) -> str:
    """:func:`experiments.run.run_point` with this kind standing in for batch_join: the target
    of a sweep worker process (experiments.parallel), where no monkeypatch reaches."""
    import os

    from experiments import kinds
    from experiments.run import run_point

    kinds.KINDS["batch_join"] = "tests.experiments.fake_kind:run_point"
    if cfg.point.series == "tree_join":  # a worker dying mid-point (the OOM killer, say)
        os._exit(3)
    return run_point(cfg, job_num, total)
