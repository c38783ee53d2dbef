"""The online engine's n-way and windowed runs against Spark SQL's batch join (issue 17).

    python -m benchmarks.bench_online_nway [n=1000000] [repeat=2] [batch_size=100000] ...

On one local Spark session (``cores`` task slots; partitions = cores), for inputs of ``n``
tuples each, written once as Parquet and read by both sides:

* ``mjoin``: a 3-input MJoin on a shared key (hash-partitioned, ``joiners`` = 2 and 4),
  uniform keys over round(n / sqrt 2) values, so the output is about 2n rows (n^3 / D^2),
  micro-batches of ``batch_size`` tuples; against ``A.join(B, k).join(C, k).count()``.
* ``window``: a two-input windowed join (``window_ops``, default ``shj``) with an integer
  event time uniform over [0, n) (sorted by the engine: arrivals in time order), window
  W = n / 20 and D = W keys, so each tuple has about 2 partners (output about 2n rows), cut
  into ``ticks`` event-time ticks (empty ones included; a static operator lets ticks share a
  Spark step up to ``batch_size`` tuples); against ``R.join(S, k equal and |tR - tS| <= W)
  .count()``. The batch join meets every same-key pair (n^2 / D = 20n candidates) and keeps
  about a tenth; the online run stores only the window.

The online run's wall time is measured around the whole ``run_stream`` call (Parquet read,
arrival order, the micro-batches, the result summary); the engine's own ``local_wall_time``
(the driver loop only) is shown beside it. The ratio is online / batch, each the best
(minimum) of ``repeat`` alternating runs (the machine is shared), with every time recorded,
plus the CPU seconds of the whole process tree (driver, JVM, Python workers), which other
jobs disturb less than wall time. Every run's online output count must equal the batch
join's (exactness; a mismatch fails the benchmark). Goal (issue 17): online within 3x.

``fixed_cost=true`` also measures the fixed cost per micro-batch at J = 16 as
:mod:`benchmarks.bench_engine` does (static_mid, 5000-tuple micro-batches of 100K tuples),
here on this benchmark's uniform two-input data.

``profile=true`` measures nothing against the batch join: it runs one online run per workload
(the largest of ``joiners``, every ``window_ops``) with the driver under cProfile and the
Python workers under Spark's profiler, and prints where the time goes (reading the inputs,
routing, broadcasting chunks, the Spark steps; on the workers the program's step, reading and
unpickling the persisted state, pickling and writing it back) and the top functions; it
writes ``scratch/bench/online_nway_profile.json``.

Prints and writes ``scratch/bench/online_nway.json``. Local wall times on this machine (with
``uptime``'s load averages and the CPU pressure before and after each workload), not cluster
times; not a timed test.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datagen.params import parse_cli_value  # noqa: E402
from runtime.paths import SCRATCH  # noqa: E402

GOAL_RATIO = 3.0
DEFAULTS = {
    "n": 1_000_000,  # tuples per input (issue 17: at least 1M each)
    "repeat": 2,
    "batch_size": 100_000,
    "joiners": [2, 4],  # mjoin's joiners
    "window_ops": ["shj"],  # windowed two-input operators (also: static_mid, join_biclique)
    "window_joiners": 4,
    "ticks": 200,  # event-time ticks of the windowed run
    "cores": os.cpu_count() or 2,
    "seed": 0,
    "workloads": ["mjoin", "window"],
    "fixed_cost": True,
    "profile": False,
    "keep": False,  # keep the generated Parquet inputs
}


def parse_args(argv: list[str]) -> dict:
    args = dict(DEFAULTS)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in DEFAULTS:
            sys.exit(f"usage: bench_online_nway.py [key=value ...]; keys: {', '.join(DEFAULTS)}")
        v = parse_cli_value(value)
        if isinstance(DEFAULTS[key], list) and not isinstance(v, list):
            v = [v]
        args[key] = v
    return args


def load_averages() -> dict:
    """``uptime``'s load averages and, where the kernel has it, the share of the last 60 s
    in which some runnable task waited for a CPU (``/proc/pressure/cpu``, percent)."""
    out: dict = {"load": [round(x, 2) for x in os.getloadavg()]}
    try:
        some = Path("/proc/pressure/cpu").read_text().splitlines()[0].split()
        out["cpu_pressure_avg60"] = float(dict(x.split("=") for x in some[1:])["avg60"])
    except (OSError, KeyError, ValueError, IndexError):
        pass
    return out


def _proc_cpu(pid: int) -> float:
    """utime + stime + cutime + cstime of one process (seconds), 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu() -> float:
    """CPU seconds of this process and all its descendants (the Spark JVM, its Python
    workers): the children's finished children count through cutime/cstime."""
    kids: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    total, todo = 0.0, [os.getpid()]
    while todo:
        p = todo.pop()
        total += _proc_cpu(p)
        todo.extend(kids.get(p, []))
    return total


