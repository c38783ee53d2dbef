"""Deterministic chunked output: the same config and seed give the same bytes on any executor.

A table is cut into fixed-size chunks. Chunk ``i`` of table ``T`` draws from its own random
stream, seeded by ``SeedSequence([seed, crc32(generator), crc32(T), i])``, and is written to
``<T>.parquet/part-{i:05d}.parquet`` by exactly one task. So neither the number of Spark
partitions nor which worker runs a chunk can change a byte. :func:`run_jobs` runs the chunk
writers in a plain loop (tiny inputs, no Spark) or as Spark tasks (one task per chunk).
"""

from __future__ import annotations

import importlib
import os
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from datagen.errors import GeneratorError

# Fixed writer settings: part of the byte-identity contract (recorded in the manifest).
PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "snappy",
    "version": "2.6",
    "data_page_version": "1.0",
    "use_dictionary": True,
    "write_statistics": True,
}
MAX_STRING_BYTES = 2**31 - 1  # one chunk's string column uses 32-bit offsets (Arrow `string`)


def stable_id(text: str) -> int:
    return zlib.crc32(text.encode())


def chunk_rng(seed: int, generator: str, table: str, index: int) -> np.random.Generator:
    """The random stream of one chunk; independent across tables and chunks."""
    ss = np.random.SeedSequence([int(seed), stable_id(generator), stable_id(table), int(index)])
    return np.random.Generator(np.random.PCG64(ss))


def named_rng(seed: int, generator: str, name: str) -> np.random.Generator:
    """A random stream shared by all chunks (e.g. the key permutation of both relations)."""
    ss = np.random.SeedSequence([int(seed), stable_id(generator), stable_id("@" + name)])
    return np.random.Generator(np.random.PCG64(ss))


def n_chunks(rows: int, chunk_rows: int) -> int:
    """At least one chunk, so an empty table still has a part file carrying its schema."""
    return max(1, -(-rows // chunk_rows))


def chunk_bounds(rows: int, chunk_rows: int, index: int) -> tuple[int, int]:
    start = min(index * chunk_rows, rows)
    return start, min(start + chunk_rows, rows)


def share(total: int, part: int, start: int, end: int) -> int:
    """How many of ``part`` (out of ``total`` rows) fall in rows [start, end), spread evenly.

    Exact over all chunks (the shares sum to ``part``), so a table mixes e.g. its uniform and
    Zipf records in every chunk instead of storing one kind after the other.
    """
    if total == 0:
        return 0
    return (end * part) // total - (start * part) // total


def payload_column(rng: np.random.Generator, n: int, width: int, kind: str) -> pa.Array:
    """``n`` strings of exactly ``width`` ASCII bytes (random letters, or a constant 'x' run).

    Random letters by default: Spark compresses shuffle blocks, so a constant payload would
    make the measured bytes sent far smaller than the record size says.
    """
    if n * width > MAX_STRING_BYTES:
        raise GeneratorError(f"a chunk of {n} rows x {width} B exceeds 2 GiB; lower chunk_rows")
    if kind == "random":
        data = (rng.integers(0, 26, n * width, dtype=np.uint8) + ord("a")).tobytes()
    else:
        data = b"x" * (n * width)
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32) if n else np.zeros(1, np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), pa.py_buffer(data))


def key_payload_table(keys: np.ndarray, payload: pa.Array) -> pa.Table:
    schema = pa.schema([pa.field("key", pa.int64(), nullable=False), ("payload", pa.string())])
    return pa.Table.from_arrays([pa.array(keys, pa.int64()), payload], schema=schema)


def part_path(table_dir: Path, index: int) -> Path:
    return Path(table_dir) / f"part-{index:05d}.parquet"


def write_part(table: pa.Table, table_dir: Path | str, index: int) -> int:
    """Write one chunk under its fixed name, via a hidden temp file (readers skip dot-files)."""
    table_dir = Path(table_dir)
    table_dir.mkdir(parents=True, exist_ok=True)
    final = part_path(table_dir, index)
    tmp = table_dir / f".{final.name}.{uuid.uuid4().hex}"
    pq.write_table(table, tmp, **PARQUET_OPTIONS)
    os.replace(tmp, final)
    return table.num_rows


@dataclass(frozen=True)
class ChunkJob:
    """One task: ``target`` ("module:function") writes chunk ``index`` of ``table`` in ``out``."""

    target: str
    table: str
    index: int
    out: str
    rows: int  # rows this chunk will hold (for progress)
    args: dict[str, Any] = field(default_factory=dict)


def run_job(job: ChunkJob) -> int:
    module, _, attr = job.target.partition(":")
    return getattr(importlib.import_module(module), attr)(job)


def run_jobs(jobs: Sequence[ChunkJob], spark=None, progress: bool = True,
             desc: str = "rows", threads: int = 1, unit: str = "rows") -> list[Any]:
    """Run every chunk job; returns what each job returned (rows written), in job order.

    With ``spark`` each job is one Spark task (jobs are submitted in waves of a few times the
    default parallelism so the progress bar moves). The output folder must be visible to the
    executors under the same path (local, local-cluster, or a shared file system), and the
    executors import ``datagen`` as every session of :func:`runtime.spark_session.get_spark`
    lets them (the checkout on local masters, the shipped project zip elsewhere). Without it
    the jobs run in this process, on ``threads`` threads (for jobs whose heavy steps, numpy and
    pyarrow, release the GIL).
    """
    from concurrent.futures import ThreadPoolExecutor

    from tqdm import tqdm

    total = sum(j.rows for j in jobs)
    bar = tqdm(total=total, unit=unit, desc=desc, disable=not progress, leave=False)
    done: list[Any] = []
    try:
        if spark is None:
            with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
                for job, result in zip(jobs, pool.map(run_job, jobs), strict=True):
                    done.append(result)
                    bar.update(job.rows)
        else:
            sc = spark.sparkContext
            wave = max(1, 4 * sc.defaultParallelism)
            for lo in range(0, len(jobs), wave):
                batch = list(jobs[lo:lo + wave])
                done.extend(sc.parallelize(batch, len(batch)).map(run_job).collect())
                bar.update(sum(j.rows for j in batch))
    finally:
        bar.close()
    return done
