import importlib.metadata
import json
import os
import shutil
import time

import pytest

import datagen.dpair
from datagen import cache, materialize, read_manifest
from datagen.errors import GeneratorError
from runtime.shipping import package_bytes

from .helpers import part_bytes

KW = {"alpha": 0.5, "keys": 10, "rows": 100, "uniform_rows": 10}


def test_second_request_reuses_and_force_regenerates(tmp_path, monkeypatch):
    calls = []
    real = datagen.dpair.generate
    monkeypatch.setattr(datagen.dpair, "generate", lambda *a: calls.append(1) or real(*a))
    f1 = materialize("dpair", KW, root=tmp_path, progress=False)
    f2 = materialize("dpair", {**KW, "keys": 10.0}, root=tmp_path, progress=False)  # same config
    assert f1 == f2 and len(calls) == 1
    assert f1.name == f"dpair-{read_manifest(f1)['config_hash'][:12]}"
    materialize("dpair", KW, root=tmp_path, progress=False, force=True)
    assert len(calls) == 2
    f3 = materialize("dpair", {**KW, "seed": 9}, root=tmp_path, progress=False)
    assert f3 != f1 and len(calls) == 3


def test_manifest_records_generator_params_seed_rows_versions(tmp_path):
    m = read_manifest(materialize("dpair", KW, root=tmp_path, progress=False))
    assert m["generator"] == "dpair" and m["seed"] == 0
    assert m["params"]["uniform_range"] == 2**31 - 1  # defaults are recorded too
    assert m["rows"] == {"R": 110, "S": 110}
    assert {"numpy", "pyarrow", "python", "datagen_format"} <= set(m["versions"])
    assert m["versions"]["tpchgen-cli"] == cache.tool_versions()["tpchgen-cli"] != "absent"
    assert m["versions"]["duckdb"] == importlib.metadata.version("duckdb")
    assert m["versions"]["datagen_sources"] == cache.code_fingerprint()["datagen_sources"]


