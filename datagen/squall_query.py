"""squall_query: the two join inputs R and S of a Squall-paper query (Table 1, catalogue 4.2).

"All intermediate results are materialized before online processing" (Squall 5): each query is
one binary join of a small pre-joined/selected side R and a large side S, both taken from the
(skewed) TPC-H of :mod:`datagen.tpch` and projected to what the query needs. The join key is the
column ``key`` on both sides; band joins put the band attribute there and join when
``|R.key - S.key| <= band``. The paper gives the queries in its tech report [15]; the
selections below follow the Squall repository's query plans (catalogue 4.2, tag [X]) and are
confirmed by its sizes: at SF 0.01 B_NCI has exactly 341 + 15010 inputs and 1073 results.

========== ===== ====================================================== ====================
query      join  R                                                      S
========== ===== ====================================================== ====================
eq5        equi  REGION(r_name=region) x NATION x SUPPLIER: s_suppkey,  LINEITEM: l_suppkey,
                 n_name                                                 orderkey, price, disc
eq7        equi  SUPPLIER x NATION(n_name in nations): s_suppkey,       LINEITEM(shipdate in
                 n_name                                                 1995..1996): l_suppkey,
                                                                        orderkey, year, volume
bnci       band1 LINEITEM(shipmode=TRUCK, quantity>48): l_orderkey      LINEITEM(shipinstruct=
                                                                        NONE): l_orderkey
bnci_2_32  band1 as bnci with quantity>45 (Fig 5g's (2,32) variant)     as bnci
bnci_8_8   band1 LINEITEM(shipinstruct=NONE) (Fig 5g's (8,8) variant)   as bnci
bci        band1 LINEITEM(shipmode=TRUCK, quantity>45): shipdate as     LINEITEM(shipmode<>
                 yyyymmdd integer (date_key)                            TRUCK): shipdate
fluct      equi  ORDERS(priority not in 5-LOW, 1-URGENT): o_orderkey    LINEITEM: l_orderkey
========== ===== ====================================================== ====================

B_CI's band key is the ship date as a yyyymmdd integer by default (``date_key=yyyymmdd``), as
Squall's own B_CI plan compares it (``ThetaLineitemSelfJoin`` with its ``DateIntegerType``):
|d1 - d2| <= 1 on that encoding matches consecutive days within a month but not across a month
boundary (19950131 and 19950201 are 70 apart), which is what the Squall code's 10G output of
54.206 billion results counts. ``date_key=days`` (days since 1970-01-01) is the switch: it
also matches across month boundaries, about 2% more results.

Which columns are skewed (``skew``). The paper draws its databases with Chaudhuri and
Narasayya's skewed TPC-D generator [10] and does not say which attributes are skewed; that
generator draws every column's values from Zipf(z) (each ``RANDOM`` of their ``build.c``,
among them ``s_nationkey`` and the dates ``l_shipdate`` is made of), foreign keys included.
``skew=foreign_keys`` (the default) redraws only ``columns`` (the lineitem foreign keys), so a
query that selects on other columns has the same inputs at every z; ``skew=query_columns`` also
redraws every column a query filters or joins on (``Query.reads``: ``s_nationkey`` of E_Q5's
and E_Q7's Supplier x Nation, E_Q7's ``l_shipdate``, the band joins' and Fluct-join's
selection columns), each by :mod:`datagen.tpch`'s one draw (Zipf over the column's distinct
values or referenced keys, the hottest value a seeded pick). NATION and REGION are fixed lists
in dbgen and in [10], so ``n_name``, ``r_name`` and ``n_regionkey`` are not redrawn. At z = 0
both readings give the unskewed TPC-H, row for row.

Rows keep TPC-H file order (S of eq5 is LINEITEM in generation order); small pre-joined sides
are sorted by key. Arrival orders are the ``stream`` generator's job. Projections and pre-joins
run in DuckDB, one task per part of the base table a side selects from (Spark tasks with a
session, else in process), one task for a pre-joined side; the base tables come from the input
cache (``tpch`` generator with the same sf, z, seed and skew columns), so all queries of one
database share one generation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from datagen import tpch
from datagen.chunks import PARQUET_OPTIONS, ChunkJob, part_path, run_jobs
from datagen.params import check, validate

NAME = "squall_query"
REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = ("ALGERIA", "ARGENTINA", "BRAZIL", "CANADA", "EGYPT", "ETHIOPIA", "FRANCE", "GERMANY",
           "INDIA", "INDONESIA", "IRAN", "IRAQ", "JAPAN", "JORDAN", "KENYA", "MOROCCO",
           "MOZAMBIQUE", "PERU", "CHINA", "ROMANIA", "SAUDI ARABIA", "VIETNAM", "RUSSIA",
           "UNITED KINGDOM", "UNITED STATES")
# Every base table any query reads: one cached TPC-H per (sf, z, seed, columns) serves all.
BASE_TABLES = ("region", "nation", "supplier", "orders", "lineitem")
ROW_GROUP_ROWS = 1 << 20
# Readings of which columns the paper's skewed TPC-H generator [10] draws from Zipf (the paper
# does not say; the module docstring): only the foreign keys in Params.columns, or those and
# every column a query filters or joins on (Query.reads), as [10] draws every column.
SKEW_READINGS = ("foreign_keys", "query_columns")


@dataclass(frozen=True)
class Reference:
    """Sizes a source reports for this query, to check ours against (scaled to our sf)."""

    gb: float  # database size they refer to (GB = TPC-H scale factor)
    r: float
    s: float
    output: float | None  # join result size, if reported
    output_power: int  # output grows like sf**power (1: key domain grows with sf; 2: fixed)
    source: str


@dataclass(frozen=True)
class Query:
    name: str
    predicate: str  # "equi" or "band"
    band: int  # R, S tuples join when |R.key - S.key| <= band (0 for equi-joins)
    r_sql: str  # DuckDB SQL over {lineitem}, {orders}, ... with {region}/{nations} filled in
    s_sql: str
    references: tuple[Reference, ...]
    description: str
    # the skewable TPC-H columns (datagen.tpch.SKEWABLE) its selections, pre-joins and join
    # read: what Params.skew = "query_columns" adds (NATION and REGION are fixed tables)
    reads: tuple[str, ...] = ()


_TRUCK_R = "SELECT {key} AS key FROM {lineitem} WHERE l_shipmode = 'TRUCK' AND l_quantity > {q}"
_NONE_S = "SELECT l_orderkey AS key FROM {lineitem} WHERE l_shipinstruct = 'NONE'"
_BNCI_READS = ("l_shipmode", "l_quantity", "l_orderkey", "l_shipinstruct")
# B_CI's ship-date key, by Params.date_key (filled into {date_key} by side_sql)
DATE_KEYS = {
    "yyyymmdd": "CAST(year(l_shipdate) * 10000 + month(l_shipdate) * 100 + day(l_shipdate) "
                "AS BIGINT)",
    "days": "CAST(l_shipdate - DATE '1970-01-01' AS BIGINT)",
}

QUERIES: dict[str, Query] = {q.name: q for q in [
    Query("eq5", "equi", 0,
          "SELECT s_suppkey AS key, n_name FROM {region} JOIN {nation} ON n_regionkey = "
          "r_regionkey JOIN {supplier} ON s_nationkey = n_nationkey WHERE r_name = {region_name} "
          "ORDER BY key",
          "SELECT l_suppkey AS key, l_orderkey, l_extendedprice, l_discount FROM {lineitem}",
          (Reference(10, 20_000, 60_000_000, None, 1, "[D] catalogue 4.2: ~20K R*N*S vs 60M"),),
          "(Region x Nation x Supplier) x Lineitem on suppkey; TPC-H Q5's costliest join",
          ("s_nationkey", "l_suppkey")),
    Query("eq7", "equi", 0,
          "SELECT s_suppkey AS key, n_name FROM {supplier} JOIN {nation} ON s_nationkey = "
          "n_nationkey WHERE n_name IN ({nation_names}) ORDER BY key",
          "SELECT l_suppkey AS key, l_orderkey, CAST(year(l_shipdate) AS INTEGER) AS l_year, "
          "l_extendedprice * (1 - l_discount) AS volume FROM {lineitem} "
          "WHERE l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'",
          # the catalogue's ~17M for S is a guess; 2 of the ~6.6 years of ship dates give 30%
          (Reference(10, 8_000, 18_000_000, None, 1, "[D] 2/25 nations; 30% of 60M lineitems"),),
          "(Supplier x Nation) x Lineitem on suppkey; TPC-H Q7's costliest join",
          ("s_nationkey", "l_suppkey", "l_shipdate")),
    Query("bnci", "band", 1,
          _TRUCK_R.format(key="l_orderkey", lineitem="{lineitem}", q=48), _NONE_S,
          (Reference(0.01, 341, 15_010, 1_073, 1, "[X] Squall code, 0.01G: 341 + 15010, 1073"),
           Reference(20, 680_000, 30_000_000, None, 1, "[P] Squall 5.3: 20GB, 0.68M + 30M"),
           Reference(40, 1_360_000, 60_000_000, None, 1, "[P] Squall 5.3: 40GB, 1.36M + 60M")),
          "Lineitem self band-join on orderkey, low selectivity (not computation-intensive)",
          _BNCI_READS),
    Query("bnci_2_32", "band", 1,
          _TRUCK_R.format(key="l_orderkey", lineitem="{lineitem}", q=45), _NONE_S,
          (Reference(0.01, 873, 15_010, 2_719, 1, "[X] Squall code, 0.01G: 873 + 15010, 2719"),),
          "B_NCI with a larger R: optimal mapping (2,32) at J=64 (Fig 5g)", _BNCI_READS),
    Query("bnci_8_8", "band", 1, _NONE_S, _NONE_S,
          (Reference(0.01, 15_010, 15_010, 56_346, 1, "[X] Squall code, 0.01G: 2 x 15010, 56346"),),
          "B_NCI with equal sides: optimal mapping (8,8) at J=64 (Fig 5g)",
          ("l_orderkey", "l_shipinstruct")),
    Query("bci", "band", 1,
          _TRUCK_R.format(key="{date_key}", lineitem="{lineitem}", q=45),
          "SELECT {date_key} AS key FROM {lineitem} WHERE l_shipmode <> 'TRUCK'",
          (Reference(10, 873_000, 51_465_000, 54_206_000_000, 2,
                     "[X] Squall code, 10G: 873.000 + 51.465.000, output 54.206.000.000"),),
          "Lineitem self band-join on shipdate (yyyymmdd, or days: Params.date_key), high "
          "selectivity (computation-intensive)", ("l_shipmode", "l_quantity", "l_shipdate")),
    Query("fluct", "equi", 0,
          "SELECT o_orderkey AS key FROM {orders} "
          "WHERE o_orderpriority NOT IN ('5-LOW', '1-URGENT')",
          "SELECT l_orderkey AS key FROM {lineitem}",
          (Reference(8, 7_200_000, 48_000_000, None, 1, "[D] catalogue 4.2: 3/5 of 12M, 48M"),),
          "Orders x Lineitem on orderkey (Fluct-join of Fig 5k/5l)",
          ("o_orderpriority", "l_orderkey")),
]}


@dataclass(frozen=True)
class Params:
    query: str = "eq5"  # one of QUERIES
    sf: float = 1.0
    z: float = 0.0  # Zipf skew of the base TPC-H (Z0..Z4 = 0, .25, .5, .75, 1)
    seed: int = 0
    columns: tuple[str, ...] = tpch.DEFAULT_COLUMNS  # skewed TPC-H columns (datagen.tpch)
    # which columns Zipf(z) redraws (SKEW_READINGS): "foreign_keys" = ``columns`` only;
    # "query_columns" = ``columns`` and every column a Squall query filters or joins on
    skew: str = "foreign_keys"
    suppkey_from_partkey: bool = False  # see datagen.tpch
    region: str = "AMERICA"  # eq5's region (Squall code; TPC-H Q5's default is ASIA)
    nations: tuple[str, ...] = ("PERU", "ETHIOPIA")  # eq7's nations (Squall code)
    tpch_cache: str = ""  # where the base TPC-H is cached ("" = runtime.paths.DATA_CACHE)
    parts: int = 0  # the base TPC-H's parts (datagen.tpch): a selection side has as many
    # B_CI's band key: the ship date as a yyyymmdd integer (Squall's DateIntegerType, the
    # default) or as days since 1970-01-01 ("days"); see the module docstring
    date_key: str = "yyyymmdd"

    def __post_init__(self) -> None:
        check(self.query in QUERIES,
              f"unknown query {self.query!r}; valid: {', '.join(QUERIES)}")
        check(self.region in REGIONS,
              f"unknown region {self.region!r}; valid: {', '.join(REGIONS)}")
        for n in self.nations:
            check(n in NATIONS, f"unknown nation {n!r}; valid: {', '.join(NATIONS)}")
        check(len(self.nations) > 0, "nations must name at least one nation")
        check(self.date_key in DATE_KEYS,
              f"unknown date_key {self.date_key!r}; valid: {', '.join(DATE_KEYS)}")
        check(self.skew in SKEW_READINGS,
              f"unknown skew reading {self.skew!r}; valid: {', '.join(SKEW_READINGS)}")
        self.tpch_params()  # range checks of sf, z, seed, columns

    def tpch_params(self) -> dict:
        params = {"sf": self.sf, "z": self.z, "seed": self.seed, "columns": skewed_columns(self),
                  "tables": list(BASE_TABLES),
                  "suppkey_from_partkey": self.suppkey_from_partkey, "parts": self.parts}
        validate(tpch.Params, params, "generator 'tpch'")
        return params


def skewed_columns(p: Params) -> list[str]:
    """The TPC-H columns the base database skews under ``p.skew`` (see :data:`SKEW_READINGS`).

    "query_columns" takes the union over every query, so that one cached database (per sf, z
    and seed) serves all of them, as one skewed database served all of the paper's queries.
    """
    if p.skew == "foreign_keys":
        return list(p.columns)
    wanted = set(p.columns).union(*(q.reads for q in QUERIES.values()))
    return [c for c in tpch.SKEWABLE if c in wanted]  # a fixed order: one cache key


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def side_sql(p: Params, template: str, tables: dict[str, str]) -> str:
    """One side's DuckDB SQL with each base table ``{t}`` read from the Parquet glob
    ``tables[t]`` and the query's parameters filled in."""
    names = {t: f"read_parquet('{glob}')" for t, glob in tables.items()}
    names["region_name"] = _quote(p.region)
    names["nation_names"] = ", ".join(_quote(n) for n in p.nations)
    names["date_key"] = DATE_KEYS[p.date_key]
    return template.format(**names)


