"""The independent reference: DuckDB computes the exact join that every algorithm must match.

Rows follow the output convention of :mod:`joins.api` (``l_``/``r_`` prefixes). Comparison is
on multisets of rows: nothing lost, nothing duplicated.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import duckdb
import pandas as pd

_SQL_HOW = {"inner": "INNER", "left": "LEFT OUTER", "right": "RIGHT OUTER", "full": "FULL OUTER"}


def _relation_sql(con: duckdb.DuckDBPyConnection, name: str, data: pd.DataFrame | str | Path) -> str:
    if isinstance(data, pd.DataFrame):
        con.register(name, data)
        return name
    path = Path(data)
    pattern = str(path / "**" / "*.parquet") if path.is_dir() else str(path)
    return f"read_parquet('{pattern}')"


def _condition(on: str, band: float | None) -> str:
    if band is None:
        return f"l.{on} = r.{on}"
    return f"abs(l.{on} - r.{on}) <= {band}"


def _join(left, right, on: str, how: str, band: float | None):
    """A DuckDB connection with both inputs and the ``FROM ... JOIN ... ON ...`` clause."""
    if how not in _SQL_HOW:
        raise ValueError(f"unknown join type {how!r}; valid: {', '.join(_SQL_HOW)}")
    con = duckdb.connect()
    lsql, rsql = _relation_sql(con, "lhs", left), _relation_sql(con, "rhs", right)
    return con, lsql, rsql, f"FROM {lsql} l {_SQL_HOW[how]} JOIN {rsql} r ON {_condition(on, band)}"


def oracle_join(
    left: pd.DataFrame | str | Path,
    right: pd.DataFrame | str | Path,
    on: str = "key",
    how: str = "inner",
    band: float | None = None,
) -> pd.DataFrame:
    """The exact join as a pandas frame with ``l_*`` and ``r_*`` columns."""
    con, lsql, rsql, join = _join(left, right, on, how, band)
    lcols = con.sql(f"SELECT * FROM {lsql} LIMIT 0").columns
    rcols = con.sql(f"SELECT * FROM {rsql} LIMIT 0").columns
    select = ", ".join([f'l."{c}" AS "l_{c}"' for c in lcols] + [f'r."{c}" AS "r_{c}"' for c in rcols])
    return con.sql(f"SELECT {select} {join}").df()


def oracle_count(
    left: pd.DataFrame | str | Path,
    right: pd.DataFrame | str | Path,
    on: str = "key",
    how: str = "inner",
    band: float | None = None,
) -> int:
    """Exact output cardinality, without materialising the rows (for large points)."""
    con, _, _, join = _join(left, right, on, how, band)
    return int(con.sql(f"SELECT count(*) {join}").fetchone()[0])


def _row_multiset(df: pd.DataFrame, columns: list[str]) -> Counter:
    frame = df[columns].astype(object).where(df[columns].notna(), None)
    return Counter(map(tuple, frame.itertuples(index=False, name=None)))


def multiset_diff(actual: pd.DataFrame, expected: pd.DataFrame) -> tuple[Counter, Counter]:
    """(rows missing from actual, rows actual has in excess), compared on expected's columns."""
    columns = sorted(expected.columns)
    missing_cols = set(columns) - set(actual.columns)
    if missing_cols:
        raise AssertionError(f"output lacks columns {sorted(missing_cols)}")
    got, want = _row_multiset(actual, columns), _row_multiset(expected, columns)
    return want - got, got - want


def assert_same_rows(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    """Fail with a readable sample if the multisets of rows differ."""
    missing, extra = multiset_diff(actual, expected)
    if missing or extra:
        raise AssertionError(
            f"join output differs from the oracle: {sum(missing.values())} rows missing "
            f"(e.g. {list(missing)[:3]}), {sum(extra.values())} rows in excess "
            f"(e.g. {list(extra)[:3]}); got {len(actual)} rows, expected {len(expected)}"
        )
