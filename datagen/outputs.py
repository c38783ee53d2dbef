"""Can an output path be written? Tested by writing there, before anything is generated.

``os.access`` is no test: it says yes to root even where nothing can be created (``/proc``,
a read-only mount). Shared by the command-line tools (``python -m datagen`` and, a layer up,
``python -m joins``), so every one of them refuses an unwritable output in one line before Spark
starts.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from datagen.errors import GeneratorError


def probe_writable(path: Path | str) -> None:
    """Create ``path``'s missing parent folders and a probe file in its parent, then remove
    what was created; a one-line :class:`GeneratorError` saying why if that fails."""
    path = Path(path)
    parent = path.absolute().parent
    missing = []
    folder = parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    if not folder.is_dir():
        raise GeneratorError(f"cannot write {path}: {folder} is not a folder")
    created: list[Path] = []
    where = folder  # the folder in which something is being created
    try:
        for d in reversed(missing):
            where = d.parent
            d.mkdir()
            created.append(d)
        where = parent
        fd, probe = tempfile.mkstemp(prefix=".probe-", dir=parent)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GeneratorError(f"cannot write {path}: cannot create anything in {where} "
                             f"({e.strerror or e})") from None
    finally:
        for d in reversed(created):
            with contextlib.suppress(OSError):
                d.rmdir()
