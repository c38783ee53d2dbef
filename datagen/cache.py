"""Materialise a generator's output once per configuration: a folder named by the config hash.

The folder holds one Parquet folder per table and ``manifest.json`` (generator, resolved
parameters, seed, row counts, versions). It is written under a hidden temp name, the manifest
last, then renamed into place in one step, so a half-written input is never seen or reused: a
folder without a manifest is never taken for a finished one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from datagen import registry
from datagen.chunks import PARQUET_OPTIONS
from datagen.errors import GeneratorError
from datagen.params import validate
from runtime.shipping import package_bytes

FORMAT_VERSION = 1  # bump on a change of the folder layout (code changes are fingerprinted)
MANIFEST = "manifest.json"
STALE_AFTER_S = 24 * 3600  # see sweep_stale
PACKAGE = Path(__file__).resolve().parent  # the datagen sources, fingerprinted in the key


def resolve(generator: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """Validated parameters with every default filled in (what the hash and manifest record)."""
    mod = registry.module(generator)
    if hasattr(mod, "resolve"):
        return mod.resolve(dict(params))
    return dataclasses.asdict(validate(mod.Params, dict(params), f"generator {generator!r}"))


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@functools.cache
def tool_versions() -> dict[str, str]:
    """Versions of the external generators whose output lands in the data (once per process)."""
    from datagen.tpch import tpchgen_binary

    try:
        run = subprocess.run([tpchgen_binary(), "--version"], capture_output=True, text=True,
                             timeout=30, check=True)
        tpchgen = run.stdout.strip().rpartition(" ")[2] or "unknown"
    except (GeneratorError, OSError, subprocess.SubprocessError):
        tpchgen = "absent"
    try:
        duckdb = importlib.metadata.version("duckdb")
    except importlib.metadata.PackageNotFoundError:
        duckdb = "absent"
    return {"tpchgen-cli": tpchgen, "duckdb": duckdb}


def code_fingerprint() -> dict[str, str]:
    """What decides the bytes besides the parameters: the datagen sources (any edit, even a
    comment, gives a new key: stale data are never reused, at the cost of regenerating) and
    the versions of tpchgen-cli and DuckDB."""
    return {"datagen_sources": hashlib.sha256(package_bytes(PACKAGE)).hexdigest()[:16],
            **tool_versions()}


def config_hash(generator: str, resolved: Mapping[str, Any],
                code: Mapping[str, str] | None = None) -> str:
    """``code``: :func:`code_fingerprint`'s value, when the caller already has it."""
    blob = {"format": FORMAT_VERSION, "generator": generator, "params": resolved,
            "code": code if code is not None else code_fingerprint()}
    return hashlib.sha256(_canonical(blob).encode()).hexdigest()


def read_manifest(folder: Path | str) -> dict:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise GeneratorError(f"{folder} is not a generated input (no {MANIFEST})")
    return json.loads(path.read_text())


def _versions(code: Mapping[str, str]) -> dict[str, str]:
    import numpy
    import pyarrow

    return {"datagen_format": str(FORMAT_VERSION), "python": platform.python_version(),
            "numpy": numpy.__version__, "pyarrow": pyarrow.__version__, **code}


def _table_info(folder: Path, rows: Mapping[str, int]) -> dict[str, Any]:
    info = {}
    for table, n in rows.items():
        parts = sorted((folder / f"{table}.parquet").glob("part-*.parquet"))
        if not parts:
            raise RuntimeError(f"generator wrote no part files for table {table}")
        schema = pq.read_schema(parts[0])
        info[table] = {"rows": int(n), "parts": len(parts),
                       "columns": {f.name: str(f.type) for f in schema}}
    return info


def _state(folder: Path, digest: str) -> str:
    """'absent', 'empty', 'same' (finished, same config), or 'other'."""
    if not folder.exists():
        return "absent"
    if folder.is_dir() and not any(folder.iterdir()):
        return "empty"
    try:
        if read_manifest(folder).get("config_hash") == digest:
            return "same"
    except (GeneratorError, json.JSONDecodeError, NotADirectoryError):
        pass
    return "other"


def _foreign_files(folder: Path, manifest: Mapping[str, Any]) -> list[str]:
    """Files in a generated folder that generation did not write (e.g. a user's own)."""
    tables = {f"{t}.parquet" for t in manifest.get("rows", {})}
    foreign = []
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        ours = (rel.as_posix() == MANIFEST
                or (rel.parts[0] in tables and len(rel.parts) == 1 and p.is_dir())
                or (rel.parts[0] in tables and len(rel.parts) == 2 and p.is_file()
                    and rel.name.startswith("part-") and rel.suffix == ".parquet"))
        if not ours:
            foreign.append(rel.as_posix())
    return foreign


