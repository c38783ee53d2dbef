"""Run and plot a set of figures: ``python -m experiments.reproduce <figure|paper|headline|all>``.

Each figure's sweep runs in its own process (one Spark application per figure), then its chart
is redrawn from the results, also in a process of its own (``python -m figures.plot``:
``experiments`` never imports ``figures``, which reads experiments' registry and results).
``data_only=true`` only generates (and caches) the inputs.
"""

from __future__ import annotations

import subprocess
import sys
import time

from experiments.figures import draw_charts, select
from runtime.paths import ROOT


def main(argv: list[str]) -> int:
    names = [a for a in argv if "=" not in a]
    opts = [a for a in argv if "=" in a]
    data_only = "data_only=true" in opts
    opts = [o for o in opts if not o.startswith("data_only=")]
    if len(names) != 1:
        print("usage: python -m experiments.reproduce <figure|paper|headline|all> "
              "[scale=..] [spark=..] [hydra overrides]", file=sys.stderr)
        return 2
    try:
        ids = select(names[0])
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    scale = next((o.split("=", 1)[1] for o in opts if o.startswith("scale=")), "small")
    failed = []
    for i, figure_id in enumerate(ids, 1):
        print(f"== [{i}/{len(ids)}] {figure_id} (scale={scale})", flush=True)
        t0 = time.perf_counter()
        module = "experiments.prepare" if data_only else "experiments.run"
        rc = subprocess.run([sys.executable, "-m", module, f"figure={figure_id}", *opts],
                            cwd=ROOT).returncode
        if rc != 0:
            failed.append(figure_id)
            continue
        if not data_only and draw_charts([figure_id], scale) != 0:
            failed.append(figure_id)
            continue
        print(f"== {figure_id} done in {time.perf_counter() - t0:.0f}s", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