def timed(fn):
    """(result, wall seconds, process-tree CPU seconds) of ``fn()``."""
    c0, t0 = tree_cpu(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, tree_cpu() - c0


# --- inputs ---------------------------------------------------------------------------------

def write_inputs(folder: Path, frames: dict) -> dict[str, str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, cols in frames.items():
        path = folder / f"{name}.parquet"
        pq.write_table(pa.table(cols), path)
        paths[name] = str(path)
    return paths


def mjoin_inputs(n: int, seed: int, folder: Path) -> tuple[dict[str, str], dict]:
    """Three inputs A, B, C of n tuples, keys uniform over D = round(n / sqrt 2) values."""
    domain = max(1, round(n / math.sqrt(2)))
    rng = np.random.default_rng(seed)
    frames = {nm: {"k": rng.integers(0, domain, n, dtype=np.int64),
                   "v": np.arange(n, dtype=np.int64)} for nm in ("A", "B", "C")}
    counts = [np.bincount(f["k"], minlength=domain).astype(np.float64) for f in frames.values()]
    exact = int((counts[0] * counts[1] * counts[2]).sum())
    return write_inputs(folder, frames), dict(domain=domain, expected=exact,
                                              expected_model=n ** 3 / domain ** 2)


def window_inputs(n: int, seed: int, ticks: int, folder: Path) -> tuple[dict[str, str], dict]:
    """R and S of n tuples: integer event time t uniform over [0, n) (exact arithmetic),
    window W = n / 20, keys uniform over D = W values (about 2 partners per tuple)."""
    window = max(1, n // 20)
    domain = window
    rng = np.random.default_rng(seed + 1)
    frames = {nm: {"k": rng.integers(0, domain, n, dtype=np.int64),
                   "t": rng.integers(0, n, n, dtype=np.int64),
                   "v": np.arange(n, dtype=np.int64)} for nm in ("R", "S")}
    return write_inputs(folder, frames), dict(window=window, domain=domain,
                                              tick=n / ticks, time_span=n,
                                              candidates_model=n * n / domain)


# --- the two sides ----------------------------------------------------------------------------

def head(paths: dict[str, str], rows: int = 20_000) -> dict:
    """The first rows of each input, as pandas frames (small warm-up runs)."""
    import pandas as pd

    return {nm: pd.read_parquet(p).iloc[:rows] for nm, p in paths.items()}


def batch_mjoin(spark, paths: dict[str, str]) -> int:
    a, b, c = (spark.read.parquet(paths[x]) for x in ("A", "B", "C"))
    return a.join(b.withColumnRenamed("v", "v_b"), "k") \
        .join(c.withColumnRenamed("v", "v_c"), "k").count()


def batch_window(spark, paths: dict[str, str], window: int) -> int:
    from pyspark.sql import functions as F

    r = spark.read.parquet(paths["R"]).alias("r")
    s = spark.read.parquet(paths["S"]).alias("s")
    cond = (F.col("r.k") == F.col("s.k")) & (F.abs(F.col("r.t") - F.col("s.t")) <= window)
    return r.join(s, cond).count()


def online(spark, paths: dict[str, str], **kw):
    from joins.online import run_stream

    return run_stream(spark, inputs=dict(paths), on="k", progress=False, collect_output=False,
                      **kw)


def step_stats(res) -> dict:
    """Steps vs ticks, and the per-step walls and the workers' program seconds."""
    m = res.metrics
    per_step = m.groupby("step").agg(wall=("batch_wall_seconds", "first"),
                                     tuples=("tuples", "sum"))
    # program seconds: the busiest partition of each step (partitions run in parallel)
    prog = m.groupby(["step", "partition"])["seconds"].sum().groupby("step").max()
    return dict(steps=int(m["step"].nunique()), ticks=int(m["batch"].nunique()),
                engine_loop_s=float(res.summary["local_wall_time"]),
                step_wall_sum_s=float(per_step["wall"].sum()),
                step_wall_median_s=float(per_step["wall"].median()),
                program_s_busiest_partition_sum=float(prog.sum()),
                expired=int(m["expired"].sum()) if "expired" in m else 0)


def compare(spark, name: str, batch_fn, online_fn, repeat: int, warmup=None) -> dict:
    """Alternating batch and online runs; the best of each, every time kept, exactness checked
    in every run. ``warmup``: a small online run, called after one untimed batch join (the
    session's first queries pay for JIT compilation, class loading, Python workers' start)."""
    runs: dict = {"batch": [], "online": []}
    expected = None
    if warmup is not None:
        _, wall, _ = timed(batch_fn)
        _, wall_o, _ = timed(warmup)
        print(f"  {name}: warm-up batch join {wall:.2f}s, small online run {wall_o:.2f}s "
              "(not counted)", flush=True)
    for _ in range(repeat):
        got, wall, cpu = timed(batch_fn)
        if expected is not None and got != expected:
            raise AssertionError(f"{name}: batch counts differ between runs: {got} vs {expected}")
        expected = got
        runs["batch"].append(dict(wall_s=wall, cpu_s=cpu, count=got))
        res, wall, cpu = timed(online_fn)
        out = int(res.summary["outputs"])
        row = dict(wall_s=wall, cpu_s=cpu, count=out, exact=out == got, **step_stats(res))
        runs["online"].append(row)
        print(f"  {name}: batch {runs['batch'][-1]['wall_s']:.2f}s "
              f"(cpu {runs['batch'][-1]['cpu_s']:.1f}s, {got:,} rows)  online {wall:.2f}s "
              f"(engine loop {row['engine_loop_s']:.2f}s, outside it "
              f"{wall - row['engine_loop_s']:.2f}s, workers' program "
              f"{row['program_s_busiest_partition_sum']:.2f}s, cpu {cpu:.1f}s, {out:,} rows, "
              f"{row['steps']} steps / {row['ticks']} ticks) exact={row['exact']}", flush=True)
        if not row["exact"]:
            raise AssertionError(f"{name}: online output {out} != batch join {got}")
    best_b = min(r["wall_s"] for r in runs["batch"])
    best_o = min(r["wall_s"] for r in runs["online"])
    best_loop = min(r["engine_loop_s"] for r in runs["online"])
    ratio = best_o / best_b
    return dict(runs=runs, count=expected, batch_best_s=best_b, online_best_s=best_o,
                engine_loop_best_s=best_loop, ratio=ratio, loop_ratio=best_loop / best_b,
                cpu_ratio=min(r["cpu_s"] for r in runs["online"]) /
                max(1e-9, min(r["cpu_s"] for r in runs["batch"])),
                goal_met=ratio <= GOAL_RATIO, exact=all(r["exact"] for r in runs["online"]))


def fixed_cost(spark, paths: dict[str, str], joiners: int = 16) -> dict:
    """bench_engine's measurement: static_mid, 50K + 50K tuples in 5000-tuple micro-batches,
    the median step wall after the first two."""
    import pandas as pd

    from joins.online import run_stream

    r = pd.read_parquet(paths["R"], columns=["k"]).iloc[:50_000]
    s = pd.read_parquet(paths["S"], columns=["k"]).iloc[:50_000]
    res = run_stream(spark, r, s, operator="static_mid", joiners=joiners, on="k",
                     batch_size=5_000, progress=False)
    per_batch = res.metrics.groupby("batch")["batch_wall_seconds"].first()
    return dict(joiners=joiners, batches=len(per_batch), partitions=res.summary["partitions"],
                median_batch_s=float(per_batch.iloc[2:].median()),
                all_batch_s=[round(float(x), 4) for x in per_batch])


def _fn_time(stats, part: str, name: str, kind: str = "ct") -> float:
    """Summed own ("tt") or cumulative ("ct") seconds of the profiled functions whose file
    contains ``part`` and whose name is ``name``."""
    i = 2 if kind == "tt" else 3
    return sum(v[i] for (f, _, fn), v in stats.stats.items() if part in f and fn == name)


def _top(stats, key: str, top: int) -> str:
    import io

    buf = io.StringIO()
    stats.stream = buf
    stats.sort_stats(key).print_stats(top)
    return buf.getvalue()


def profile_online(spark, fn, top: int = 20) -> dict:
    """One online run with the driver under cProfile and the Python workers under Spark's
    profiler (``spark.python.profile``), after one unprofiled warm-up run. Driver phases:
    reading the inputs, the arrival order, the engine loop (routing, broadcasting the chunks,
    waiting for each step's Spark job). Worker phases, summed over tasks: the engine step
    (the program's joins and the engine's bookkeeping), reading the partition's input from the
    JVM (the persisted state and pieces, mostly waiting on the socket) and unpickling it,
    pickling the new state and writing it back."""
    import cProfile
    import pstats
    import shutil
    import tempfile

    sc = spark.sparkContext
    fn()  # warm-up
    if getattr(sc, "profiler_collector", None) is not None:
        sc.profiler_collector.profilers = []  # drop the warm-up's worker profiles
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    res = fn()
    prof.disable()
    wall = time.perf_counter() - t0
    drv = pstats.Stats(prof)
    online_dir = "joins/online/"
    driver = dict(
        wall_s=wall,
        source_load_s=_fn_time(drv, online_dir + "source.py", "load"),
        arrival_order_s=_fn_time(drv, online_dir + "source.py", "build_stream"),
        engine_loop_s=_fn_time(drv, online_dir + "engine.py", "run"),
        routing_s=_fn_time(drv, online_dir + "routing.py", "deliveries"),
        broadcast_chunks_s=_fn_time(drv, "pyspark/core/context.py", "broadcast"),
        destroy_broadcasts_s=_fn_time(drv, "pyspark/core/broadcast.py", "destroy"),
    )
    driver["spark_steps_and_rest_s"] = driver["engine_loop_s"] - driver["routing_s"] - \
        driver["broadcast_chunks_s"] - driver["destroy_broadcasts_s"]
    out = dict(driver=driver, steps=step_stats(res), driver_top=_top(drv, "cumulative", top))
    if getattr(sc, "profiler_collector", None) is None:
        return out
    tmp = tempfile.mkdtemp(prefix="wprof-")
    try:
        sc.dump_profiles(tmp)
        files = sorted(Path(tmp).glob("*.pstats"))
        if not files:
            return out
        wk = pstats.Stats(str(files[0]))
        for f in files[1:]:
            wk.add(str(f))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # Spark's worker profiles name files without their folders
    total = _fn_time(wk, "worker.py", "process")  # pyspark's worker: one task's whole work
    step = _fn_time(wk, "worker.py", "step")  # joins.online.worker.step
    state_in = _fn_time(wk, "~", "<method 'read' of '_io.BufferedReader' objects>", "tt") + \
        _fn_time(wk, "~", "<built-in method _pickle.loads>", "tt")
    state_out = _fn_time(wk, "cloudpickle", "dump") + \
        _fn_time(wk, "~", "<method 'write' of '_io.BufferedWriter' objects>", "tt")
    argsort = _fn_time(wk, "~", "<method 'argsort' of 'numpy.ndarray' objects>", "tt")
    search = _fn_time(wk, "~", "<method 'searchsorted' of 'numpy.ndarray' objects>", "tt")
    # the step pulls its input (state, pieces) from the JVM lazily: reading is inside it
    out["workers"] = dict(tasks_s=total, read_and_unpickle_input_s=state_in,
                          engine_step_without_input_s=step - state_in,
                          argsort_in_step_s=argsort, searchsorted_in_step_s=search,
                          pickle_and_write_state_s=state_out,
                          other_s=total - step - state_out)
    out["workers_top"] = _top(wk, "tottime", top)
    return out


def run_profile(spark, a: dict, folder: Path, cores: int, bs: int) -> dict:
    """profile=true: no timed comparison, one profiled online run per workload."""
    n = int(a["n"])
    out: dict = {}
    if "mjoin" in a["workloads"]:
        paths, _ = mjoin_inputs(n, a["seed"], folder / "mjoin")
        j = max(a["joiners"])
        out[f"mjoin J={j}"] = profile_online(spark, lambda: online(
            spark, paths, operator="mjoin", joiners=j, partitions=cores, batch_size=bs))
    if "window" in a["workloads"]:
        paths, info = window_inputs(n, a["seed"], int(a["ticks"]), folder / "window")
        for op in a["window_ops"]:
            out[f"{op} window"] = profile_online(spark, lambda op=op: online(
                spark, paths, operator=op, joiners=int(a["window_joiners"]), partitions=cores,
                batch_size=bs, time="t", tick=info["tick"], window=info["window"]))
    for name, p in out.items():
        print(f"\n== {name}: {p['steps']['steps']} steps / {p['steps']['ticks']} ticks, "
              f"workers' program seconds (busiest partition, summed over steps) "
              f"{p['steps']['program_s_busiest_partition_sum']:.1f}s")
        print("driver (s): " + ", ".join(f"{k} {v:.2f}" for k, v in p["driver"].items()))
        if "workers" in p:
            print("workers, summed over tasks (s): " +
                  ", ".join(f"{k} {v:.2f}" for k, v in p["workers"].items()))
            print(p["workers_top"])
        print(p["driver_top"])
    return out


def main(argv: list[str]) -> int:
    a = parse_args(argv)
    n, cores, bs = int(a["n"]), int(a["cores"]), int(a["batch_size"])
    from runtime.spark_session import get_spark

    conf = {"spark.python.profile": "true"} if a["profile"] else None
    spark = get_spark(f"local[{cores}]", driver_memory="8g", conf=conf)
    folder = SCRATCH / "bench" / f"online_nway-n{n}-s{a['seed']}"
    out: dict = dict(n=n, cores=cores, partitions=cores, batch_size=bs, repeat=a["repeat"],
                     goal_ratio=GOAL_RATIO, load_start=load_averages(),
                     note=f"local wall time on {cores} cores of one shared machine, "
                          "not cluster time; best of repeat", workloads={})
    print(f"n={n:,} per input, cores={cores}, batch_size={bs:,}, load {out['load_start']}",
          flush=True)
    if a["profile"]:
        out["profile"] = run_profile(spark, a, folder, cores, bs)
        out["load_end"] = load_averages()
        name = "online_nway_profile.json"
    else:
        measure(spark, a, folder, cores, bs, out)
        name = "online_nway.json"
    if not a["keep"]:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    path = SCRATCH / "bench" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2, default=str))
    if not a["profile"]:
        report(out)
    print(f"written {path}")
    return 0


def measure(spark, a: dict, folder: Path, cores: int, bs: int, out: dict) -> None:
    n = int(a["n"])
    if "mjoin" in a["workloads"]:
        paths, info = mjoin_inputs(n, a["seed"], folder / "mjoin")
        w = dict(info, load_before=load_averages(), runs={})
        print(f"mjoin: 3 inputs x {n:,}, D={info['domain']:,}, expected {info['expected']:,}",
              flush=True)
        for j in a["joiners"]:
            w["runs"][f"J{j}"] = compare(
                spark, f"mjoin J={j}", lambda: batch_mjoin(spark, paths),
                lambda j=j: online(spark, paths, operator="mjoin", joiners=j,
                                   partitions=cores, batch_size=bs), a["repeat"],
                warmup=(lambda j=j: online(spark, head(paths), operator="mjoin", joiners=j,
                                           partitions=cores, batch_size=bs // 10))
                if j == a["joiners"][0] else None)
            if w["runs"][f"J{j}"]["count"] != info["expected"]:
                raise AssertionError(f"mjoin batch count {w['runs'][f'J{j}']['count']} != "
                                     f"numpy's {info['expected']}")
        w["load_after"] = load_averages()
        out["workloads"]["mjoin"] = w
    if "window" in a["workloads"] or a["fixed_cost"]:
        paths, info = window_inputs(n, a["seed"], int(a["ticks"]), folder / "window")
    if "window" in a["workloads"]:
        w = dict(info, load_before=load_averages(), runs={})
        print(f"window: 2 inputs x {n:,}, W={info['window']:,}, D={info['domain']:,}, "
              f"tick={info['tick']:g}", flush=True)
        kw = dict(joiners=int(a["window_joiners"]), partitions=cores, batch_size=bs, time="t",
                  tick=info["tick"], window=info["window"])
        for op in a["window_ops"]:
            w["runs"][op] = compare(spark, f"{op} window", lambda: batch_window(
                spark, paths, info["window"]), lambda op=op: online(
                spark, paths, operator=op, **kw), a["repeat"],
                warmup=(lambda op=op: online(spark, head(paths), operator=op, **kw))
                if op == a["window_ops"][0] else None)
        w["load_after"] = load_averages()
        out["workloads"]["window"] = w
    if a["fixed_cost"]:
        out["fixed_cost_J16"] = dict(fixed_cost(spark, paths), load=load_averages(),
                                     issue_median_s=0.16)
    out["load_end"] = load_averages()


def report(out: dict) -> None:
    print(f"\nn={out['n']:,} per input, {out['cores']} cores; load at start {out['load_start']}, "
          f"end {out['load_end']}")
    for wname, w in out["workloads"].items():
        for rname, r in w["runs"].items():
            s = r["runs"]["online"][0]
            print(f"  {wname:<6} {rname:<10} batch {r['batch_best_s']:6.2f}s  online "
                  f"{r['online_best_s']:6.2f}s (engine loop {r['engine_loop_best_s']:6.2f}s)  "
                  f"ratio {r['ratio']:5.2f} (loop only {r['loop_ratio']:5.2f}, cpu "
                  f"{r['cpu_ratio']:5.2f})  steps {s['steps']} / ticks {s['ticks']}  rows "
                  f"{r['count']:,} exact={r['exact']}  goal <= {GOAL_RATIO:g}x: "
                  f"{'met' if r['goal_met'] else 'NOT met'}")
    if "fixed_cost_J16" in out:
        f = out["fixed_cost_J16"]
        print(f"  fixed cost per micro-batch at J=16 (static_mid, 5000-tuple batches, "
              f"{f['partitions']} partitions): median {f['median_batch_s']:.3f}s over "
              f"{f['batches']} batches (issue 17 quotes 0.16s; load {f['load']})")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
