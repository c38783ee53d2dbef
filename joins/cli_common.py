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


def parquet_rows(path: str | Path) -> int:
    """Rows of a Parquet file or folder, from its metadata only."""
    import pyarrow.dataset as ds

    return ds.dataset(str(path), format="parquet").count_rows()


def check_key(schemas: dict[str, Any], on: str) -> None:
    """``on=`` (``k``, ``a,b``, ``left_col=right_col``; :func:`joins.keys.parse_on`) names
    columns of both sides (the first and second schema) of the same types, pair by pair."""
    from joins.keys import KeySpecError, parse_on

    try:
        keys = parse_on(on)
    except KeySpecError as exc:
        raise CliError(str(exc)) from None
    (lside, lschema), (rside, rschema) = schemas.items()
    for side, schema, cols in ((lside, lschema, keys.left), (rside, rschema, keys.right)):
        for c in cols:
            if c not in schema.names:
                raise CliError(f"key column {c!r} is not in {side} "
                               f"(columns: {', '.join(schema.names)})")
    for a, b in keys.pairs():
        ta, tb = lschema.field(a).type, rschema.field(b).type
        if str(ta) != str(tb):
            what = f"{a!r}" if a == b else f"{a!r} and {b!r}"
            raise CliError(f"key column types differ for {what}: {lside}: {ta}, {rside}: {tb}")


def spark_preset_or_usage_error(name: str) -> dict[str, Any]:
    """A Spark preset's session keywords; an unknown one is a usage error."""
    from runtime.spark_session import SparkConfigError, spark_preset

    try:
        return spark_preset(name)
    except SparkConfigError as exc:
        raise CliError(str(exc)) from None
