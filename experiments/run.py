"""Run a figure's sweep: ``python -m experiments.run figure=<paper>/<fig> [scale=..] [spark=..]``.

Each point of the sweep (a series and an x value from the figure config) is one Hydra multirun
job. Without ``-m`` the runner adds it, together with the figure's series and x values for any
dimension the user did not give, so ``point.x=0,0.5`` or ``point.series=hash_join`` narrow
the sweep as Hydra users expect. Finished points are skipped (``force=true`` redoes them); a
failing point is recorded with its status and the sweep goes on.

``jobs`` (default ``auto``): the points of a kind that keeps one core busy (``ONE_CORE_KINDS``)
run two at a time where the machine has two cores that other work leaves idle (checked as the
sweep starts: :func:`sweep_jobs`), each in a worker process of its own
(:mod:`experiments.parallel`); ``jobs=1`` runs them one after another, as every other kind runs.
Hydra then only lists the sweep's points (the same overrides, the same order, the same job
numbers) and the workers run them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, read_write

from experiments import schema  # noqa: F401  (registers the structured configs)
from experiments.config import compose, figure_of
from experiments.figure_spec import (
    config_hash,
    series_runs_at,
    series_x_values,
    x_label,
    x_numeric,
    x_values,
)
from experiments.figures import figure_ids, load_figure, runs_of_mismatch
from experiments.kinds import (
    ALGORITHM_KINDS,
    ONE_CORE_KINDS,
    X_MAJOR_KINDS,
    PointContext,
    PointOutcome,
    WallClockTimeout,
    load_kind,
    series_algorithm,
)
from experiments.results import (
    Point,
    ResultsError,
    ensure_writable,
    finished,
    results_dir,
    write_point,
)
from joins import registry
from runtime.cost_model import load_calibration
from runtime.paths import CONF, ROOT
from runtime.spark_session import SparkConfigError, resolve_master, spark_presets

_TOTAL_ENV = "SKEWJOINS_SWEEP_TOTAL"
# the sweep's points, (job number, config), while Hydra lists them for the worker processes;
# None: Hydra's jobs run the points themselves, one after another
_listed: list[tuple[int, DictConfig]] | None = None


class UsageError(ValueError):
    pass


OUTPUT_PATHSPECS = (":(exclude,glob)figures/**/*.png", ":(exclude,glob)figures/**/*.pdf",
                    ":(exclude)REPORT.md")


def git_commit() -> str:
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                             capture_output=True, check=True).stdout.strip()
        # a sweep's own output (results/, the charts redrawn between figures) does not make
        # the code dirty
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":(exclude)results", *OUTPUT_PATHSPECS],
                               cwd=ROOT, text=True, capture_output=True).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _results_root(cfg: DictConfig) -> str:
    return cfg.results_root or cfg.scale.results_root


def _provenance(cfg: DictConfig, figure: dict, point: Point, chash: str, outcome: PointOutcome,
                start: datetime, wall: float, calibration_id: str, commit: str) -> dict[str, Any]:
    return {
        "figure": figure["id"], "series": point.series, "x": point.x, "x_label": point.x_label,
        "status": outcome.status, "config_hash": chash, "point_id": point.point_id,
        "seed": int(cfg.seed), "scale": cfg.scale.name, "spark_version": outcome.spark_version,
        "spark_master": outcome.spark_master, "calibration_id": calibration_id,
        "git_commit": commit, "start_time": start.isoformat(timespec="seconds"),
        "wall_time_s": wall, "error": outcome.error,
    }


def require_figure(figure_id: str) -> None:
    if figure_id not in figure_ids():
        raise UsageError(f"unknown figure {figure_id!r}; valid: {', '.join(figure_ids())}")


def require_series(figure: dict, series: str) -> None:
    if series not in figure["series"]:
        raise UsageError(f"unknown series {series!r} for {figure['id']}; valid: "
                         f"{', '.join(figure['series'])}")


def point_context(cfg: DictConfig, figure: dict, series: str, x: Any) -> PointContext:
    """What a kind needs to run one point of ``figure`` under the composed config ``cfg``."""
    spark_cfg = {"master": cfg.spark.master, "master_env": cfg.spark.master_env,
                 "driver_memory": cfg.spark.driver_memory, "conf": dict(cfg.spark.conf)}
    return PointContext(figure=figure, series=series, x=x, scale=cfg.scale.name,
                        seed=int(cfg.seed), spark_cfg=spark_cfg, calibration=load_calibration(),
                        progress=cfg.progress, wall_limit_s=cfg.scale.point_wall_limit_s)


def _point_of(cfg: DictConfig, job_num: int, total: int) -> tuple[dict, Point, Any, str, str]:
    """The point ``cfg`` names: its figure, Point, results folder, config hash and the tag of
    its progress lines."""
    figure = figure_of(cfg)
    series, x = cfg.point.series, cfg.point.x
    require_series(figure, series)
    point = Point(figure["id"], series, x_numeric(figure, x), x_label(x), int(cfg.seed))
    folder = results_dir(_results_root(cfg), figure["id"])
    ensure_writable(folder)
    chash = config_hash(figure, cfg.scale.name, int(cfg.seed), series)
    tag = f"[{job_num + 1}/{total}] {figure['id']} {series} {figure['x'].get('name', 'x')}={point.x_label}"
    return figure, point, folder, chash, tag


def skip_finished(cfg: DictConfig, job_num: int = 0, total: int = 1) -> bool:
    """True (and its line printed) if the point is done already and is not to be redone, or is
    not one its series runs (a series that names its own ``x_values``)."""
    figure, *rest = _point_of(cfg, job_num, total)
    return _done(cfg, figure, *rest)


def _done(cfg: DictConfig, figure: dict, point: Point, folder: Any, chash: str, tag: str) -> bool:
    if not series_runs_at(figure, point.series, point.x, cfg.scale.name):
        xs = series_x_values(figure, point.series, cfg.scale.name)
        print(f"{tag}: not run, the series runs at {', '.join(map(x_label, xs))} only "
              f"(its x_values)", flush=True)
        return True
    if not cfg.force and finished(folder, point, chash):
        print(f"{tag}: done already (force=true redoes it)", flush=True)
        return True
    return False


def run_point(cfg: DictConfig, job_num: int = 0, total: int = 1) -> str:
    """Run (or skip) one point and write its rows; return its status."""
    figure, point, folder, chash, tag = _point_of(cfg, job_num, total)
    if _done(cfg, figure, point, folder, chash, tag):
        return "skipped"
    series, x = cfg.point.series, cfg.point.x
    if cfg.reuse and (status := _reuse(cfg, figure, point, folder, chash, tag)):
        return status
    ctx = point_context(cfg, figure, series, x)
    calibration = ctx.calibration
    start, t0 = datetime.now(UTC), time.perf_counter()
    print(f"{tag}: running", flush=True)
    try:
        outcome = load_kind(figure["kind"])(ctx)
    except WallClockTimeout as exc:  # a result: the point did not finish in time
        outcome = PointOutcome(status="timeout", error=str(exc))
    except Exception as exc:  # the point is a result (status=error); the sweep goes on
        traceback.print_exc(limit=6)
        outcome = PointOutcome(status="error", error=_error_text(exc))
        # A failure may leave Spark unusable (e.g. the JVM ran out of heap and stopped the
        # context): the next point then starts a fresh session instead of failing on it.
        from runtime.spark_session import reset_if_broken

        reset_if_broken()
    wall = time.perf_counter() - t0
    base = _provenance(cfg, figure, point, chash, outcome, start, wall, calibration.id,
                       git_commit())
    rows = [{**base, "metric": name, "value": value, "unit": unit}
            for name, (value, unit) in outcome.metrics.items()]
    rows += [{**base, **r} for r in outcome.series_rows]
    if not rows:
        rows = [{**base, "metric": "status", "value": float("nan"), "unit": ""}]
    write_point(folder, point, rows)
    detail = f" ({outcome.error})" if outcome.error else ""
    print(f"{tag}: {outcome.status} in {wall:.1f}s{detail}", flush=True)
    return outcome.status


def _reuse(cfg: DictConfig, figure: dict, point: Point, folder: Any, chash: str,
           tag: str) -> str | None:
    """Copy the point from another figure's finished point with the same settings, if there
    is one (experiments.point_cache); its status, or None to run the point."""
    from experiments.point_cache import copied_rows, point_key, reusable

    scale = cfg.scale.name
    key = point_key(figure, point.series, cfg.point.x, scale, point.seed)
    made_on = {"spark_master": cfg.spark.master, "calibration_id": load_calibration().id}
    source = reusable(_results_root(cfg), figure, point, key, scale, made_on,
                      same_commit=git_commit() if cfg.force else None)
    if source is None:
        return None
    mine = {"figure": figure["id"], "series": point.series, "x": point.x,
            "x_label": point.x_label, "config_hash": chash, "point_id": point.point_id}
    rows = copied_rows(source, mine)
    write_point(folder, point, rows)
    status = str(rows[0]["status"])
    print(f"{tag}: {status}, copied from {source} (the same settings; not run again)",
          flush=True)
    return status


@hydra.main(config_path=str(CONF), config_name="config", version_base="1.3")
def _task(cfg: DictConfig) -> str:
    hc = HydraConfig.get()
    job_num = hc.job.num if hc.mode.name == "MULTIRUN" else 0
    total = int(os.environ.get(_TOTAL_ENV, "1"))
    if _listed is not None:  # run later, several at a time (main)
        _listed.append((job_num, cfg))
        return "listed"
    return run_point(cfg, job_num, total)


def sweep_jobs(setting: Any, kind: str, points: int = 2, cpus: int | None = None,
               idle: Callable[[], float | None] | None = None) -> tuple[int, str]:
    """How many of a sweep's ``points`` of ``kind`` run at once under ``jobs=<setting>``, and
    why not more where that needs saying. One for every kind but those whose points keep one
    core busy (``ONE_CORE_KINDS``; the others' points use every core); for these a number is
    taken as given and ``auto`` is two, never more than the machine's cores: each point needs
    a core of its own, which keeps its wall time its own (:mod:`experiments.parallel`). So
    ``auto`` also measures, for a second, the cores the machine's other work leaves idle
    (``idle``, default :func:`experiments.parallel.idle_cores`) and runs no more points than
    that at once."""
    text = str(setting).strip().lower()
    if text == "auto":
        want = 2
    elif text.isdigit() and int(text) >= 1:
        want = int(text)
    else:
        raise UsageError(f"jobs must be auto or a number >= 1, got {setting!r}")
    if want == 1 or points <= 1:
        return 1, ""
    if kind not in ONE_CORE_KINDS:
        return 1, "" if text == "auto" else f"{kind} points use every core"
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    if cpus < want:
        return max(1, cpus), f"this machine has {cpus} core{'s' if cpus > 1 else ''}"
    if text == "auto":
        from experiments.parallel import idle_cores

        free = (idle or idle_cores)()
        if free is not None and free < want - 0.25:  # other work holds a core, or most of one
            return max(1, int(free + 0.25)), (
                f"other work keeps the cores busy ({free:.1f} of {cpus} idle), and points side "
                f"by side would wait for a core (jobs={want} runs them so all the same)")
    return want, ""


def _sweep_values(override: Override) -> list[str]:
    """The values one override takes in the sweep (a glob's count is not known here: one)."""
    if not override.is_sweep_override():
        return [str(override.value())]
    try:
        return list(override.sweep_string_iterator())
    except Exception:  # glob() needs Hydra's config loader
        return [override.input_line]


def sweep_overrides(argv: list[str]) -> tuple[list[str], int]:
    """Add the figure's series and x values for the dimensions the user did not pin, check the
    sweep before any point runs, and count its points."""
    added, total, _, _ = sweep_plan(argv)
    return added, total


def sweep_plan(argv: list[str]) -> tuple[list[str], int, str, int]:
    """:func:`sweep_overrides`, the figure's kind and how many points run at once
    (:func:`sweep_jobs`)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = [a for a in argv if not a.startswith("-")]
    parsed = OverridesParser.create().parse_overrides(overrides)  # malformed overrides fail here
    given = {o.key_or_group: o for o in parsed if "=" in o.input_line}
    fig = given.get("figure")
    if fig is not None and fig.is_sweep_override():
        raise UsageError("run one figure at a time (make reproduce-<paper> runs several)")
    if fig is not None:
        require_figure(str(fig.value()))
    if "jobs" in given and given["jobs"].is_sweep_override():
        raise UsageError("jobs takes one value (how many points run at once)")
    plain_overrides = [o.input_line for o in parsed if not o.is_sweep_override()
                       and not o.key_or_group.startswith(("point.", "hydra."))]
    cfg = compose(plain_overrides)
    figure = figure_of(cfg)
    added: list[str] = []
    if "point.series" in given:
        series = _sweep_values(given["point.series"])
    else:
        series = list(figure["series"])
        added.append(f"point.series={','.join(series)}")
    total = len(series)
    if "point.x" not in given:
        values = x_values(figure, cfg.scale.name)
        if not values:
            raise UsageError(f"{figure['id']} declares no x values for scale {cfg.scale.name}")
        added.append(f"point.x={','.join(_quote(v) for v in values)}")
        total *= len(values)
    check_sweep(cfg, figure, series)
    for key, override in given.items():  # every other swept dimension (point.x, seed, ...)
        if key != "point.series":
            total *= len(_sweep_values(override))
    jobs, why = sweep_jobs(cfg.jobs, figure["kind"], total)
    if why:
        print(f"jobs={cfg.jobs}: {why}; running {jobs} point{'s' if jobs > 1 else ''} at a time",
              flush=True)
    return added, total, figure["kind"], jobs


def x_major(args: list[str]) -> list[str]:
    """The x override moved before the series override: Hydra sweeps the product in the order
    of the overrides, so each x's series then run one after another and share its inputs."""
    xs = [a for a in args if a.startswith("point.x=")]
    rest = [a for a in args if not a.startswith("point.x=")]
    at = next((i for i, a in enumerate(rest) if a.startswith("point.series=")), len(rest))
    return [*rest[:at], *xs, *rest[at:]]


def redirect_runs_of(argv: list[str]) -> list[str]:
    """A figure that draws another figure's runs (``runs_of``) runs that figure's points, once,
    into that figure's results; its settings must make the same points."""
    given = [a for a in argv if a.startswith("figure=")]
    if len(given) != 1 or "," in given[0]:
        return argv
    fid = given[0].split("=", 1)[1]
    require_figure(fid)
    scale = next((a.split("=", 1)[1] for a in argv if a.startswith("scale=")), "small")
    figure = load_figure(fid, scale)
    if not figure.get("runs_of"):
        return argv
    why = runs_of_mismatch(figure, scale)
    if why:
        raise UsageError(f"{fid} draws the runs of {figure['runs_of']}, but {why}")
    print(f"{fid} draws the runs of {figure['runs_of']}: running its points "
          f"(finished ones are skipped)", flush=True)
    return [f"figure={figure['runs_of']}" if a == given[0] else a for a in argv]


def check_sweep(cfg: DictConfig, figure: dict, series: list[str]) -> None:
    """Bad input found before any Spark session starts or data is generated: unknown series,
    a series whose algorithm is not registered, a cluster preset without its master URL, an
    unwritable results folder."""
    for name in series:
        require_series(figure, name)
        require_algorithm(figure, name)
        try:
            series_x_values(figure, name, cfg.scale.name)
        except (ValueError, KeyError) as exc:
            raise UsageError(str(exc).strip("'\"")) from None
    try:
        resolve_master(cfg.spark.master, cfg.spark.master_env)
    except SparkConfigError as exc:
        raise UsageError(f"spark={cfg.spark.name}: {exc}; export it or choose a preset that "
                         f"needs none (valid: {', '.join(spark_presets(local_only=True))})"
                         ) from None
    folder = results_dir(_results_root(cfg), figure["id"])
    try:
        ensure_writable(folder)
    except ResultsError as exc:
        raise UsageError(f"{exc}; choose another with results_root=<folder>") from None


def require_algorithm(figure: dict, series: str) -> None:
    registry_kind = ALGORITHM_KINDS.get(figure["kind"])
    if registry_kind is None:
        return
    try:
        registry.get(series_algorithm(figure, series), registry_kind)
    except registry.UnknownAlgorithm as exc:
        raise UsageError(f"series {series!r} of {figure['id']}: {exc}") from None


def _quote(v: Any) -> str:
    s = str(v)
    return f"'{s}'" if isinstance(v, str) and not s.replace(".", "").isdigit() else s


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("--help", "-h", "--cfg", "-c", "--info", "-i") for a in argv):
        sys.argv = [sys.argv[0], *argv]
        _task()
        return
    try:
        argv = redirect_runs_of(argv)
        added, total, kind, jobs = sweep_plan(argv)
    except Exception as exc:  # bad figure/scale/spark name or malformed override
        print(f"error: {_first_line(exc)}", file=sys.stderr)
        raise SystemExit(2) from None
    if not any(a in ("-m", "--multirun") for a in argv):
        argv = ["--multirun", *argv]
    os.environ[_TOTAL_ENV] = str(total)
    args = [*argv, *added]
    sys.argv = [sys.argv[0], *(x_major(args) if kind in X_MAJOR_KINDS else args)]
    global _listed
    _listed = [] if jobs > 1 else None
    code = 0
    try:
        _task()
    except SystemExit as exc:  # Hydra reports a failed job this way
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    if _listed is not None and code == 0:
        try:
            code = run_listed(_listed, total, jobs)
        except Exception as exc:  # e.g. the results folder became unwritable
            print(f"error: {_first_line(exc)}", file=sys.stderr)
            code = 1
    from runtime.spark_session import exit_now

    exit_now(code)  # stop Spark and exit without interpreter teardown


def run_listed(listed: list[tuple[int, DictConfig]], total: int, jobs: int) -> int:
    """Run the points Hydra listed, ``jobs`` at a time (:mod:`experiments.parallel`); the
    finished ones are skipped here first, so only points that run take a worker. Side by side
    the points draw no progress bars (two bars would overwrite each other's line): their
    "[k/N] ... running" and "... ok in" lines, each naming its point, are the progress."""
    from experiments.parallel import run_parallel

    todo = [(num, cfg) for num, cfg in listed if not skip_finished(cfg, num, total)]
    if len(todo) > 1:
        print(f"running {len(todo)} points {min(jobs, len(todo))} at a time, each in a process "
              f"of its own (jobs=1: one after another)", flush=True)
        for _, cfg in todo:
            with read_write(cfg):
                cfg.progress = False
    return run_parallel(todo, total, jobs) if todo else 0



def _error_text(exc: BaseException) -> str:
    """The exception and, for Spark errors, the JVM's root cause (e.g. OutOfMemoryError)."""
    text = f"{type(exc).__name__}: {exc}"
    causes = [line.strip() for line in text.splitlines() if line.strip().startswith("Caused by")]
    head = text.splitlines()[0] if text else type(exc).__name__
    return (head + (f" [{causes[-1]}]" if causes else ""))[:2000]


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip() or type(exc).__name__).split("Config search path")[0]
    return " ".join(text.split())


if __name__ == "__main__":
    main()
