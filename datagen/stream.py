"""stream: relations R and S with an arrival order, the input of the online (streaming) joins.

Inputs are two Parquet files/folders (``r=PATH s=PATH``) or a generator spec
(``source=dpair source_params={...}``; the source's first two tables by default, e.g. dpair's
R,S or smalllarge's L,S). The output tables ``R`` and ``S`` keep their input columns and add
``seq`` (the global arrival index: 0..|R|+|S|-1, each value exactly once over both tables) and,
if the order has time, ``event_time`` (seconds). Rows are written in arrival order. The
order's name and resolved parameters are recorded in the manifest (``params.order`` and
``params.order_params``).
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datagen import orders
from datagen.chunks import ChunkJob, chunk_bounds, n_chunks, run_jobs, write_part
from datagen.errors import GeneratorError
from datagen.params import check, signature_params, validate

NAME = "stream"
ADDED = ("seq", "event_time")


@dataclass(frozen=True)
class Params:
    r: str = ""  # Parquet file or folder of R (or use source=)
    s: str = ""
    source: str = ""  # a generator name whose first two tables become R and S
    source_params: dict = field(default_factory=dict)
    source_tables: tuple[str, ...] = ()  # which two source tables (default: its first two)
    order: str = "random"
    order_params: dict = field(default_factory=dict)  # also accepted flat: order=fluct k=4
    key: str = "key"  # key column, for orders that need the keys
    seed: int = 0
    chunk_rows: int = 100_000
    inputs: dict = field(default_factory=dict)  # filled by resolve(): fingerprints of r and s

    def __post_init__(self) -> None:
        check(self.seed >= 0, f"seed must be >= 0, got {self.seed}")
        check(self.chunk_rows >= 1, f"chunk_rows must be >= 1, got {self.chunk_rows}")
        check(bool(self.source) != bool(self.r or self.s),
              "stream needs either r=PATH and s=PATH or source=GENERATOR (not both)")
        check(bool(self.source) or bool(self.r and self.s), "stream needs both r= and s=")
        check(not self.source_tables or len(self.source_tables) == 2,
              "source_tables must name two tables")


def parquet_files(path: Path) -> list[Path]:
    """The data files of a Parquet file or folder, in name order (hidden/underscore skipped)."""
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.parquet")
                   if not any(part.startswith((".", "_")) for part in p.relative_to(path).parts))
    if not files:
        raise GeneratorError(f"no Parquet files in {path}")
    return files


def _fingerprint(path: Path) -> dict[str, Any]:
    """Identifies the input for the cache: a generated table by its config hash, else files."""
    from datagen.cache import read_manifest

    if not path.exists():
        raise GeneratorError(f"input {path} does not exist")
    if (path / "manifest.json").exists():
        raise GeneratorError(f"input {path} is a generated input folder; pass one of its tables, "
                             f"e.g. {path / 'R.parquet'}")
    try:
        digest = read_manifest(path.parent)["config_hash"]
        return {"path": str(path), "config_hash": digest}
    except GeneratorError:
        stats = [(str(f.relative_to(path)) if path.is_dir() else f.name, f.stat().st_size,
                  f.stat().st_mtime_ns) for f in parquet_files(path)]
        return {"path": str(path), "files": stats}


def resolve(raw: dict[str, Any]) -> dict[str, Any]:
    from datagen import cache

    base = {f.name for f in fields(Params)}
    own = {k: v for k, v in raw.items() if k in base and k != "inputs"}  # inputs: recomputed
    order_kw = {**dict(own.get("order_params") or {}),
                **{k: v for k, v in raw.items() if k not in base}}
    p = validate(Params, own, f"generator {NAME!r}")
    order_names = set(signature_params(orders.load(p.order))) - set(orders.KEY_ARGS)
    bad = sorted(set(order_kw) - order_names)
    shown = base - {"inputs"}
    if bad:
        raise GeneratorError(
            f"unknown parameter(s) {', '.join(bad)} for generator {NAME!r} with order "
            f"{p.order!r}; valid: {', '.join(sorted(shown | order_names))}")
    resolved = asdict(p)
    resolved["order_params"] = orders.resolve(p.order, order_kw)
    if p.source:
        if p.source == NAME:
            raise GeneratorError("a stream cannot be the source of a stream")
        resolved["source_params"] = cache.resolve(p.source, p.source_params)
    else:
        resolved["r"], resolved["s"] = (str(Path(x).resolve()) for x in (p.r, p.s))
        resolved["inputs"] = {t: _fingerprint(Path(resolved[t.lower()])) for t in ("R", "S")}
    return resolved


def _inputs(p: Params, out: Path, spark, progress: bool) -> tuple[Path, Path]:
    if not p.source:
        return Path(p.r), Path(p.s)
    from datagen import cache

    folder = cache.materialize_into(out / ".source", p.source, p.source_params, spark=spark,
                                    progress=progress)
    tables = list(cache.read_manifest(folder)["rows"])
    chosen = p.source_tables or tuple(tables[:2])
    if len(chosen) != 2:
        raise GeneratorError(f"source {p.source!r} has fewer than two tables: {tables}")
    return tuple(cache.table_path(folder, t) for t in chosen)


def _offsets(files: list[Path]) -> np.ndarray:
    counts = [pq.ParquetFile(f).metadata.num_rows for f in files]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _keys(files: list[Path], column: str) -> np.ndarray:
    names = pq.read_schema(files[0]).names
    if column not in names:
        raise GeneratorError(f"unknown key column {column!r}; valid: {', '.join(names)}")
    return pa.concat_arrays(
        [c for f in files for c in pq.read_table(f, columns=[column])[column].chunks]
    ).to_numpy(zero_copy_only=False) if files else np.zeros(0)


def write_chunk(job: ChunkJob) -> int:
    """Gather this chunk's input rows (in arrival order) and append seq / event_time."""
    a = job.args
    files = [Path(f) for f in a["files"]]
    offsets = np.asarray(a["offsets"])
    rows = np.asarray(a["rows"], dtype=np.int64)
    file_of = np.searchsorted(offsets, rows, side="right") - 1
    touched = np.unique(file_of)
    if len(touched):
        data = pa.concat_tables([pq.read_table(files[i]) for i in touched])
        base = np.concatenate([[0], np.cumsum(offsets[touched + 1] - offsets[touched])])
        local = base[np.searchsorted(touched, file_of)] + rows - offsets[file_of]
        table = data.take(pa.array(local))
    else:
        table = pq.read_schema(files[0]).empty_table()
    table = table.append_column(pa.field("seq", pa.int64(), nullable=False),
                                pa.array(a["seq"], pa.int64()))
    if a["event_time"] is not None:
        table = table.append_column(pa.field("event_time", pa.float64(), nullable=False),
                                    pa.array(a["event_time"], pa.float64()))
    return write_part(table, job.out, job.index)


