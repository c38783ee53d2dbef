"""The batch join algorithms: every :class:`~joins.declarations.BatchAlgorithm` declared in a
module of this package, found by listing the folder (a new batch algorithm is one module
here, with its test, and no registry line). Importing the package imports none of its
modules; :func:`declared` imports them all (and so pyspark) on first use.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil


@functools.cache
def declared() -> dict:
    """Every declared batch algorithm by name, listed in the registry or not."""
    from joins.declarations import BatchAlgorithm

    found: dict[str, BatchAlgorithm] = {}
    for mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        module = importlib.import_module(f"{__name__}.{mod}")
        for attr, value in vars(module).items():
            if isinstance(value, BatchAlgorithm) and not attr.startswith("_") and \
                    found.setdefault(value.name, value) is not value:
                raise RuntimeError(f"two batch algorithms are named {value.name!r}")
    return found
