"""The independent reference: DuckDB computes the exact join that every algorithm must match.

Rows follow the output convention of :mod:`joins.api` (``l_``/``r_`` prefixes). Comparison is
on multisets of rows: nothing lost, nothing duplicated. :func:`oracle_graph` does the same for
any connected graph of inner equality (or band) edges between n >= 2 inputs, with an optional
event-time window.
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Callable
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
    return "read_parquet('{}')".format(pattern.replace("'", "''"))


def _condition(on: str, band: float | None, types: Callable[[str, str], str] | None = None) -> str:
    """``on`` as the CLIs take it (``k``, ``a,b``, ``left_col=right_col``): every pair equal
    (a null in any key column matches nothing), or one pair within ``band`` (as a range join,
    :func:`_within`; ``types(side, column)`` gives a key column's DuckDB type)."""
    from joins.keys import parse_on

    pairs = parse_on(on).pairs()
    if band is None:
        return " AND ".join(f'l."{a}" = r."{b}"' for a, b in pairs)
    if len(pairs) != 1:
        raise ValueError(f"a band join takes one key column, got on={on!r}")
    (a, b), = pairs
    kinds = (types("l", a), types("r", b)) if types else ("DOUBLE", "DOUBLE")
    return " AND ".join(_within((f'l."{a}"', kinds[0]), (f'r."{b}"', kinds[1]), band))


def _join(left, right, on: str, how: str, band: float | None):
    """A DuckDB connection with both inputs and the ``FROM ... JOIN ... ON ...`` clause."""
    if how not in _SQL_HOW:
        raise ValueError(f"unknown join type {how!r}; valid: {', '.join(_SQL_HOW)}")
    con = duckdb.connect()
    lsql, rsql = _relation_sql(con, "lhs", left), _relation_sql(con, "rhs", right)

    def types(side: str, column: str) -> str:
        rel = con.sql(f"SELECT * FROM {lsql if side == 'l' else rsql} LIMIT 0")
        return str(dict(zip(rel.columns, rel.types, strict=True)).get(column, "DOUBLE"))

    return con, lsql, rsql, (f"FROM {lsql} l {_SQL_HOW[how]} JOIN {rsql} r "
                             f"ON {_condition(on, band, types)}")


def oracle_join(
    left: pd.DataFrame | str | Path,
    right: pd.DataFrame | str | Path,
    on: str = "key",
    how: str = "inner",
    band: float | None = None,
) -> pd.DataFrame:
    """The exact join as a pandas frame with ``l_*`` and ``r_*`` columns."""
    con, select = oracle_join_sql(left, right, on, how, band)
    try:
        return con.sql(select).df()
    finally:
        con.close()


def oracle_join_sql(
    left: pd.DataFrame | str | Path,
    right: pd.DataFrame | str | Path,
    on: str = "key",
    how: str = "inner",
    band: float | None = None,
) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A connection holding the inputs and the exact join's ``SELECT`` (``l_*``/``r_*``
    columns), to compare with an output that is never loaded into Python."""
    con, lsql, rsql, join = _join(left, right, on, how, band)
    lcols = con.sql(f"SELECT * FROM {lsql} LIMIT 0").columns
    rcols = con.sql(f"SELECT * FROM {rsql} LIMIT 0").columns
    select = ", ".join([f'l."{c}" AS "l_{c}"' for c in lcols] + [f'r."{c}" AS "r_{c}"' for c in rcols])
    return con, f"SELECT {select} {join}"


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


# --- Any join graph: n inputs, equality or band edges, an optional event-time window ----------

# Integer columns whose band/window test is an exact HUGEINT range ("NULL": an all-null column).
_INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                            "UINTEGER", "UBIGINT", "NULL", '"NULL"'})
_OTHER_NUMERIC = ("HUGEINT", "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL")
# Relative widening of the DOUBLE range that pre-selects band/window candidates: far above the
# rounding of one subtraction (2**-24 for FLOAT, 2**-53 for DOUBLE), so the range is a superset.
_SLACK = 1e-6
_MAX_INT_WIDTH = 2**65  # two 64-bit integers (signed or not) differ by less than this


def _quote(identifier: str) -> str:
    return '"' + str(identifier).replace('"', '""') + '"'


def _width(what: str, value) -> float:
    """A band or window as a float: a finite number >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {value!r}")
    return number