def whole_tables(base: Path) -> dict[str, str]:
    return {t: f"{base / (t + '.parquet')}/*.parquet" for t in BASE_TABLES}


def query_sql(p: Params, base: Path) -> tuple[str, str]:
    """The DuckDB SQL of R and S over the TPC-H tables in folder ``base``."""
    q = QUERIES[p.query]
    return side_sql(p, q.r_sql, whole_tables(base)), side_sql(p, q.s_sql, whole_tables(base))


def write_query(con, sql: str, table_dir: Path, row_group_rows: int = ROW_GROUP_ROWS,
                index: int = 0) -> int:
    """Stream a query's result into ``table_dir/part-<index>.parquet`` (project writer options).

    Row groups hold exactly ``row_group_rows`` rows (the last one fewer), however DuckDB cuts
    its batches (which may depend on its thread count), so the bytes depend only on the rows.
    """
    table_dir.mkdir(parents=True, exist_ok=True)
    reader = con.execute(sql).to_arrow_reader(row_group_rows)
    rows, buffer, buffered = 0, [], 0
    with pq.ParquetWriter(part_path(table_dir, index), reader.schema, **PARQUET_OPTIONS) as w:
        for batch in reader:
            buffer.append(batch)
            buffered += batch.num_rows
            if buffered < row_group_rows:
                continue
            table = pa.Table.from_batches(buffer, reader.schema)
            full = buffered - buffered % row_group_rows
            w.write_table(table.slice(0, full), row_group_size=row_group_rows)
            rest = table.slice(full)
            buffer, buffered = rest.to_batches(), rest.num_rows
            rows += full
        if buffered or rows == 0:
            w.write_table(pa.Table.from_batches(buffer, reader.schema),
                          row_group_size=row_group_rows)
            rows += buffered
    return rows


