"""A real cluster's executors get the project's code as one zip; local masters import it from
the checkout (no Spark started here)."""

from __future__ import annotations

import zipfile

from runtime.shipping import project_zip, ships_code


def test_only_non_local_masters_get_the_code_shipped():
    assert not ships_code("local[2]") and not ships_code("local-cluster[2,1,2048]")
    assert ships_code("spark://host:7077") and ships_code("yarn")
    assert ships_code("k8s://https://host:6443")


def test_the_project_zip_holds_every_package_and_is_named_by_its_content():
    path = project_zip()
    names = set(zipfile.ZipFile(path).namelist())
    for module in ("joins/online/worker.py", "joins/batch/am_join.py",
                   "datagen/chunks.py", "runtime/paths.py", "runtime/shipping.py",
                   "experiments/run.py"):
        assert module in names
    assert project_zip() == path  # same sources, same name: built once


def test_an_edited_source_gives_a_zip_of_another_name(tmp_path, monkeypatch):
    import runtime.paths
    from runtime.shipping import package_zip

    monkeypatch.setattr(runtime.paths, "SCRATCH", tmp_path / "scratch")
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "mod.py").write_text("X = 1\n")
    first = package_zip(pkg, name="t")
    (pkg / "mod.py").write_text("X = 2\n")
    second = package_zip(pkg, name="t")
    assert first != second and first.exists() and second.exists()
    assert first.parent == tmp_path / "scratch" / "pyfiles"
    assert zipfile.ZipFile(second).read("pkg/mod.py") == b"X = 2\n"
