"""Code shipping: the project's packages as one zip for a real cluster's executors, which
:func:`runtime.spark_session.get_spark` adds to every session on a non-local master."""

from __future__ import annotations

import hashlib
import io
import os
import uuid
import zipfile
from pathlib import Path

from runtime import paths

# every package an executor may import: the bottom package too, which the others import
PROJECT_PACKAGES = ("runtime", "datagen", "joins", "experiments")


def package_bytes(*pkgs: Path) -> bytes:
    """A zip of the packages' ``.py`` sources with fixed names and timestamps.

    The same sources give the same bytes, so its hash is the code fingerprint in datagen's
    cache key (:func:`datagen.cache.code_fingerprint`) and names the project zip shipped to a
    cluster's executors (:func:`project_zip`).
    """
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for pkg in pkgs:
            for f in sorted(pkg.rglob("*.py")):
                info = zipfile.ZipInfo(str(f.relative_to(pkg.parent)),
                                       date_time=(2000, 1, 1, 0, 0, 0))
                zf.writestr(info, f.read_bytes())
    return buf.getvalue()


def package_zip(*pkgs: Path, name: str) -> Path:
    """A zip of the packages named by its content hash, for Spark executors to import."""
    data = package_bytes(*pkgs)
    dest = paths.SCRATCH / "pyfiles" / f"{name}-{hashlib.sha256(data).hexdigest()[:12]}.zip"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(f".{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    return dest


def ships_code(url: str) -> bool:
    """Whether executors need the project's code shipped: local masters (also local-cluster,
    whose executors inherit this machine's PYTHONPATH) import it from the checkout; a real
    cluster's executors run tasks that call into ``joins`` (the online engine's worker steps,
    the generators' chunk jobs) without it."""
    return not url.startswith("local")


def project_zip() -> Path:
    """The project's packages as one zip named by its content hash (rebuilt when code changes)."""
    return package_zip(*(paths.ROOT / p for p in PROJECT_PACKAGES), name="project")