def test_key_changes_with_generator_code_and_tool_versions(tmp_path, monkeypatch):
    resolved = cache.resolve("dpair", KW)
    base = cache.config_hash("dpair", resolved)
    pkg = tmp_path / "datagen"
    shutil.copytree(cache.PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert package_bytes(pkg) == package_bytes(cache.PACKAGE)  # content only, not the path
    (pkg / "dpair.py").write_text((pkg / "dpair.py").read_text() + "# changed\n")
    edited = package_bytes(pkg)
    monkeypatch.setattr(cache, "package_bytes", lambda *pkgs: edited)
    assert cache.config_hash("dpair", resolved) != base  # a code change is a new input
    monkeypatch.undo()
    assert cache.config_hash("dpair", resolved) == base
    real = cache.tool_versions()
    for tool in ("tpchgen-cli", "duckdb"):
        monkeypatch.setattr(cache, "tool_versions", lambda tool=tool: {**real, tool: "0.0.1"})
        assert cache.config_hash("dpair", resolved) != base
        monkeypatch.undo()


def test_failed_generation_leaves_nothing_reusable(tmp_path, monkeypatch):
    real = datagen.dpair.generate

    def crash(params, out, spark, progress):
        real(params, out, spark, progress)  # everything written ...
        raise RuntimeError("worker lost")  # ... but the run fails before the manifest

    monkeypatch.setattr(datagen.dpair, "generate", crash)
    with pytest.raises(RuntimeError):
        materialize("dpair", KW, root=tmp_path, progress=False)
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setattr(datagen.dpair, "generate", real)
    f = materialize("dpair", KW, root=tmp_path, progress=False)
    assert read_manifest(f)["rows"]["R"] == 110


def test_folder_without_manifest_is_never_taken_as_done(tmp_path):
    resolved = cache.resolve("dpair", KW)
    target = tmp_path / "out"
    (target / "R.parquet").mkdir(parents=True)
    with pytest.raises(GeneratorError, match="other content"):
        cache.materialize_into(target, "dpair", resolved, progress=False)
    assert sorted(p.name for p in target.iterdir()) == ["R.parquet"]  # untouched


def test_explicit_folder_reuse_and_conflict(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()  # an empty folder is fine
    cache.materialize_into(target, "dpair", cache.resolve("dpair", KW), progress=False)
    before = (target / "manifest.json").read_text()
    cache.materialize_into(target, "dpair", cache.resolve("dpair", KW), progress=False)
    assert (target / "manifest.json").read_text() == before
    other = cache.resolve("dpair", {**KW, "alpha": 0.9})
    with pytest.raises(GeneratorError, match="other content"):
        cache.materialize_into(target, "dpair", other, progress=False)
    assert json.loads((target / "manifest.json").read_text())["params"]["alpha"] == 0.5
    cache.materialize_into(target, "dpair", other, progress=False, force=True)
    assert read_manifest(target)["params"]["alpha"] == 0.9
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temp or old folders left


def test_an_input_another_process_finished_first_stays_in_place(tmp_path, monkeypatch):
    """Two sweep points at once may generate the same input: the second to finish keeps the
    first one's folder, which the first may be reading already."""
    real = datagen.dpair.generate
    first: dict = {}

    def racing(params, out, spark, progress):
        if not first:  # "another process" generates and swaps in the same input meanwhile
            first["folder"] = None
            first["folder"] = materialize("dpair", KW, root=tmp_path, progress=False)
            first["inode"] = (first["folder"] / "manifest.json").stat().st_ino
        return real(params, out, spark, progress)

    monkeypatch.setattr(datagen.dpair, "generate", racing)
    folder = materialize("dpair", KW, root=tmp_path, progress=False)
    assert folder == first["folder"]
    assert (folder / "manifest.json").stat().st_ino == first["inode"]  # not replaced
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no temp or old folders left


def _aged(path, days: float) -> None:
    stamp = time.time() - days * 86400
    for p in [*path.rglob("*"), path]:
        os.utime(p, (stamp, stamp))


def test_materialize_sweeps_stale_interrupted_folders_of_its_root(tmp_path):
    done = materialize("dpair", KW, root=tmp_path, progress=False)
    for name in (".tmp-dpair-aaaa-1", ".tmp-busy-2", ".tmp-new-3", ".old-dpair-x-4"):
        (tmp_path / name / "R.parquet").mkdir(parents=True)
        (tmp_path / name / "R.parquet" / "part-00000.parquet").write_bytes(b"x")
    for name in (".tmp-dpair-aaaa-1", ".tmp-busy-2", ".old-dpair-x-4"):
        _aged(tmp_path / name, days=2)
    _aged(done, days=30)  # finished inputs are kept however old
    (tmp_path / ".tmp-busy-2" / "R.parquet" / "part-00001.parquet").write_bytes(b"y")  # live
    elsewhere = tmp_path / "other_root"
    (elsewhere / ".tmp-x-5").mkdir(parents=True)
    _aged(elsewhere / ".tmp-x-5", days=2)
    assert materialize("dpair", KW, root=tmp_path, progress=False) == done
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-busy-2", ".tmp-new-3", done.name,
                                                          "other_root"]
    assert (elsewhere / ".tmp-x-5").exists()  # only the root's own leftovers are swept


def test_unknown_generator_names_valid_ones(tmp_path):
    with pytest.raises(GeneratorError, match="valid: bistream_streams, dcape_streams, diner_streams, dpair, miner_chain, smalllarge, squall_query, stock_trace, stream, tpch, weather_trace"):
        materialize("zipfpair", {}, root=tmp_path)


@pytest.mark.spark
def test_spark_and_local_write_identical_bytes(tmp_path, spark):
    kw = {"alpha": 0.9, "keys": 50, "rows": 2500, "uniform_rows": 500, "chunk_rows": 400,
          "size": 24}
    local = materialize("dpair", kw, root=tmp_path / "local", progress=False)
    on_spark = materialize("dpair", kw, root=tmp_path / "spark", spark=spark, progress=False)
    assert read_manifest(on_spark)["produced_by"] == "spark"
    a, b = part_bytes(local), part_bytes(on_spark)
    assert len(a) == 16 and a == b
    st = {"source": "smalllarge", "source_params": {"large_rows": 900, "small_rows": 90},
          "order": "fluct", "k": 2, "chunk_rows": 128}
    s_local = materialize("stream", st, root=tmp_path / "local", progress=False)
    s_spark = materialize("stream", st, root=tmp_path / "spark", spark=spark, progress=False)
    assert part_bytes(s_local) == part_bytes(s_spark) and len(part_bytes(s_local)) == 9