def check_target(folder: Path, digest: str, force: bool = False) -> str:
    """The state of an output folder (see :func:`_state`), or a GeneratorError if generating
    into it would replace anything that generation did not write: an existing folder of other
    content is refused, and ``force`` replaces only a generated input (its manifest) holding
    nothing else."""
    state = _state(folder, digest)
    if state == "other" and not force:
        raise GeneratorError(f"output folder {folder} exists with other content; choose an empty "
                             "or new folder (force=true replaces only a generated input)")
    if force and state in ("same", "other"):
        try:
            manifest = read_manifest(folder)
        except (GeneratorError, ValueError, OSError):
            manifest = None
        if not isinstance(manifest, dict) or "config_hash" not in manifest:
            raise GeneratorError(f"output folder {folder} is not a generated input (no {MANIFEST});"
                                 " force=true replaces only those: remove it or choose another "
                                 "folder")
        foreign = _foreign_files(folder, manifest)
        if foreign:
            more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
            raise GeneratorError(f"output folder {folder} holds files generation did not write "
                                 f"({foreign[0]}{more}); force=true would delete them: remove "
                                 "them or choose another folder")
    return state


def materialize_into(folder: Path, generator: str, resolved: Mapping[str, Any], *, spark=None,
                     progress: bool = True, force: bool = False) -> Path:
    """Generate ``generator(resolved)`` into exactly ``folder`` (reused if already there)."""
    folder = Path(folder).absolute()  # Spark executors may run in another working directory
    code = code_fingerprint()  # once: the manifest records the code the key was made from
    digest = config_hash(generator, resolved, code)
    state = check_target(folder, digest, force)
    if state == "same" and not force:
        return folder
    mod = registry.module(generator)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.parent / f".tmp-{folder.name}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        rows = mod.generate(dict(resolved), tmp, spark, progress)
        manifest = {
            "generator": generator,
            "params": resolved,
            "seed": resolved.get("seed"),
            "config_hash": digest,
            "rows": {t: int(n) for t, n in rows.items()},
            "tables": _table_info(tmp, rows),
            "versions": _versions(code),
            "parquet_options": PARQUET_OPTIONS,
            "produced_by": "spark" if spark is not None else "local",
            "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
        _swap_in(tmp, folder, digest, force)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _swap_in(tmp: Path, folder: Path, digest: str, force: bool = False) -> None:
    """Rename the finished temp folder into place; an old folder is moved aside first. One
    that another process finished meanwhile from the same config stays (unless ``force``):
    that process may be reading it (two sweep points at once, experiments.parallel), and the
    same config gives the same bytes."""
    old = None
    if folder.exists() and not force and _state(folder, digest) == "same":
        return  # the caller removes its temp folder
    if folder.exists():
        old = folder.parent / f".old-{folder.name}-{uuid.uuid4().hex[:8]}"
        os.rename(folder, old)
    try:
        os.rename(tmp, folder)
    except OSError:
        # another process finished the same input first: keep theirs if it is the same config
        if _state(folder, digest) != "same":
            raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _newest_mtime(folder: Path) -> float:
    """The latest modification time of the folder or anything in it (a live writer touches it)."""
    newest = folder.stat().st_mtime
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            try:
                newest = max(newest, os.stat(os.path.join(dirpath, name)).st_mtime)
            except FileNotFoundError:  # removed while we look: the writer is alive
                return float("inf")
    return newest


def sweep_stale(root: Path, max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the leftovers of interrupted runs in a cache root; returns what was removed.

    A killed generation leaves its ``.tmp-*`` folder (and a killed swap its ``.old-*`` one),
    which nothing else removes. A fresh one may belong to a writer still running in another
    process, so only folders in which nothing changed for ``max_age_s`` go: a day is far
    longer than any generation here takes (minutes at the papers' scales) and short enough
    that a crashed run's gigabytes do not pile up for long.
    """
    removed = []
    now = time.time()
    for leftover in sorted([*root.glob(".tmp-*"), *root.glob(".old-*")]):
        try:
            if leftover.is_dir() and now - _newest_mtime(leftover) > max_age_s:
                shutil.rmtree(leftover)
                removed.append(leftover)
        except FileNotFoundError:  # another process swept it first
            pass
    return removed


def materialize(generator: str, params: Mapping[str, Any], *, root: Path | None = None,
                spark=None, progress: bool = True, force: bool = False) -> Path:
    """The cached input folder ``<root>/<generator>-<hash12>``, generated if not there yet.

    ``root`` defaults to ``runtime.paths.DATA_CACHE``. With ``spark`` the chunks are
    written by Spark tasks, otherwise by a local loop; both give the same bytes. Stale
    leftovers of interrupted runs in ``root`` are removed first (:func:`sweep_stale`).
    """
    resolved = resolve(generator, params)
    if root is None:
        from runtime.paths import DATA_CACHE

        root = DATA_CACHE
    if Path(root).is_dir():
        sweep_stale(Path(root))
    folder = Path(root) / f"{generator}-{config_hash(generator, resolved)[:12]}"
    return materialize_into(folder, generator, resolved, spark=spark, progress=progress,
                            force=force)


def table_path(folder: Path | str, table: str) -> Path:
    """The Parquet folder of one table of a generated input (error names the valid tables)."""
    tables = list(read_manifest(folder)["rows"])
    if table not in tables:
        raise GeneratorError(f"unknown table {table!r} in {folder}; valid: {', '.join(tables)}")
    return Path(folder) / f"{table}.parquet"
