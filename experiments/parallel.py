"""Run a sweep's points several at a time, each in a worker process of its own.

Only for kinds that declare their points need one core (``ONE_CORE_KINDS`` in
:mod:`experiments.kinds`): DINER's single-site operators run their whole loop in one Spark task,
so during a point one core works and the other idles (measured: a ``diner/fig19`` sweep's
process tree, JVMs included, used 0.98 of one core over its run). Two such points side by side
on a 2-core machine use that idle core (the gain on idle cores is not measured yet), and every
count stays
what the point gives alone: a worker runs :func:`experiments.run.run_point` unchanged, in its
own process with its own Spark session (the preset's master, recorded as before; the kind pins
its one partition, so nothing it computes depends on the cores), its inputs from the shared
cache (two workers generating the same input keep the first finished,
:func:`datagen.cache.materialize_into`) and one result file per point.

Why a point's ``wall_time_s`` stays that point's own local wall time: it is measured around the
point inside its worker, as in a sequential sweep, and the point beside it runs on the *other*
core (one busy Python worker each), so neither waits for the other's work. That holds only
while the machine has those cores free: on a shared machine whose other work held a core, two
points side by side each waited for a core, their wall times grew 1.2-4x and the sweep took
longer than one at a time (the extra JVM and the workers' start cost about 20 CPU seconds).
So ``jobs=auto`` runs two only where the cores are idle when the sweep starts
(:func:`idle_cores`; :func:`experiments.run.sweep_jobs`), never more than the machine's cores;
``jobs=N`` runs N all the same.

The worker processes are spawned (no fork of a process that may hold a JVM's threads), each
serves points one after another over a pipe and keeps its Spark session between them, as the
sequential runner keeps one per sweep; at the end it stops Spark and exits without interpreter
teardown (:func:`runtime.spark_session.exit_now`'s reasons). A point's status, error and timeout
included, is a result written by the point itself, its wall-clock guard running in its worker;
an exception out of ``run_point`` (an unwritable results folder, a bad series) stops handing
out points, as it stops a sequential sweep; a worker that dies (e.g. killed by the kernel's OOM
killer) leaves its point without a result, is replaced, and makes the run's exit code 1.
"""

from __future__ import annotations

import importlib
import multiprocessing as mp
import os
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from typing import Any

Item = tuple[int, Any]  # (job number, the point's composed config)


def _cpu_jiffies(stat: str = "/proc/stat") -> tuple[int, int, int]:
    """All CPU time so far, the idle part of it, and the number of CPUs (Linux)."""
    with open(stat) as f:
        lines = f.read().splitlines()
    vals = [int(v) for v in lines[0].split()[1:9]]  # user nice system idle iowait irq softirq steal
    cpus = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    return sum(vals), vals[3] + vals[4], cpus


def idle_cores(sample_s: float = 1.0) -> float | None:
    """How many cores the work already on the machine leaves idle, measured over ``sample_s``
    (None where /proc/stat cannot say). Taken before a sweep starts, it is other work's: a
    shared machine whose other core is busy gives a point run beside another no core of its
    own."""
    try:
        total0, idle0, cpus = _cpu_jiffies()
        time.sleep(sample_s)
        total1, idle1, _ = _cpu_jiffies()
    except (OSError, ValueError, IndexError):
        return None
    if total1 <= total0 or cpus < 1:
        return None
    return min(cpus, os.cpu_count() or cpus) * (idle1 - idle0) / (total1 - total0)


def _load(target: str) -> Callable[..., str]:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _serve(conn: Connection, target: str) -> None:
    """A worker: run ``target(cfg, job_num, total)`` for each point received until ``None``."""
    code = 0
    try:
        run = _load(target)
        while (item := conn.recv()) is not None:
            num, cfg, total = item
            try:
                conn.send(("done", num, run(cfg, num, total)))
            except Exception as exc:  # the sequential sweep stops on these too
                traceback.print_exc(limit=6)
                conn.send(("raised", num, f"{type(exc).__name__}: {exc}"))
    except (EOFError, KeyboardInterrupt):  # the parent went away, or Ctrl-C
        code = 1
    finally:
        from runtime.spark_session import exit_now

        exit_now(code)  # stop Spark, flush, exit without teardown: as a sequential sweep


def run_parallel(items: list[Item], total: int, jobs: int,
                 target: str = "experiments.run:run_point") -> int:
    """Run every point of ``items`` with at most ``jobs`` at a time; return the exit code
    (0, or 1 if a point raised or a worker died). Points are handed out in the order given
    (the sweep's order), each to the first worker free."""
    ctx = mp.get_context("spawn")
    todo: deque[Item] = deque(items)
    workers: dict[Connection, list] = {}  # parent end -> [process, job number running or None]
    code, stop = 0, False

    def start() -> Connection:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(child, target), name="sweep-worker")
        proc.start()
        child.close()  # the worker holds the only other end: its death is EOF here
        workers[parent] = [proc, None]
        return parent

    def feed(conn: Connection) -> None:
        """The worker's next point, or None (it exits) when there is none to start."""
        workers[conn][1] = None
        item = todo.popleft() if todo and not stop else None
        try:
            conn.send(None if item is None else (item[0], item[1], total))
        except OSError:  # it died meanwhile (its EOF comes next): the point waits for another
            if item is not None:
                todo.appendleft(item)
            return
        if item is not None:
            workers[conn][1] = item[0]

    if not todo:
        return 0
    try:
        for _ in range(max(1, min(jobs, len(todo)))):
            feed(start())
        while workers:
            for conn in wait(list(workers)):
                proc, running = workers[conn]
                try:
                    kind, num, detail = conn.recv()
                except (EOFError, OSError):  # the worker exited
                    proc.join()
                    del workers[conn]
                    conn.close()
                    if running is not None:
                        code = 1
                        print(f"[{running + 1}/{total}] worker {proc.pid} died (exit code "
                              f"{proc.exitcode}) while running this point: it may have no "
                              "result (the next run of the sweep runs it again)",
                              file=sys.stderr, flush=True)
                    if todo and not stop and len(workers) < jobs:
                        feed(start())
                    continue
                if kind == "raised":
                    code, stop = 1, True
                    print(f"[{num + 1}/{total}] error: {detail}; no further point is started",
                          file=sys.stderr, flush=True)
                feed(conn)
    except KeyboardInterrupt:
        for proc, _ in workers.values():  # they had Ctrl-C too: let them stop Spark
            proc.join(timeout=15)
            if proc.is_alive():
                proc.terminate()
        raise
    return code
