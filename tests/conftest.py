"""Shared fixtures: one Spark session for the whole test run (local[2,2], small partitions)."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def _no_user_cluster(tmp_path_factory):
    """Tests never see a cluster the user started with ``make cluster-up``: its state folder is
    an empty one of their own (tests/test_standalone_cluster.py starts its own cluster)."""
    from runtime.cluster import DIR_ENV

    os.environ[DIR_ENV] = str(tmp_path_factory.mktemp("no-cluster"))


@pytest.fixture(scope="session")
def spark():
    from runtime.spark_session import get_spark, stop_spark

    # local[2,2]: 2 cores, and a failed task is retried once (local[2] never retries), as a
    # cluster does: tests/online/test_faults.py fails tasks on purpose. One session, since a
    # second one would cost a JVM start (about 25 s here).
    session = get_spark(
        "local[2,2]",
        conf={"spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "4"},
        driver_memory="2g",
    )
    yield session
    stop_spark()


def pytest_sessionfinish(session, exitstatus):
    """A sweep that selects no test (e.g. ``-k`` or ``-m`` matching nothing) is not a failure."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
