"""Stopping a session tidies its logs: local-cluster executor logs move out of the PySpark
package, old event logs are pruned (temporary folders, no cluster)."""

from __future__ import annotations

import os
import time

import pytest

import runtime.spark_session as session
from runtime.spark_session import move_worker_logs, prune_event_logs


def _app_dir(work, app="app-20260101000000-0000"):
    for executor in ("0", "1"):
        (work / app / executor).mkdir(parents=True)
        (work / app / executor / "stderr").write_text(f"executor {executor} log")
    return work / app


def test_move_worker_logs(tmp_path):
    app = _app_dir(tmp_path / "pyspark" / "work")
    dest = move_worker_logs(app, tmp_path / "scratch" / "spark-worker")
    assert dest == tmp_path / "scratch" / "spark-worker" / app.name and not app.exists()
    assert (dest / "1" / "stderr").read_text() == "executor 1 log"
    again = move_worker_logs(_app_dir(tmp_path / "pyspark" / "work"), dest.parent)
    assert again != dest and (again / "0" / "stderr").exists() and (dest / "0").exists()
    assert move_worker_logs(tmp_path / "no_such_app", dest.parent) is None


def test_prune_event_logs_keeps_the_newest_and_running_ones(tmp_path):
    now = time.time()
    ages = {"local-1": 50, "local-2": 40, "app-3": 30, "local-4": 20, "local-5": 10,
            "local-6.inprogress": 100, "local-7.inprogress": 3 * 24 * 3600}
    for name, age in ages.items():
        (tmp_path / name).write_text(name)
        os.utime(tmp_path / name, (now - age, now - age))
    deleted = prune_event_logs(tmp_path, keep=3)
    assert sorted(p.name for p in deleted) == ["local-1", "local-2", "local-7.inprogress"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "app-3", "local-4", "local-5", "local-6.inprogress"]
    assert prune_event_logs(tmp_path, keep=3) == []
    assert prune_event_logs(tmp_path / "absent", keep=3) == []


class _FakeContext:
    def __init__(self, master):
        self.applicationId, self.master = "app-20260101000000-0000", master

    def setLogLevel(self, level):
        pass


class _FakeSession:
    def __init__(self, master):
        self.sparkContext = _FakeContext(master)
        self.stopped = False

    def stop(self):
        self.stopped = True


@pytest.mark.parametrize(("master", "moved"), [("local-cluster[2,1,2048]", True),
                                               ("local[2]", False)])
def test_stop_spark_moves_local_cluster_logs_and_prunes(tmp_path, monkeypatch, master, moved):
    work, events = tmp_path / "work", tmp_path / "events"
    app = _app_dir(work)
    events.mkdir()
    for i in range(4):
        (events / f"local-{i}").write_text("")
        os.utime(events / f"local-{i}", (i, i))
    fake = _FakeSession(master)
    monkeypatch.setattr(session, "_session", fake)
    monkeypatch.setattr(session, "spark_work_dir", lambda: work)
    monkeypatch.setattr(session, "WORKER_LOGS", tmp_path / "spark-worker")
    monkeypatch.setattr(session, "EVENT_LOGS", events)
    monkeypatch.setattr(session, "EVENT_LOGS_KEPT", 2)
    session.stop_spark()
    assert fake.stopped and session._session is None
    assert (tmp_path / "spark-worker" / app.name / "0" / "stderr").exists() == moved
    assert app.exists() != moved
    assert sorted(p.name for p in events.iterdir()) == ["local-2", "local-3"]


def test_stop_spark_after_the_users_own_stop_is_quiet(tmp_path, monkeypatch):
    """A user's spark.stop() leaves the context without its JVM handle (pyspark sets _jsc to
    None); the atexit clean-up then must not call into it (it printed a traceback)."""
    fake = _FakeSession("local[2]")
    fake.sparkContext._jsc = None
    fake.sparkContext.setLogLevel = lambda level: (_ for _ in ()).throw(AttributeError("_jsc"))
    monkeypatch.setattr(session, "_session", fake)
    monkeypatch.setattr(session, "EVENT_LOGS", tmp_path / "events")
    session.stop_spark()
    assert session._session is None and not fake.stopped
