"""Squall query inputs (datagen.squall_query): sizes against the paper/code, skew, determinism."""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path

import duckdb
import pytest

from datagen import cache, squall_query, tpch
from datagen.errors import GeneratorError
from datagen.params import validate
from joins.oracle import oracle_count

SF = 0.01
REFS = [(name, i) for name, qd in squall_query.QUERIES.items() for i in range(len(qd.references))]


def rows(folder: Path, table: str, sql: str = "count(*)") -> list[tuple]:
    return duckdb.sql(f"SELECT {sql} FROM read_parquet('{folder / table}.parquet/*.parquet')"
                      ).fetchall()


def band_of(query: str) -> int | None:
    qd = squall_query.QUERIES[query]
    return qd.band if qd.predicate == "band" else None


@pytest.fixture(scope="module")
def tpch_cache(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("tpch_cache"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory, tpch_cache) -> dict[str, tuple[Path, dict]]:
    """Every query at z = 0, all selected from one cached TPC-H generation."""
    root = tmp_path_factory.mktemp("squall")
    out = {}
    for name in squall_query.QUERIES:
        folder = root / name
        counts = squall_query.generate({"query": name, "sf": SF, "tpch_cache": tpch_cache},
                                       folder, None, False)
        out[name] = (folder, counts)
    assert len(list(Path(tpch_cache).iterdir())) == 1  # one base TPC-H serves all queries
    return out


def close(got: float, expected: float) -> bool:
    """Within 5% of the catalogue's size scaled to our SF."""
    return abs(got - expected) <= 0.05 * expected


# A count expected below this at the test SF is left out of the scaled comparison: with dbgen's
# random draws its spread is beyond 10% (E_Q5's and E_Q7's R: 20 and 8 of SF 0.01's 100
# suppliers, binomial sd 4 and 2.7); both are checked exactly and at the catalogue's own SF.
NOISY_BELOW = 100


@pytest.mark.parametrize("query,i", REFS)
def test_sizes_match_the_reported_ones_scaled_to_sf(inputs, query, i):
    ref = squall_query.QUERIES[query].references[i]
    folder, counts = inputs[query]
    scale = SF / ref.gb
    for side, reported in (("R", ref.r), ("S", ref.s)):
        if reported * scale >= NOISY_BELOW:
            assert close(counts[side], reported * scale), (side, counts, ref)
    if ref.output is not None:
        out = oracle_count(folder / "R.parquet", folder / "S.parquet", band=band_of(query))
        assert close(out, ref.output * scale ** ref.output_power), (out, ref)


# Exact sizes at SF 0.01 (dbgen's data are deterministic). The catalogue's sizes at 10 GB
# scaled by 0.001: E_Q5 R 20, S 60,000; E_Q7 R 8, S 18,000.
EXACT = {
    "eq5": {"R": 20, "S": 60_175},  # R as scaled; S +0.29%
    "eq7": {"R": 7, "S": 17_973},  # R -12.5% (one supplier: sampling, see NOISY_BELOW); S -0.15%
}


@pytest.mark.parametrize("query", EXACT)
def test_eq5_eq7_exact_sizes_at_the_test_sf(inputs, query):
    assert inputs[query][1] == EXACT[query]


def test_eq5_eq7_small_side_at_the_catalogue_sf(tmp_path):
    """R is SUPPLIER x NATION (x REGION) only, cheap at the catalogue's own 10 GB, where the
    sampling spread is under 1%: E_Q5 20,051 vs ~20K (+0.26%), E_Q7 7,936 vs 8K (-0.8%)."""
    tpch.generate({"sf": 10, "tables": ["region", "nation", "supplier"]}, tmp_path, None, False)
    for query, exact in (("eq5", 20_051), ("eq7", 7_936)):
        ref = squall_query.QUERIES[query].references[0]
        p = validate(squall_query.Params, {"query": query, "sf": ref.gb}, "test")
        r_sql, _ = squall_query.query_sql(p, tmp_path)
        [(n,)] = duckdb.sql(f"SELECT count(*) FROM ({r_sql})").fetchall()
        assert n == exact and close(n, ref.r), (query, n, ref.r)


def test_bnci_is_exactly_the_squall_code_comment(inputs):
    folder, counts = inputs["bnci"]
    assert counts == {"R": 341, "S": 15010}
    assert oracle_count(folder / "R.parquet", folder / "S.parquet", band=1) == 1073


def test_columns_and_types(inputs):
    expect = {
        "eq5": (["key", "n_name"], ["key", "l_orderkey", "l_extendedprice", "l_discount"]),
        "eq7": (["key", "n_name"], ["key", "l_orderkey", "l_year", "volume"]),
        "bnci": (["key"], ["key"]), "bci": (["key"], ["key"]), "fluct": (["key"], ["key"]),
    }
    for name, (r_cols, s_cols) in expect.items():
        folder, _ = inputs[name]
        for table, cols in (("R", r_cols), ("S", s_cols)):
            desc = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{folder / table}.parquet/"
                              f"*.parquet')").fetchall()
            assert [d[0] for d in desc] == cols, (name, table)
            assert desc[0][1] == "BIGINT"
    # B_CI's key is the ship date as a yyyymmdd integer (Squall's DateIntegerType): TPC-H
    # ships from 1992 to 1998
    lo, hi = rows(inputs["bci"][0], "S", "min(key), max(key)")[0]
    assert lo >= 19920101 and hi <= 19981201
    assert rows(inputs["bci"][0], "S", "count(*) FILTER (WHERE key % 100 NOT BETWEEN 1 AND 31 "
                "OR key // 100 % 100 NOT BETWEEN 1 AND 12)")[0][0] == 0


