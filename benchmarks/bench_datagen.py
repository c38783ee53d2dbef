"""Benchmark: skewed TPC-H generation (datagen.tpch) against plain tpchgen-cli, same run.

Target (issue 3): the skewed generation takes at most 2x plain ``tpchgen-cli`` at SF 1.

    .venv/bin/python benchmarks/bench_datagen.py [sf=1] [z=1.0] [seed=0] [repeat=3] [keep=false]

Both are timed ``repeat`` times, alternating, into ``scratch/bench/``; the ratio uses the best
(minimum) time of each, the usual way to discount other load on a shared machine, and every
single time is recorded, with CPU seconds (user + system, tpchgen-cli included), which
other processes on a shared machine disturb much less than wall time. Plain is tpchgen-cli's own default invocation (all eight tables,
Parquet, one file per table); skewed is :func:`datagen.tpch.generate` with its default skew
columns (l_orderkey, l_partkey, l_suppkey), which runs tpchgen-cli and then rewrites LINEITEM.
Writes ``scratch/bench/datagen.json``. Local wall time on this machine only.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from datagen import tpch  # noqa: E402
from datagen.params import parse_cli_value  # noqa: E402
from runtime.paths import SCRATCH  # noqa: E402

TARGET_RATIO = 2.0
DEFAULTS = {"sf": 1.0, "z": 1.0, "seed": 0, "repeat": 3, "keep": False}


def parse_args(argv: list[str]) -> dict:
    args = dict(DEFAULTS)
    for a in argv:
        key, sep, value = a.partition("=")
        if not sep or key not in DEFAULTS:
            sys.exit(f"usage: bench_datagen.py [key=value ...]; keys: {', '.join(DEFAULTS)}")
        args[key] = parse_cli_value(value)
    return args


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and its finished children (tpchgen-cli)."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def time_plain(sf: float, out: Path) -> tuple[float, float]:
    """(wall, cpu) seconds of plain tpchgen-cli."""
    shutil.rmtree(out, ignore_errors=True)
    t0, c0 = time.perf_counter(), cpu_seconds()
    subprocess.run([tpch.tpchgen_binary(), "parquet", "-s", repr(float(sf)), "-o", str(out),
                    "--no-progress", "-q"], check=True)
    return time.perf_counter() - t0, cpu_seconds() - c0


def time_skewed(sf: float, z: float, seed: int, out: Path) -> tuple[float, float, dict]:
    """(wall, cpu, rows) of datagen.tpch.generate."""
    shutil.rmtree(out, ignore_errors=True)
    t0, c0 = time.perf_counter(), cpu_seconds()
    rows = tpch.generate({"sf": sf, "z": z, "seed": seed}, out, None, False)
    return time.perf_counter() - t0, cpu_seconds() - c0, rows


def main() -> None:
    args = parse_args(sys.argv[1:])
    bench = SCRATCH / "bench"
    plain_dir, skew_dir = bench / "datagen-plain", bench / "datagen-skewed"
    plain_s, skewed_s, plain_cpu, skewed_cpu, rows, loads = [], [], [], [], {}, []
    for i in range(int(args["repeat"])):
        loads.append(os.getloadavg()[0])
        wall, cpu = time_plain(args["sf"], plain_dir)
        plain_s.append(wall)
        plain_cpu.append(cpu)
        wall, cpu, rows = time_skewed(args["sf"], args["z"], int(args["seed"]), skew_dir)
        skewed_s.append(wall)
        skewed_cpu.append(cpu)
        print(f"run {i + 1} (load {loads[-1]:.1f}): plain {plain_s[-1]:.2f}s wall "
              f"{plain_cpu[-1]:.2f}s cpu, skewed {skewed_s[-1]:.2f}s wall {skewed_cpu[-1]:.2f}s "
              "cpu", flush=True)
    ratio = min(skewed_s) / min(plain_s)
    cpu_ratio = min(skewed_cpu) / min(plain_cpu)
    result = {
        "what": "skewed TPC-H generation (datagen.tpch) vs plain tpchgen-cli, local wall time",
        "sf": args["sf"], "z": args["z"], "seed": args["seed"],
        "skew_columns": list(tpch.DEFAULT_COLUMNS),
        "plain_seconds": plain_s, "skewed_seconds": skewed_s,
        "plain_best_s": min(plain_s), "skewed_best_s": min(skewed_s),
        "ratio": ratio, "target_ratio": TARGET_RATIO, "met": ratio <= TARGET_RATIO,
        # CPU seconds (user+sys, incl. tpchgen) are far less sensitive to other load
        "plain_cpu_seconds": plain_cpu, "skewed_cpu_seconds": skewed_cpu,
        "cpu_ratio": cpu_ratio, "load_avg_1m_before_runs": loads,
        "rows": rows,
        "machine": {"cpus": os.cpu_count(), "load_avg_1m_at_end": os.getloadavg()[0],
                    "platform": platform.platform(), "python": platform.python_version()},
    }
    bench.mkdir(parents=True, exist_ok=True)
    (bench / "datagen.json").write_text(json.dumps(result, indent=2))
    if not args["keep"]:
        shutil.rmtree(plain_dir, ignore_errors=True)
        shutil.rmtree(skew_dir, ignore_errors=True)
    print(f"sf={args['sf']} z={args['z']}: plain {min(plain_s):.2f}s, skewed {min(skewed_s):.2f}s"
          f", ratio {ratio:.2f} (target <= {TARGET_RATIO}: {'met' if result['met'] else 'NOT met'})"
          f"; cpu ratio {cpu_ratio:.2f}"
          f" -> {bench / 'datagen.json'}")


if __name__ == "__main__":
    main()