def generate(params: dict, out: Path, spark=None, progress: bool = True) -> dict[str, int]:
    p = validate(Params, params, f"generator {NAME!r}")
    paths = _inputs(p, out, spark, progress)
    try:
        files = [parquet_files(x) for x in paths]
        for x, f in zip(paths, files, strict=True):
            taken = sorted(set(pq.read_schema(f[0]).names) & set(ADDED))
            if taken:
                raise GeneratorError(f"input {x} already has column(s) {', '.join(taken)}")
        offsets = [_offsets(f) for f in files]
        n_r, n_s = (int(o[-1]) for o in offsets)
        keys = {}
        if orders.needs_keys(p.order):
            keys = {"keys_r": _keys(files[0], p.key), "keys_s": _keys(files[1], p.key)}
        arr = orders.compute_arrival(p.order, n_r, n_s, p.seed, **keys, **p.order_params)
        seq = np.arange(n_r + n_s, dtype=np.int64)
        jobs = []
        for t, mask, perm, f, off in (("R", arr.is_r, arr.perm_r, files[0], offsets[0]),
                                      ("S", ~arr.is_r, arr.perm_s, files[1], offsets[1])):
            n = int(off[-1])
            order = np.arange(n, dtype=np.int64) if perm is None else np.asarray(perm, np.int64)
            seq_t = seq[mask]
            time_t = None if arr.event_time is None else arr.event_time[mask]
            for i in range(n_chunks(n, p.chunk_rows)):
                lo, hi = chunk_bounds(n, p.chunk_rows, i)
                args = {"files": [str(x) for x in f], "offsets": off, "rows": order[lo:hi],
                        "seq": seq_t[lo:hi],
                        "event_time": None if time_t is None else time_t[lo:hi]}
                jobs.append(ChunkJob(f"datagen.{NAME}:write_chunk", t, i,
                                     str(out / f"{t}.parquet"), rows=hi - lo, args=args))
        run_jobs(jobs, spark, progress, desc=f"{NAME} {p.order}")
    finally:
        shutil.rmtree(out / ".source", ignore_errors=True)
    return {"R": n_r, "S": n_s}