def test_bci_date_key_switch(inputs, tpch_cache, tmp_path):
    """date_key=days is the day-number switch: the same rows, keys in days since 1970, and
    |d1 - d2| <= 1 then also matches across month boundaries (more results)."""
    folder = tmp_path / "bci_days"
    counts = squall_query.generate({"query": "bci", "sf": SF, "tpch_cache": tpch_cache,
                                    "date_key": "days"}, folder, None, False)
    base, base_counts = inputs["bci"]
    assert counts == base_counts
    lo, hi = rows(folder, "S", "min(key), max(key)")[0]
    assert lo >= 8035 and hi <= 10561  # 1992-01-01 .. 1998-12-01
    as_days = rows(base, "S", "sum(CAST(make_date(CAST(key // 10000 AS INTEGER), CAST(key // 100 "
                   "% 100 AS INTEGER), CAST(key % 100 AS INTEGER)) - DATE '1970-01-01' AS BIGINT))")
    assert as_days == rows(folder, "S", "sum(key)")
    yyyymmdd = oracle_count(base / "R.parquet", base / "S.parquet", band=1)
    days = oracle_count(folder / "R.parquet", folder / "S.parquet", band=1)
    assert yyyymmdd < days < 1.1 * yyyymmdd
    with pytest.raises(GeneratorError, match="date_key"):
        validate(squall_query.Params, {"query": "bci", "date_key": "julian"}, "squall_query")


def test_skewed_inputs_keep_r_and_skew_s(inputs, tpch_cache, tmp_path):
    for name, key_domain in (("eq5", 100), ("fluct", 15000)):
        folder = tmp_path / name
        counts = squall_query.generate({"query": name, "sf": SF, "z": 1.0, "seed": 4,
                                        "tpch_cache": tpch_cache}, folder, None, False)
        base, base_counts = inputs[name]
        assert counts == base_counts  # skew moves values, never rows
        assert rows(folder, "R", "*") == rows(base, "R", "*")  # R's table is not skewed
        h = sum(k ** -1.0 for k in range(1, key_domain + 1))
        share = 1 / h  # Zipf(1) share of the hottest key among S's rows
        [(top,)] = duckdb.sql(f"SELECT max(c) FROM (SELECT count(*) c FROM read_parquet("
                              f"'{folder / 'S'}.parquet/*.parquet') GROUP BY key)").fetchall()
        n = counts["S"]
        assert abs(top - n * share) <= 4 * math.sqrt(n * share) + 2, (name, top, n * share)


@pytest.mark.parametrize("query", squall_query.QUERIES)
def test_reads_are_exactly_the_skewable_columns_the_sql_reads(query):
    """Query.reads (what skew=query_columns adds) lists every skewable column the query's
    selections, pre-joins and join key read, and nothing else (not the payload columns)."""
    p = validate(squall_query.Params, {"query": query}, "test")
    read = ""
    for sql in squall_query.query_sql(p, Path("base")):
        key = re.match(r"SELECT (.*?) AS key\b", sql)
        read += " " + key.group(1) + " " + sql.split(" FROM ", 1)[1]
    named = {c for c in tpch.SKEWABLE if re.search(rf"\b{c}\b", read)}
    assert set(squall_query.QUERIES[query].reads) == named


def test_query_columns_reading_is_the_unskewed_inputs_at_z0(inputs, tpch_cache, tmp_path):
    """At Z0 the every-column reading gives the foreign-key reading's rows exactly (Z0 is the
    unskewed TPC-H under both), from its own cached base database."""
    for name in ("eq5", "eq7"):
        folder = tmp_path / name
        counts = squall_query.generate({"query": name, "sf": SF, "skew": "query_columns",
                                        "tpch_cache": tpch_cache}, folder, None, False)
        base, base_counts = inputs[name]
        assert counts == base_counts
        for side in ("R", "S"):
            assert rows(folder, side, "*") == rows(base, side, "*"), (name, side)


