"""A sweep survives a JVM that died mid-point: the next point gets a fresh JVM, not the dead one.

Runs in a child process so the killed JVM is never the test run's shared session.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from runtime.paths import ROOT

_SCRIPT = textwrap.dedent("""
    from pyspark import SparkContext
    from runtime.spark_session import get_spark, reset_if_broken, stop_spark

    spark = get_spark(master="local[1]", driver_memory="1g")
    assert spark.range(5).count() == 5
    SparkContext._gateway.proc.kill()
    SparkContext._gateway.proc.wait()
    try:
        spark.range(5).count()
        raise SystemExit("the killed JVM still answered")
    except Exception:
        pass
    assert reset_if_broken(), "a dead JVM was not noticed"
    assert get_spark(master="local[1]", driver_memory="1g").range(7).count() == 7
    stop_spark()
    print("RECOVERED")
""")


def _recovers(script: str) -> None:
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, text=True,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "RECOVERED" in proc.stdout


@pytest.mark.slow
def test_new_session_after_the_jvm_died():
    _recovers(_SCRIPT)


_STALE = textwrap.dedent("""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession
    import runtime.spark_session as session
    from runtime.spark_session import get_spark, stop_spark

    spark = get_spark(master="local[1]", driver_memory="1g")
    first = SparkContext._gateway.proc
    # Python forgets the context while the JVM keeps it registered, as after a Java
    # OutOfMemoryError stopped it from a task thread: the JVM refuses a second context
    session._session = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    again = get_spark(master="local[1]", driver_memory="1g")
    assert again.range(7).count() == 7
    assert first.poll() is not None, "the refusing JVM was left running"
    stop_spark()
    print("RECOVERED")
""")


@pytest.mark.slow
def test_new_session_when_the_jvm_still_holds_a_stopped_context():
    _recovers(_STALE)
