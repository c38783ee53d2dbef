"""Run every benchmark (or those named):
``python -m benchmarks [amjoin] [datagen] [engine] [online_nway] [key=value ...]``.

Options are each benchmark's own, so they need the benchmark named (one or more that take
them); without a name every benchmark runs with its defaults.

Each benchmark runs in its own process and writes ``scratch/bench/<name>.json``.
"""

from __future__ import annotations

import subprocess
import sys

from runtime.paths import ROOT

BENCHES = sorted(p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py"))


def main(argv: list[str]) -> int:
    names = [a for a in argv if "=" not in a] or BENCHES
    opts = [a for a in argv if "=" in a]
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        print(f"error: unknown benchmark(s) {unknown}; valid: {', '.join(BENCHES)}", file=sys.stderr)
        return 2
    if opts and not any("=" not in a for a in argv):
        print(f"error: options {' '.join(opts)} are a benchmark's own: name it, e.g. "
              f"`make bench ARGS=\"online_nway {' '.join(opts)}\"`", file=sys.stderr)
        return 2
    failed = []
    for name in names:
        print(f"== benchmark {name}", flush=True)
        rc = subprocess.run([sys.executable, "-m", f"benchmarks.bench_{name}", *opts],
                            cwd=ROOT).returncode
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