def test_query_columns_reading_skews_what_eq7_reads(tpch_cache):
    """With skew=query_columns, every column E_Q7 filters or joins on gets a hotter top value
    as z grows; with the foreign keys only, its selections and so its input sizes do not move."""
    def top_shares(z: float, skew: str) -> dict[str, float]:
        p = validate(squall_query.Params, {"query": "eq7", "sf": SF, "z": z, "skew": skew,
                                           "tpch_cache": tpch_cache}, "test")
        base = squall_query.base_tables(p, progress=False)
        shares = {}
        for column in squall_query.QUERIES["eq7"].reads:
            table = base / f"{tpch.SKEWABLE[column].table}.parquet"
            [(top, n)] = duckdb.sql(f"SELECT max(c), sum(c) FROM (SELECT count(*) c FROM "
                                    f"read_parquet('{table}/*.parquet') GROUP BY {column})"
                                    ).fetchall()
            shares[column] = top / n
        return shares

    every = [top_shares(z, "query_columns") for z in (0.0, 0.5, 1.0)]
    for column in squall_query.QUERIES["eq7"].reads:
        assert every[0][column] < every[1][column] < every[2][column], (column, every)
    fk = [top_shares(z, "foreign_keys") for z in (0.0, 1.0)]
    assert fk[0]["s_nationkey"] == fk[1]["s_nationkey"]
    assert fk[0]["l_shipdate"] == fk[1]["l_shipdate"]


def test_same_params_same_bytes(inputs, tpch_cache, tmp_path):
    folder, _ = inputs["eq7"]
    again = tmp_path / "eq7"
    squall_query.generate({"query": "eq7", "sf": SF, "tpch_cache": tpch_cache}, again, None,
                          False)
    for t in ("R", "S"):
        a, b = (f / f"{t}.parquet" / "part-00000.parquet" for f in (folder, again))
        assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()


def test_through_the_cache_with_a_manifest(inputs, tpch_cache, tmp_path):
    folder = cache.materialize("squall_query", {"query": "bnci", "sf": SF,
                                                "tpch_cache": tpch_cache}, root=tmp_path,
                               progress=False)
    assert cache.read_manifest(folder)["rows"] == {"R": 341, "S": 15010}


@pytest.mark.parametrize("params,needle", [
    ({"query": "q5"}, "unknown query 'q5'; valid: eq5, eq7"),
    ({"region": "ATLANTIS"}, "unknown region 'ATLANTIS'"),
    ({"nations": ["PERU", "MORDOR"]}, "unknown nation 'MORDOR'"),
    ({"z": -1}, "z must be"),
    ({"sf": -2}, "sf must be > 0"),
    ({"columns": ["l_nope"]}, "unknown skew column"),
    ({"skew": "everything"}, "unknown skew reading .everything.; valid: foreign_keys"),
])
def test_bad_input_is_a_generator_error(tmp_path, params, needle):
    with pytest.raises(GeneratorError, match=needle):
        squall_query.generate(params, tmp_path / "x", None, False)
    assert not any(tmp_path.iterdir())


def test_bytes_do_not_depend_on_duckdb_threads(inputs, tmp_path):
    """Row groups are cut by row count, not by DuckDB's (thread-dependent) batches."""
    folder, _ = inputs["bnci_8_8"]
    sql = f"SELECT key FROM read_parquet('{folder / 'S'}.parquet/*.parquet')"
    written = []
    for threads in (1, 3):
        con = duckdb.connect()
        con.execute(f"SET threads = {threads}")
        out = tmp_path / f"t{threads}"
        assert squall_query.write_query(con, sql, out, row_group_rows=4000) == 15010
        written.append((out / "part-00000.parquet").read_bytes())
    assert written[0] == written[1]
    meta = duckdb.sql(f"SELECT row_group_num_rows FROM parquet_metadata('{out}/*.parquet')"
                      ).fetchall()
    assert sorted({n for (n,) in meta}) == [3010, 4000]


@pytest.mark.spark
def test_spark_tasks_write_the_bytes_of_the_local_run(tpch_cache, tmp_path, spark):
    """A selection side is one task per part of its base table (3 parts here), a pre-joined
    side one task; on Spark the bytes are those of the local run, rows in file order."""
    for query in ("eq5", "bnci"):
        params = {"query": query, "sf": SF, "z": 0.5, "seed": 2, "parts": 3,
                  "tpch_cache": tpch_cache}
        base = squall_query.base_tables(validate(squall_query.Params, params, "test"),
                                        progress=False)
        local, on_spark = tmp_path / f"{query}-local", tmp_path / f"{query}-spark"
        counts = squall_query.generate(params, local, None, False)
        assert squall_query.generate(params, on_spark, spark, False) == counts
        files = {t: sorted((local / f"{t}.parquet").glob("part-*.parquet")) for t in "RS"}
        assert len(files["S"]) == 3 and len(files["R"]) == (1 if query == "eq5" else 3)
        for t, fs in files.items():
            for f in fs:
                assert f.read_bytes() == (on_spark / f"{t}.parquet" / f.name).read_bytes()
        whole = duckdb.sql(squall_query.query_sql(validate(squall_query.Params, params, "t"),
                                                  base)[1]).fetchall()
        assert rows(local, "S", "*") == whole
