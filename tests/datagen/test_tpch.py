"""Skewed TPC-H (datagen.tpch): exact TPC-H counts, Zipf shape, integrity, determinism, errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import numpy as np
import pytest

from datagen import tpch
from datagen.errors import GeneratorError
from datagen.zipf import zipf_pmf

SF = 0.01
# TPC-H row counts at SF 0.01 (dbgen; tpchgen-cli reproduces them)
TPCH_ROWS = {"region": 5, "nation": 25, "supplier": 100, "customer": 1500, "part": 2000,
             "partsupp": 8000, "orders": 15000, "lineitem": 60175}


def tbl(folder: Path, table: str) -> str:
    return f"read_parquet('{folder / (table + '.parquet')}/*.parquet')"


def q(sql: str) -> list[tuple]:
    return duckdb.sql(sql).fetchall()


def digest(folder: Path) -> dict[str, str]:
    return {str(f.relative_to(folder)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(folder.rglob("part-*.parquet"))}


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tpch_z0")
    assert tpch.generate({"sf": SF, "z": 0.0}, out, None, False) == TPCH_ROWS
    return out


@pytest.fixture(scope="module")
def skewed(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tpch_z1")
    assert tpch.generate({"sf": SF, "z": 1.0, "seed": 1}, out, None, False) == TPCH_ROWS
    return out


def test_layout_is_one_parquet_folder_per_table(skewed):
    names = sorted(p.name for p in skewed.iterdir())
    assert names == sorted(f"{t}.parquet" for t in tpch.TABLES)  # no staging folder left
    for t in tpch.TABLES:
        assert [p.name for p in (skewed / f"{t}.parquet").iterdir()] == ["part-00000.parquet"]


def test_z0_is_standard_tpch(plain):
    for t, n in TPCH_ROWS.items():
        assert q(f"SELECT count(*) FROM {tbl(plain, t)}") == [(n,)]
    # dbgen's lineitems reference PARTSUPP pairs and number 1..7 lines per order
    li, ps = tbl(plain, "lineitem"), tbl(plain, "partsupp")
    assert q(f"SELECT count(*) FROM {li} JOIN {ps} ON l_partkey = ps_partkey "
             f"AND l_suppkey = ps_suppkey") == [(60175,)]
    assert q(f"SELECT max(l_linenumber) FROM {li}") == [(7,)]


def test_skew_keeps_row_counts_other_columns_and_tables(plain, skewed):
    cols = "l_quantity, l_extendedprice, l_shipdate, l_shipmode, l_shipinstruct, l_comment"
    a = q(f"SELECT {cols} FROM {tbl(plain, 'lineitem')}")
    b = q(f"SELECT {cols} FROM {tbl(skewed, 'lineitem')}")
    assert a == b  # same rows in the same order, apart from the skewed keys
    pd, sd = digest(plain), digest(skewed)
    untouched = [k for k in pd if not k.startswith("lineitem")]
    assert len(untouched) == 7 and all(pd[k] == sd[k] for k in untouched)
    assert pd["lineitem.parquet/part-00000.parquet"] != sd["lineitem.parquet/part-00000.parquet"]


def test_skewed_keys_keep_referential_integrity(skewed):
    li = tbl(skewed, "lineitem")
    for col, table, key in [("l_orderkey", "orders", "o_orderkey"),
                            ("l_partkey", "part", "p_partkey"),
                            ("l_suppkey", "supplier", "s_suppkey")]:
        assert q(f"SELECT count(*) FROM {li} WHERE {col} NOT IN "
                 f"(SELECT {key} FROM {tbl(skewed, table)})") == [(0,)], col
    # (l_orderkey, l_linenumber) stays a key, numbered 1..count per order
    assert q(f"SELECT count(DISTINCT (l_orderkey, l_linenumber)) FROM {li}") == [(60175,)]
    assert q(f"SELECT count(*) FROM (SELECT l_orderkey, max(l_linenumber) m, count(*) c "
             f"FROM {li} GROUP BY 1) WHERE m <> c") == [(0,)]


@pytest.mark.parametrize("col,domain", [("l_suppkey", 100), ("l_partkey", 2000),
                                        ("l_orderkey", 15000)])
def test_top_frequencies_follow_zipf(skewed, col, domain):
    n = TPCH_ROWS["lineitem"]
    got = [c for (c,) in q(f"SELECT count(*) c FROM {tbl(skewed, 'lineitem')} GROUP BY {col} "
                           f"ORDER BY c DESC LIMIT 3")]
    expected = n * zipf_pmf(1.0, domain)[:3]
    sigma = np.sqrt(expected * (1 - expected / n))
    assert np.all(np.abs(np.array(got) - expected) <= 4 * sigma + 2), (got, expected)


def test_same_params_same_bytes_other_seed_other_hot_key(skewed, tmp_path):
    again = tmp_path / "again"
    tpch.generate({"sf": SF, "z": 1.0, "seed": 1}, again, None, False)
    assert digest(again) == digest(skewed)
    other = tmp_path / "other"
    tpch.generate({"sf": SF, "z": 1.0, "seed": 2, "columns": ["l_suppkey"],
                   "tables": ["lineitem"]}, other, None, False)
    hot = "SELECT l_suppkey FROM {} GROUP BY 1 ORDER BY count(*) DESC LIMIT 1"
    assert q(hot.format(tbl(skewed, "lineitem"))) != q(hot.format(tbl(other, "lineitem")))


def zipf_indices(p: tpch.Params, column: str, n_domain: int, n_rows: int,
                 numbered: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Row -> domain index (and occurrence number) of a whole column, as the tasks draw it."""
    perm, ends, key = tpch.zipf_plan(p, column, n_domain, n_rows)
    rank, occurrence = tpch.zipf_rows(ends, key, 0, n_rows)
    return perm[rank], occurrence if numbered else None


