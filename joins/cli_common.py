"""What the batch CLI (:mod:`joins.cli`) and the online one (:mod:`joins.online.cli`) share:
the usage error and the checks made before Spark starts. In a module of their own because
``joins.cli`` hands ``stream`` to the online CLI: importing them from ``joins.cli`` made the
two CLI modules import each other."""

from __future__ import annotations

from pathlib import Path
from typing import Any


class CliError(ValueError):
    pass


def parquet_schema(path: str) -> Any:
    import pyarrow.dataset as ds

    p = Path(path)
    if not p.exists():
        raise CliError(f"input {path} does not exist")
    try:
        return ds.dataset(str(p), format="parquet").schema
    except Exception as exc:
        raise CliError(f"input {path} is not readable as Parquet: {exc}") from None


def check_key(schemas: dict[str, Any], on: str) -> None:
    types = {}
    for side, schema in schemas.items():
        if on not in schema.names:
            raise CliError(f"key column {on!r} is not in {side} (columns: {', '.join(schema.names)})")
        types[side] = schema.field(on).type
    if len(set(map(str, types.values()))) > 1:
        raise CliError("key column types differ: " + ", ".join(f"{s}: {t}" for s, t in types.items()))


def spark_preset_or_usage_error(name: str) -> dict[str, Any]:
    """A Spark preset's session keywords; an unknown one is a usage error."""
    from runtime.spark_session import SparkConfigError, spark_preset

    try:
        return spark_preset(name)
    except SparkConfigError as exc:
        raise CliError(str(exc)) from None