def write_side(job: ChunkJob) -> int:
    """Task: run one side's SQL (over whole tables, or over one part of one table) in DuckDB."""
    import duckdb

    con = duckdb.connect()
    try:
        # insertion order is DuckDB's default; set it anyway: the row order depends on it
        con.execute("SET preserve_insertion_order = true")
        return write_query(con, job.args["sql"], Path(job.out), index=job.index)
    finally:
        con.close()


def side_jobs(p: Params, side: str, template: str, base: Path, out: Path) -> list[ChunkJob]:
    """A side that selects from one base table is one task per part of that table (its output
    keeps the part's row order, so R or S is the table's selection in file order); a side that
    joins tables (the small pre-joined sides) is one task."""
    used = [t for t in BASE_TABLES if "{" + t + "}" in template]
    target, table_dir = f"datagen.{NAME}:write_side", str(out / f"{side}.parquet")
    if len(used) != 1:
        return [ChunkJob(target, side, 0, table_dir, 1,
                         {"sql": side_sql(p, template, whole_tables(base))})]
    parts = sorted((base / f"{used[0]}.parquet").glob("part-*.parquet"))
    return [ChunkJob(target, side, i, table_dir, 1,
                     {"sql": side_sql(p, template, {used[0]: str(f)})})
            for i, f in enumerate(parts)]


def base_tables(p: Params, spark=None, progress: bool = True) -> Path:
    """The folder of the (cached) skewed TPC-H these inputs are selected from."""
    from datagen.cache import materialize

    root = Path(p.tpch_cache) if p.tpch_cache else None
    return materialize("tpch", p.tpch_params(), root=root, spark=spark, progress=progress)


def generate(params: dict, out: Path, spark=None, progress: bool = True) -> dict[str, int]:
    """Write ``R`` and ``S`` (as Spark tasks with ``spark``; the same bytes either way);
    returns their row counts."""
    p = validate(Params, params, f"generator {NAME!r}")
    base = base_tables(p, spark, progress)
    q = QUERIES[p.query]
    jobs = side_jobs(p, "R", q.r_sql, base, Path(out)) + side_jobs(p, "S", q.s_sql, base,
                                                                    Path(out))
    written = run_jobs(jobs, spark, progress, desc=f"{NAME} {p.query}", unit="parts")
    return {side: sum(n for j, n in zip(jobs, written, strict=True) if j.table == side)
            for side in ("R", "S")}
