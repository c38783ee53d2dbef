"""The one place that creates Spark sessions.

Presets come from ``conf/spark/*.yaml``. ``local`` embeds Spark in this process;
``local_cluster`` starts real separate executor JVMs on this machine; ``standalone``, ``yarn``
and ``k8s`` read the master URL from an environment variable (``standalone``, with it unset, uses
the cluster ``make cluster-up`` started: :mod:`runtime.cluster`). Every session writes an
uncompressed, non-rolling event log that :mod:`runtime.spark_metrics` reads for per-task
metrics while the session runs; stopping a session keeps only the newest logs and moves a
local cluster's executor logs out of the PySpark package into ``scratch/spark-worker/``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from runtime import cluster
from runtime.paths import CONF, ROOT, SCRATCH, SPARK_EVENTS
from runtime.shipping import project_zip, ships_code

_session = None
_session_key: tuple | None = None
_python_set: str | None = None  # the $PYSPARK_PYTHON get_spark chose (not the user's)

EVENT_LOGS = SPARK_EVENTS
WORKER_LOGS = SCRATCH / "spark-worker"
# Event logs are read only while their session runs (runtime.spark_metrics); afterwards
# they serve a post-mortem of recent runs (e.g. in Spark's history server). One sweep or test
# run makes one to a few sessions, so the newest 30 cover the last `make reproduce` and
# `make test` (measured here: 46 logs took 209 MB, most under 1 MB, the largest 93 MB, a
# squall sweep's); never pruned, they had grown to 8.9 GB.
EVENT_LOGS_KEPT = 30
# An ".inprogress" log is a running session's (never pruned) or a killed process's: one left
# untouched this long (a live session writes an event per task) is the latter.
STALE_INPROGRESS_S = 2 * 24 * 3600


class SparkConfigError(ValueError):
    pass


def spark_presets(local_only: bool = False) -> list[str]:
    """The Spark presets (conf/spark/); ``local_only``: those that need no master URL."""
    from omegaconf import OmegaConf

    files = sorted((CONF / "spark").glob("*.yaml"))
    return [f.stem for f in files
            if not (local_only and OmegaConf.load(f).get("master_env"))]


def spark_preset(name: str) -> dict[str, Any]:
    """A ``conf/spark/<name>.yaml`` preset as :func:`get_spark`'s keywords, for the entry points
    that are not Hydra runs (the join and datagen CLIs, calibration). A cluster preset's master
    URL is read from its variable here, so an unset one fails before any work starts."""
    from omegaconf import OmegaConf

    if name not in spark_presets():
        raise SparkConfigError(f"unknown Spark preset {name!r}; valid: "
                               f"{', '.join(spark_presets())}")
    cfg = OmegaConf.load(CONF / "spark" / f"{name}.yaml")
    return {"master": resolve_master(cfg.master, cfg.get("master_env")), "master_env": None,
            "conf": dict(cfg.get("conf") or {}), "driver_memory": cfg.driver_memory}


# a preset's ``master`` when, with its variable unset, the cluster ``make cluster-up`` started on
# this machine serves (conf/spark/standalone.yaml)
FROM_CLUSTER_UP = "cluster-up"


def resolve_master(master: str, master_env: str | None) -> str:
    if master_env:
        url = os.environ.get(master_env)
        if url:
            return url
        if master == FROM_CLUSTER_UP:
            url = cluster.running_master_url()
            if url:
                return url
            raise SparkConfigError(
                f"this Spark preset reads its master URL from ${master_env}, which is not set, "
                "and no cluster is up (make cluster-up starts one on this machine)")
        raise SparkConfigError(
            f"this Spark preset reads its master URL from ${master_env}, which is not set"
        )
    return master


def _base_conf(event_dir: Path, driver_memory: str) -> dict[str, str]:
    log4j = f"-Dlog4j2.configurationFile=file:{CONF / 'log4j2.properties'}"
    return {
        "spark.driver.memory": driver_memory,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": f"file://{event_dir}",
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.python.unix.domain.socket.enabled": "true",
        "spark.sql.shuffle.partitions": "8",
        "spark.default.parallelism": "8",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.warehouse.dir": str(SCRATCH / "spark-warehouse"),
    }


def get_spark(
    master: str = "local[2]",
    master_env: str | None = None,
    conf: Mapping[str, Any] | None = None,
    driver_memory: str = "4g",
    app_name: str = "skewjoins",
):
    """Return the process-wide session, creating it (or replacing one with another master)."""
    global _session, _session_key
    global _python_set
    url = resolve_master(master, master_env)
    extra = {k: str(v) for k, v in (conf or {}).items()}
    # on the cluster `make cluster-up` started: executors sized to its workers, its node Python
    fitted = cluster.fit_session(url, extra) if url.startswith("spark://") else None
    if fitted:
        extra.update(fitted["conf"])
    key = (url, tuple(sorted(extra.items())), driver_memory)
    if _session is not None and _session_key == key:
        return _session
    stop_spark()

    event_dir = EVENT_LOGS
    event_dir.mkdir(parents=True, exist_ok=True)
    (SCRATCH / "spark-local").mkdir(parents=True, exist_ok=True)
    # Python workers (also on local-cluster executors) import the project's own packages.
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), *paths])
    os.environ.setdefault("SPARK_LOCAL_DIRS", str(SCRATCH / "spark-local"))
    # the executors' Python: the user's $PYSPARK_PYTHON, else this one (the node Python on the
    # cluster `make cluster-up` started, which sees the project only through the shipped zip)
    if os.environ.get("PYSPARK_PYTHON") in (None, _python_set):
        _python_set = fitted["python"] if fitted else sys.executable
        os.environ["PYSPARK_PYTHON"] = _python_set
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(url).appName(app_name)
    settings = _base_conf(event_dir, driver_memory)
    settings.update(extra)
    for k, v in settings.items():
        builder = builder.config(k, v)
    try:
        _session = builder.getOrCreate()
    except Exception as exc:
        if "Only one SparkContext" not in str(exc):
            raise
        # A context that an error stopped from a task thread (a Java OutOfMemoryError does) can
        # stay registered in the JVM, which then refuses every new one: start a fresh JVM.
        _forget_jvm(kill=True)
        _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    if ships_code(url):
        _session.sparkContext.addPyFile(str(project_zip()))
    _session_key = key
    return _session


def exit_now(code: int) -> None:
    """Stop Spark, flush, and exit without interpreter teardown: native thread pools (seen:
    "terminate called without an active exception", SIGABRT) must not turn a finished run into
    a crash. Exits even if Spark will not stop cleanly. (A sweep's end, and each of its
    parallel workers', experiments.run and experiments.parallel.)"""
    import logging

    try:
        stop_spark()
    finally:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def stop_spark() -> None:
    """Stop the session quietly (local-cluster logs harmless errors while executors exit), then
    tidy its logs: a local cluster's executor logs move to ``scratch/spark-worker/<app id>``
    and old event logs are pruned."""
    global _session, _session_key
    if _session is None:
        return
    app = master = ""
    with contextlib.suppress(Exception):  # a dead JVM cannot say
        app, master = _session.sparkContext.applicationId, _session.sparkContext.master
    try:
        if getattr(_session.sparkContext, "_jsc", True) is not None:  # None after the user's stop()
            _session.sparkContext.setLogLevel("OFF")
            _session.stop()
    finally:
        _session = None
        _session_key = None
        if app and master.startswith("local-cluster"):
            with contextlib.suppress(OSError):  # housekeeping never fails a sweep
                move_worker_logs(spark_work_dir() / app, WORKER_LOGS)
        with contextlib.suppress(OSError):
            prune_event_logs(EVENT_LOGS, EVENT_LOGS_KEPT)


def spark_work_dir() -> Path:
    """Where local-cluster workers put executor logs: ``$SPARK_HOME/work``, i.e. inside the
    PySpark package. Spark passes no work directory to local-cluster workers, so neither
    SPARK_WORKER_DIR nor any setting moves it; :func:`stop_spark` moves each app's folder."""
    from pyspark.find_spark_home import _find_spark_home

    return Path(os.environ.get("SPARK_HOME") or _find_spark_home()) / "work"


def move_worker_logs(app_dir: Path, dest_root: Path) -> Path | None:
    """Move one app's executor-log folder under ``dest_root``; its new path (None if absent)."""
    if not app_dir.is_dir():
        return None
    dest_root.mkdir(parents=True, exist_ok=True)
    dest = dest_root / app_dir.name
    if dest.exists():  # app ids are unique per master start; keep both if one repeats
        dest = dest_root / f"{app_dir.name}-{uuid.uuid4().hex[:8]}"
    shutil.move(str(app_dir), str(dest))
    return dest


def prune_event_logs(folder: Path, keep: int, stale_s: float = STALE_INPROGRESS_S) -> list[Path]:
    """Delete all but the ``keep`` newest finished event logs, and in-progress logs untouched for
    ``stale_s`` (left by killed processes); running sessions' logs stay. Returns the deleted."""
    if not folder.is_dir():
        return []
    now, deleted, logs = time.time(), [], []
    for path in folder.iterdir():
        with contextlib.suppress(FileNotFoundError):  # another process pruned it first
            if path.is_file():
                logs.append((path.stat().st_mtime, path))
    finished = sorted((lg for lg in logs if not lg[1].name.endswith(".inprogress")), reverse=True)
    stale = [lg for lg in logs if lg[1].name.endswith(".inprogress") and now - lg[0] > stale_s]
    for _, path in finished[keep:] + stale:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            deleted.append(path)
    return deleted


def reset_if_broken() -> bool:
    """Forget the session if its context is stopped or unreachable; True if it was reset."""
    global _session, _session_key
    if _session is None:
        return False
    try:
        if not _session.sparkContext._jsc.sc().isStopped():
            return False
    except Exception:  # the context was stopped (no _jsc) or the JVM is gone
        pass
    with contextlib.suppress(Exception):  # a dead JVM may not even stop cleanly
        stop_spark()
    _session, _session_key = None, None
    if not _jvm_alive():
        _forget_jvm(kill=False)
    return True


def _forget_jvm(kill: bool) -> None:
    """Make the next session launch a new JVM. PySpark keeps the gateway of the first JVM in
    class attributes and would hand a dead one to every later session ("Connection refused");
    ``kill`` also ends a live JVM that can no longer make a context."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    gateway = SparkContext._gateway
    if kill and gateway is not None:
        with contextlib.suppress(Exception):
            gateway.shutdown()
        proc = getattr(gateway, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.kill()
            with contextlib.suppress(Exception):
                proc.wait(timeout=60)
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def _jvm_alive() -> bool:
    """True while the JVM PySpark launched still answers (its gateway outlives stopped contexts)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return True  # nothing cached, nothing to forget
    proc = getattr(gateway, "proc", None)
    if proc is not None and proc.poll() is not None:
        return False
    try:
        gateway.jvm.java.lang.System.nanoTime()
    except Exception:
        return False
    return True


def event_log_path(spark) -> Path:
    """The in-progress event log file of this session."""
    sc = spark.sparkContext
    base = Path(sc.getConf().get("spark.eventLog.dir").removeprefix("file://"))
    app = sc.applicationId
    for candidate in (base / f"{app}.inprogress", base / app):
        if candidate.exists():
            return candidate
    raise FileNotFoundError(f"no event log for {app} in {base}")


atexit.register(stop_spark)
