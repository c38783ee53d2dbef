"""The one registry of input generators: name -> "module:function", imported lazily.

A generator module exposes ``generate(params: dict, out: Path, spark, progress: bool) ->
dict[str, int]`` (rows per table, each table written as ``out/<TABLE>.parquet/part-*.parquet``)
and a ``Params`` dataclass (defaults; unknown keys are rejected with the valid names). A module
may also define ``resolve(raw) -> dict`` when its parameters are not one flat dataclass
(``stream`` takes the parameters of the chosen arrival order).
"""

from __future__ import annotations

import importlib
from types import ModuleType

from datagen.errors import GeneratorError

GENERATORS: dict[str, str] = {
    "dpair": "datagen.dpair:generate",  # AM-Join D(alpha, S) pair of relations
    "smalllarge": "datagen.smalllarge:generate",  # AM-Join Fig 9 small-large outer join
    "stream": "datagen.stream:generate",  # R and S with an arrival order (online operators)
    "tpch": "datagen.tpch:generate",  # TPC-H with Zipf-skewed foreign keys
    "squall_query": "datagen.squall_query:generate",  # the Squall paper's join inputs
    "diner_streams": "datagen.diner_streams:generate",  # DINER's timed R and S streams
    "stock_trace": "datagen.stock_trace:generate",  # DINER's CSCO/IPIX stand-in
    "weather_trace": "datagen.weather_trace:generate",  # DINER's weather stand-in
    "miner_chain": "datagen.miner_chain:generate",  # MINER's chain and star inputs
    "dcape_streams": "datagen.dcape_streams:generate",  # D-CAPE's timed 3-way streams
    "bistream_streams": "datagen.bistream_streams:generate",  # BiStream's Q5/Q7/Band streams
}


def names() -> list[str]:
    return sorted(GENERATORS)


def module(name: str) -> ModuleType:
    """The generator's module; a clear error for an unknown name or a missing module."""
    target = GENERATORS.get(name)
    if target is None:
        raise GeneratorError(f"unknown generator {name!r}; valid: {', '.join(names())}")
    mod_name = target.partition(":")[0]
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as e:
        if e.name != mod_name:
            raise
        raise GeneratorError(f"generator {name!r} is registered but {mod_name} is not "
                             "available yet") from e


def describe(name: str) -> str:
    """First docstring line of the generator's module, or why it cannot be loaded."""
    try:
        doc = (module(name).__doc__ or "").strip().splitlines()
    except GeneratorError as e:
        return f"(unavailable: {e})"
    except Exception as e:  # a broken module must not break `list`
        return f"(unavailable: {type(e).__name__}: {e})"
    return doc[0] if doc else ""