def _within(a: tuple[str, str], b: tuple[str, str], width: float, param: str | None = None,
            params: dict[str, float] | None = None) -> list[str]:
    """SQL conditions meaning ``abs(a - b) <= width`` for numeric ``(expression, type)`` pairs.

    Written as a range on ``a`` so that DuckDB plans a range join (an abs() filter alone is a
    nested loop over the cross product: minutes at 200k x 200k rows). For two integer columns
    the range is the test itself, in HUGEINT (no overflow); otherwise it is a slightly wider
    DOUBLE range followed by the exact ``abs(a - b) <= width`` of :func:`oracle_join`. The
    width is the query parameter ``$param`` (set in ``params``), or a literal without one.
    """
    (ea, ta), (eb, tb) = a, b
    if ta in _INTEGER_TYPES and tb in _INTEGER_TYPES:
        w = min(math.floor(width), _MAX_INT_WIDTH)
        return [f"{ea}::HUGEINT >= {eb}::HUGEINT - {w}", f"{ea}::HUGEINT <= {eb}::HUGEINT + {w}"]
    if param is None:
        value = repr(float(width))
    else:
        value = f"${param}"
        params[param] = width
    slack = f"({value} * {1 + _SLACK!r} + abs({eb}::DOUBLE) * {_SLACK!r})"
    return [f"{ea}::DOUBLE >= {eb}::DOUBLE - {slack}", f"{ea}::DOUBLE <= {eb}::DOUBLE + {slack}",
            f"abs({ea} - {eb}) <= {value}"]


def _components(names: list[str], edges: list[tuple[str, str, str, str]]) -> list[list[str]]:
    """The connected components of the inputs under the edges, in input order."""
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for a, _, b, _ in edges:
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def _graph(inputs, edges, band, window, time, prefixes):
    """Check the arguments; return a DuckDB connection holding the inputs, the query's
    ``FROM ... WHERE ...``, its parameters and the SELECT list of prefixed columns."""
    if not isinstance(inputs, dict) or len(inputs) < 2:
        raise ValueError(f"oracle_graph needs at least 2 named inputs, got {len(inputs or {})}")
    names = list(inputs)
    band = None if band is None else _width("band", band)
    if window is None and time is not None:
        raise ValueError(f"time={time!r} without a window; pass window= too (or drop time)")
    if window is not None:
        window = _width("window", window)
        if time is None:
            raise ValueError("window needs time=, the event-time column present in every input")
    prefixes = dict(prefixes or {})
    unknown = sorted(set(prefixes) - set(inputs))
    if unknown:
        raise ValueError(f"prefixes for unknown inputs {unknown}; inputs: {names}")

    edges = [tuple(e) for e in edges]
    bad = [e for e in edges if len(e) != 4]
    if bad:
        raise ValueError(f"edges are (input_a, column_a, input_b, column_b); got {bad}")
    unknown = sorted({str(n) for a, _, b, _ in edges for n in (a, b) if n not in inputs})
    if unknown:
        raise ValueError(f"edges name unknown inputs {unknown}; inputs: {names}")
    loops = [e for e in edges if e[0] == e[2]]
    if loops:
        raise ValueError(f"an edge must join two different inputs: {loops} (to self-join, "
                         "pass the same data under two names)")
    components = _components(names, edges)
    if len(components) > 1:
        apart = [n for group in components[1:] for n in group]
        raise ValueError(f"the edges do not connect all inputs: {apart} not connected to "
                         f"{components[0]} (components: {components})")

    con = duckdb.connect()
    try:
        body, params, select = _query(con, inputs, edges, band, window, time, prefixes)
    except BaseException:
        con.close()
        raise
    return con, body, params, select