def test_zipf_indices_law_order_and_numbering():
    p = tpch.Params(z=0.5, seed=3)
    n, k = 200_000, 50
    idx, occ = zipf_indices(p, "l_orderkey", k, n, numbered=True)
    counts = np.bincount(idx, minlength=k)
    expected = n * zipf_pmf(0.5, k)
    assert np.all(np.abs(np.sort(counts)[::-1][:10] - expected[:10]) < 4 * np.sqrt(expected[:10]))
    hot = counts.argmax()
    halves = [(idx[: n // 2] == hot).sum(), (idx[n // 2:] == hot).sum()]
    assert abs(halves[0] - halves[1]) < 4 * np.sqrt(counts[hot])  # rows are shuffled
    for v in (hot, counts.argmin()):
        assert sorted(occ[idx == v].tolist()) == list(range(1, counts[v] + 1))
    again, _ = zipf_indices(p, "l_orderkey", k, n, numbered=True)
    assert np.array_equal(idx, again)
    hottest = {np.bincount(zipf_indices(tpch.Params(z=1.0, seed=s), "l_suppkey", k,
                                             5_000)[0]).argmax() for s in range(5)}
    assert len(hottest) > 1  # the seed decides which value is hottest


def test_partsupp_bridge_formula_matches_partsupp(plain):
    rows = q(f"SELECT ps_partkey, list(ps_suppkey ORDER BY ps_suppkey) FROM "
             f"{tbl(plain, 'partsupp')} GROUP BY 1")
    assert len(rows) == 2000
    for part, supps in rows:
        got = sorted(int(tpch.partsupp_suppkey(np.int64(part), np.int64(j), 100))
                     for j in range(4))
        assert got == supps, part


def test_suppkey_from_partkey_keeps_partsupp_pairs(tmp_path):
    out = tmp_path / "cn"
    tpch.generate({"sf": SF, "z": 1.0, "columns": ["l_partkey", "l_suppkey"],
                   "suppkey_from_partkey": True, "tables": ["lineitem", "partsupp"]},
                  out, None, False)
    li, ps = tbl(out, "lineitem"), tbl(out, "partsupp")
    assert q(f"SELECT count(*) FROM {li} JOIN {ps} ON l_partkey = ps_partkey "
             f"AND l_suppkey = ps_suppkey") == [(60175,)]
    [(top,)] = q(f"SELECT max(c) FROM (SELECT count(*) c FROM {li} GROUP BY l_suppkey)")
    assert top > 3 * 60175 / 100  # skewed, though milder than a direct Zipf on l_suppkey


def test_other_tables_and_filter_columns(tmp_path):
    out = tmp_path / "orders"
    rows = tpch.generate({"sf": SF, "z": 1.0, "columns": ["o_custkey", "o_orderpriority"],
                          "tables": ["orders"]}, out, None, False)
    assert rows == {"orders": 15000} and [p.name for p in out.iterdir()] == ["orders.parquet"]
    o = tbl(out, "orders")
    # customer keys 1..1500, never a multiple of 3 (dbgen's CUST_MORTALITY)
    assert q(f"SELECT min(o_custkey) >= 1, max(o_custkey) <= 1500, "
             f"count(*) FILTER (o_custkey % 3 = 0) FROM {o}") == [(True, True, 0)]
    got = q(f"SELECT o_orderpriority, count(*) c FROM {o} GROUP BY 1 ORDER BY c DESC")
    assert {v for v, _ in got} == {"1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW"}
    expected = 15000 * zipf_pmf(1.0, 5)
    assert np.all(np.abs(np.array([c for _, c in got]) - expected) < 4 * np.sqrt(expected))
    [(top,)] = q(f"SELECT max(c) FROM (SELECT count(*) c FROM {o} GROUP BY o_custkey)")
    assert abs(top - 15000 * zipf_pmf(1.0, 1000)[0]) < 4 * np.sqrt(15000 * zipf_pmf(1.0, 1000)[0])


def test_shipdate_skew_draws_from_its_own_dates(plain, tmp_path):
    """l_shipdate (E_Q7's selection, B_CI's band attribute): a date column skewed over the
    dates tpchgen wrote, keeping its type; the other lineitem columns are untouched."""
    out = tmp_path / "shipdate"
    tpch.generate({"sf": SF, "z": 1.0, "columns": ["l_shipdate"], "tables": ["lineitem"]},
                  out, None, False)
    li, base = tbl(out, "lineitem"), tbl(plain, "lineitem")
    assert q(f"SELECT typeof(l_shipdate) FROM {li} LIMIT 1") == [("DATE",)]
    assert q(f"SELECT count(*) FROM {li} WHERE l_shipdate NOT IN "
             f"(SELECT l_shipdate FROM {base})") == [(0,)]
    [(domain,)] = q(f"SELECT count(DISTINCT l_shipdate) FROM {base}")
    [(top,)] = q(f"SELECT max(c) FROM (SELECT count(*) c FROM {li} GROUP BY l_shipdate)")
    expected = TPCH_ROWS["lineitem"] * zipf_pmf(1.0, domain)[0]
    assert abs(top - expected) < 4 * np.sqrt(expected) + 2, (top, expected)
    assert q(f"SELECT l_orderkey, l_quantity FROM {li}") == q(f"SELECT l_orderkey, l_quantity FROM {base}")


@pytest.mark.parametrize("params,needle", [
    ({"z": -0.5}, "z must be"),
    ({"sf": 0}, "sf must be > 0"),
    ({"columns": ["l_foo"]}, "unknown skew column 'l_foo'; valid: l_orderkey"),
    ({"tables": ["lineitems"]}, "unknown table 'lineitems'; valid: region"),
    ({"sf": 0.01, "wat": 1}, "unknown parameter wat"),
    ({"columns": ["l_suppkey"], "suppkey_from_partkey": True}, "add l_partkey"),
])
def test_bad_input_is_a_generator_error(tmp_path, params, needle):
    with pytest.raises(GeneratorError, match=needle):
        tpch.generate(params, tmp_path, None, False)
    assert not any(tmp_path.iterdir())


@pytest.mark.spark
def test_spark_reads_skewed_lineitem(spark, skewed):
    df = spark.read.parquet(str(skewed / "lineitem.parquet"))
    assert dict(df.dtypes)["l_shipmode"] == "string"
    counts = {r["l_suppkey"]: r["count"] for r in df.groupBy("l_suppkey").count().collect()}
    assert sum(counts.values()) == 60175
    assert max(counts.items(), key=lambda kv: kv[1]) == q(
        f"SELECT l_suppkey, count(*) c FROM {tbl(skewed, 'lineitem')} GROUP BY 1 "
        f"ORDER BY c DESC LIMIT 1")[0]


def test_a_slice_of_rows_draws_what_the_whole_column_draws():
    """What lets each part be drawn by its own task: rows [a, b) alone get the values (and
    occurrence numbers) they get when the whole column is drawn at once."""
    p = tpch.Params(z=0.9, seed=5)
    perm, ends, key = tpch.zipf_plan(p, "l_orderkey", 300, 10_000)
    whole = tpch.zipf_rows(ends, key, 0, 10_000)
    for lo, hi in [(0, 1), (17, 4_000), (4_000, 10_000), (9_999, 10_000)]:
        part = tpch.zipf_rows(ends, key, lo, hi)
        assert np.array_equal(part[0], whole[0][lo:hi]) and np.array_equal(part[1], whole[1][lo:hi])
    assert np.array_equal(np.bincount(whole[0], minlength=300), np.diff(ends, prepend=0))


def test_drawn_values_do_not_depend_on_the_number_of_parts(skewed, tmp_path):
    out = tmp_path / "three"
    rows = tpch.generate({"sf": SF, "z": 1.0, "seed": 1, "parts": 3,
                          "tables": ["lineitem", "orders"]}, out, None, False)
    assert rows == {"lineitem": 60175, "orders": 15000}
    assert len(list((out / "lineitem.parquet").glob("part-*.parquet"))) == 3
    cols = "l_orderkey, l_linenumber, l_partkey, l_suppkey, l_comment"
    assert q(f"SELECT {cols} FROM {tbl(out, 'lineitem')}") == \
        q(f"SELECT {cols} FROM {tbl(skewed, 'lineitem')}")


@pytest.mark.spark
def test_spark_tasks_write_the_bytes_of_the_local_run(tmp_path, spark):
    """One Spark task per tpchgen part and per rewritten part; the same bytes as locally."""
    params = {"sf": SF, "z": 0.75, "seed": 3, "parts": 2, "suppkey_from_partkey": True,
              "columns": ["l_orderkey", "l_partkey", "l_suppkey", "l_shipmode", "o_custkey"],
              "tables": ["lineitem", "orders", "nation"]}
    local, on_spark = tmp_path / "local", tmp_path / "spark"
    rows = tpch.generate(params, local, None, False)
    assert tpch.generate(params, on_spark, spark, False) == rows
    assert rows == {"lineitem": 60175, "orders": 15000, "nation": 25}
    a = digest(local)
    assert len(a) == 5 and a == digest(on_spark)
    assert sorted(p.name for p in on_spark.iterdir()) == ["lineitem.parquet", "nation.parquet",
                                                          "orders.parquet"]
