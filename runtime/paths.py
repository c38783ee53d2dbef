"""Where things live, relative to the repository root (never the Hydra run folder)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "conf"
RESULTS = ROOT / "results"
FIGURES = ROOT / "figures"
SCRATCH = ROOT / "scratch"  # ignored: tiny-scale results, data cache, Spark event logs
DATA_CACHE = SCRATCH / "data"
ONLINE_SCRATCH = SCRATCH / "online"  # online runs' output pairs and spilled state
SPARK_EVENTS = SCRATCH / "spark-events"  # every session's event log (Spark's history server reads it)