def _query(con, inputs, edges, band, window, time, prefixes):
    """Register the inputs on ``con``; check columns, types and output names; build the query."""
    names = list(inputs)
    alias, columns, types = {}, {}, {}
    relations = []
    for i, (name, data) in enumerate(inputs.items()):
        alias[name] = f"t{i}"
        rel = _relation_sql(con, f"_oracle_input_{i}", data)
        schema = con.sql(f"SELECT * FROM {rel} LIMIT 0")
        columns[name] = list(schema.columns)
        types[name] = dict(zip(schema.columns, map(str, schema.types), strict=True))
        relations.append(f"{rel} AS t{i}")
    missing = sorted({f"{n}.{c}" for a, ca, b, cb in edges for n, c in ((a, ca), (b, cb))
                      if c not in types[n]})
    if missing:
        raise ValueError(f"edges name unknown columns {missing}; columns: {columns}")
    if time is not None:
        lacking = [n for n in inputs if time not in types[n]]
        if lacking:
            raise ValueError(f"time column {time!r} missing from inputs {lacking}")

    def ref(name, col) -> tuple[str, str]:
        return f"{alias[name]}.{_quote(col)}", types[name][col]

    def numeric(what, refs) -> None:
        bad = sorted({f"{n}.{c} ({types[n][c]})" for n, c in refs
                      if not (types[n][c] in _INTEGER_TYPES
                              or types[n][c].startswith(_OTHER_NUMERIC))})
        if bad:
            raise ValueError(f"{what} needs numeric columns; not numeric: {bad}")

    conditions: list[str] = []
    params: dict[str, float] = {}
    if band is None:
        conditions += [f"{ref(a, ca)[0]} = {ref(b, cb)[0]}" for a, ca, b, cb in edges]
    else:
        numeric("band", [(n, c) for a, ca, b, cb in edges for n, c in ((a, ca), (b, cb))])
        for a, ca, b, cb in edges:
            conditions += _within(ref(a, ca), ref(b, cb), band, "band", params)
    if window is not None:
        numeric("window", [(n, time) for n in inputs])
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                conditions += _within(ref(a, time), ref(b, time), window, "window", params)

    select, out = [], []
    for name in inputs:
        prefix = prefixes.get(name, f"{name}_")
        for col in columns[name]:
            select.append(f"{ref(name, col)[0]} AS {_quote(prefix + col)}")
            out.append(prefix + col)
    seen = Counter(c.casefold() for c in out)
    clashes = sorted({c for c in out if seen[c.casefold()] > 1})
    if clashes:
        raise ValueError(f"output columns clash {clashes}; choose other prefixes")
    body = f"FROM {', '.join(relations)} WHERE {' AND '.join(conditions)}"
    return body, params, ", ".join(select)


def oracle_graph(
    inputs: dict[str, pd.DataFrame | str | Path],
    edges: list[tuple[str, str, str, str]],
    *,
    band: float | None = None,
    window: float | None = None,
    time: str | None = None,
    prefixes: dict[str, str] | None = None,
) -> pd.DataFrame:
    """The exact inner join of n >= 2 named inputs along a connected graph of edges.

    ``inputs`` maps names to pandas frames or Parquet files/folders; their insertion order is
    the output's column order, each input's columns prefixed ``<name>_`` unless ``prefixes``
    maps the name to another prefix. Each edge ``(input_a, column_a, input_b, column_b)`` is
    ``a.column_a = b.column_b``, or ``abs(a.column_a - b.column_b) <= band`` when a band is
    given (numeric columns); nulls never match. With ``window`` and ``time`` (a numeric column
    of every input) a row is kept only if its tuples' times lie within ``window`` of each other,
    i.e. ``max(times) - min(times) <= window``; a null time never qualifies. Multiset semantics:
    duplicate input rows give duplicate output rows. Unknown inputs or columns, edges that leave
    inputs disconnected, a window without ``time`` and a negative or non-finite band/window all
    raise ValueError. ``oracle_graph({"R": r, "S": s}, [("R", "key", "S", "key")],
    prefixes={"R": "l_", "S": "r_"})`` is ``oracle_join(r, s, "key")``.
    """
    con, sql, params = oracle_graph_sql(inputs, edges, band=band, window=window, time=time,
                                        prefixes=prefixes)
    try:
        return con.execute(sql, params).df()
    finally:
        con.close()


