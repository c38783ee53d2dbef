"""Generated inputs of an n-way query: the tables a generator wrote beside its ``query.json``
(input names and edges ``"A.x=B.x"``), and DuckDB's count of their join, computed once per
generated folder (every point of a sweep on the same inputs reads it)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from experiments.kinds.batch_join import cached_value


def read_query(folder: Path) -> tuple[dict[str, pd.DataFrame], str, list[tuple]] | None:
    """(frames by input name, the ``on=`` string, the oracle's edges) or None without a
    ``query.json`` (a two-input generator)."""
    query = folder / "query.json"
    if not query.exists():
        return None
    q = json.loads(query.read_text())
    frames = {name: pd.read_parquet(folder / f"{name}.parquet") for name in q["inputs"]}
    edges = []
    for e in q["edges"]:
        (a, ca), (b, cb) = (side.split(".") for side in e.split("="))
        edges.append((a, ca, b, cb))
    return frames, ",".join(q["edges"]), edges


def join_count(folder: Path, frames: dict[str, pd.DataFrame], edges: list[tuple]) -> int:
    """DuckDB's exact count of the join, cached next to the generated inputs."""
    from joins.oracle import oracle_graph_count

    return int(cached_value(folder / "oracle-query.json", "rows",
                            lambda: oracle_graph_count(frames, edges)))