def oracle_graph_sql(
    inputs: dict[str, pd.DataFrame | str | Path],
    edges: list[tuple[str, str, str, str]],
    *,
    band: float | None = None,
    window: float | None = None,
    time: str | None = None,
    prefixes: dict[str, str] | None = None,
) -> tuple[duckdb.DuckDBPyConnection, str, dict[str, float]]:
    """A connection holding the inputs, :func:`oracle_graph`'s ``SELECT`` with the same
    arguments and its parameters (``con.execute(sql, params)``), to compare with an output
    without loading the join into Python; the caller closes the connection."""
    con, body, params, select = _graph(inputs, edges, band, window, time, prefixes)
    return con, f"SELECT {select} {body}", params


def oracle_graph_count(
    inputs: dict[str, pd.DataFrame | str | Path],
    edges: list[tuple[str, str, str, str]],
    *,
    band: float | None = None,
    window: float | None = None,
    time: str | None = None,
    prefixes: dict[str, str] | None = None,
) -> int:
    """``len(oracle_graph(...))`` with the same arguments, without materialising the rows."""
    con, body, params, _ = _graph(inputs, edges, band, window, time, prefixes)
    try:
        return int(con.execute(f"SELECT count(*) {body}", params).fetchone()[0])
    finally:
        con.close()


def count_difference(con: duckdb.DuckDBPyConnection, select: str, mine: str,
                     params: dict | None = None) -> tuple[int, int]:
    """(rows ``select`` has that ``mine`` lacks, rows ``mine`` has in excess), counted with
    multiplicity on ``select``'s columns: each side's distinct rows with their counts, matched
    null-safely. The same answer as EXCEPT ALL both ways, in two hash aggregations and one hash
    join (EXCEPT ALL numbers every row: about 3x slower on 4.6M rows)."""
    names = [d[0] for d in con.execute(f"SELECT * FROM ({select}) LIMIT 0",
                                       params or {}).description]
    cols = ", ".join(f'"{c}"' for c in names)
    same = " AND ".join(f'a."{c}" IS NOT DISTINCT FROM b."{c}"' for c in names)
    missing, extra = con.execute(
        f"WITH a AS (SELECT {cols}, count(*) AS n FROM ({select}) GROUP BY ALL), "
        f"b AS (SELECT {cols}, count(*) AS n FROM {mine} GROUP BY ALL) "
        "SELECT coalesce(sum(greatest(coalesce(a.n, 0) - coalesce(b.n, 0), 0)), 0), "
        "coalesce(sum(greatest(coalesce(b.n, 0) - coalesce(a.n, 0), 0)), 0) "
        f"FROM a FULL OUTER JOIN b ON {same}", params or {}).fetchone()
    return int(missing), int(extra)


def multiset_mismatch(output: str | Path | pd.DataFrame, left, right, on: str,
                      how: str) -> tuple[int, int]:
    """(rows DuckDB's join has that ``output`` lacks, rows ``output`` has in excess), counted
    with multiplicity (nulls compare equal) on the oracle's columns (an output's own extra
    columns, e.g. the online engine's ``phase``, are not compared). ``output``: a folder of
    Parquet files or a frame; ``left``, ``right``: paths or frames."""
    con, select = oracle_join_sql(left, right, on, how)
    try:
        if isinstance(output, pd.DataFrame):
            con.register("_output_rows", output)
            mine = "_output_rows"
        else:
            mine = "read_parquet('{}')".format(
                str(Path(output) / "*.parquet").replace("'", "''"))
        return count_difference(con, select, mine)
    finally:
        con.close()
