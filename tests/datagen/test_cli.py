from pathlib import Path

import pytest

from datagen import read_manifest
from datagen.cli import main, parse_pairs


def _run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_names_every_generator_even_unavailable_ones(capsys):
    code, out, _ = _run(capsys, "list")
    assert code == 0
    for name in ("dpair", "smalllarge", "stream", "tpch", "squall_query", "fluct", "rate"):
        assert name in out


def test_parse_pairs_types_and_nesting():
    got = parse_pairs(["a=1", "b=1e5", "c=x", "d=true", "e=[1,2.5]", "f.g=null", "f.h=0.5"])
    assert got == {"a": 1, "b": 1e5, "c": "x", "d": True, "e": [1, 2.5],
                   "f": {"g": None, "h": 0.5}}


def test_generate_into_out_then_reuse_then_rankfreq(tmp_path, capsys):
    out = tmp_path / "d"
    args = ("dpair", "alpha=1", "keys=100", "rows=5e3", "uniform_rows=0", f"out={out}",
            "progress=false")
    code, text, _ = _run(capsys, *args)
    assert code == 0 and "R=5,000" in text
    stamp = (out / "manifest.json").stat().st_mtime_ns
    assert _run(capsys, *args)[0] == 0 and (out / "manifest.json").stat().st_mtime_ns == stamp
    code, text, _ = _run(capsys, "stream", "source=dpair", "source_params.rows=300",
                         "order=fluct", "k=4", f"root={tmp_path / 'cache'}", "progress=false")
    assert code == 0 and read_manifest(text.split()[0])["params"]["order_params"]["k"] == 4.0
    png = tmp_path / "rf.png"
    code, text, _ = _run(capsys, "rankfreq", str(out), "column=key", f"out={png}")
    assert code == 0 and png.exists() and "fitted exponent z = " in text


@pytest.mark.parametrize("args,needle", [
    (("dpair", "alpha=-0.1"), "alpha must be a number >= 0"),
    (("dpair", "keys=0"), "keys (K) must be in 1.."),
    (("dpair", "alhpa=1"), "valid: alpha, chunk_rows"),
    (("zipfpair",), "valid: bistream_streams, dcape_streams, diner_streams, dpair, miner_chain, smalllarge"),
    (("stream", "source=dpair", "order=zigzag"), "valid: fluct, intervals, random, rate"),
    (("dpair", "rows"), "expected key=value"),
    (("rankfreq",), "usage"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, args, needle):
    code, out, err = _run(capsys, *args, f"root={tmp_path}")
    assert code == 2 and needle in err and err.count("\n") == 1 and out == ""
    assert list(tmp_path.iterdir()) == []


def test_existing_folder_with_other_content_and_unknown_column(tmp_path, capsys):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    code, _, err = _run(capsys, "dpair", f"out={tmp_path / 'busy'}", "progress=false")
    assert code == 2 and "exists with other content" in err
    assert [p.name for p in (tmp_path / "busy").iterdir()] == ["notes.txt"]
    _run(capsys, "dpair", f"out={tmp_path / 'd'}", "progress=false")
    code, _, err = _run(capsys, "rankfreq", str(tmp_path / "d"), "column=nope",
                        f"out={tmp_path / 'x.png'}")
    assert code == 2 and "unknown column 'nope'; valid: key, payload" in err


def test_spark_takes_a_preset_name_and_an_unknown_one_is_one_error_line(tmp_path, capsys,
                                                                         monkeypatch):
    out = tmp_path / "never"
    code, _, err = _run(capsys, "dpair", "rows=100", "keys=10", "spark=nosuch", f"out={out}")
    assert code == 2 and "unknown Spark preset 'nosuch'; valid:" in err and "local_cluster" in err
    monkeypatch.delenv("SPARK_MASTER_URL", raising=False)
    code, _, err = _run(capsys, "dpair", "rows=100", "keys=10", "spark=standalone", f"out={out}")
    assert code == 2 and "master URL" in err
    assert not out.exists()


@pytest.mark.spark
def test_spark_preset_name_starts_that_preset_and_generates(tmp_path, capsys, monkeypatch,
                                                            spark):
    import runtime.spark_session as session

    asked = []
    monkeypatch.setattr(session, "get_spark", lambda *a, **kw: asked.append((a, kw)) or spark)
    out = tmp_path / "d"
    code, text, _ = _run(capsys, "dpair", "rows=300", "keys=10", "uniform_rows=0",
                         "spark=local_cluster", f"out={out}", "progress=false")
    assert code == 0 and "R=300" in text
    assert read_manifest(out)["produced_by"] == "spark"
    assert asked[0][1]["master"].startswith("local-cluster[")
    code, _, _ = _run(capsys, "dpair", "rows=300", "keys=10", "uniform_rows=0", "spark=local[2]",
                      f"out={tmp_path / 'e'}", "progress=false")
    assert code == 0 and asked[1][0] == ("local[2]",)


def test_force_never_replaces_a_folder_generation_did_not_write(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    code, _, err = _run(capsys, "dpair", "rows=100", "keys=10", f"out={mine}", "force=true")
    assert code == 2 and "is not a generated input (no manifest.json)" in err
    assert err.count("\n") == 1 and (mine / "notes.txt").read_text() == "mine"
    out = tmp_path / "d"
    args = ("dpair", "rows=100", "keys=10", "uniform_rows=0", f"out={out}", "progress=false")
    assert _run(capsys, *args)[0] == 0
    assert _run(capsys, *args, "force=true")[0] == 0  # a generated input is regenerated
    (out / "R.parquet" / "notes.txt").write_text("mine")  # unless a user's file is in it
    code, _, err = _run(capsys, *args, "force=true")
    assert code == 2 and "holds files generation did not write (R.parquet/notes.txt)" in err
    assert (out / "R.parquet" / "notes.txt").read_text() == "mine"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_unwritable_output_is_one_line_before_spark(tmp_path, capsys, monkeypatch):
    import runtime.spark_session as session

    def refuse(*_a, **_kw):
        raise AssertionError("Spark started before the output was checked")

    monkeypatch.setattr(session, "get_spark", refuse)
    for where in ("out=/proc/x", "root=/proc/cache"):
        code, _, err = _run(capsys, "dpair", "rows=100", "keys=10", where, "spark=local[2]")
        assert code == 2 and err.count("\n") == 1
        assert "cannot write /proc/" in err and "cannot create anything in /proc" in err
    code, _, err = _run(capsys, "rankfreq", str(tmp_path), "out=/proc/x.png")
    assert code == 2 and "cannot write /proc/x.png" in err


def test_rankfreq_refuses_an_existing_output(tmp_path, capsys):
    (tmp_path / "plot.png").write_bytes(b"mine")
    code, _, err = _run(capsys, "rankfreq", str(tmp_path), f"out={tmp_path / 'plot.png'}")
    assert code == 2 and f"output {tmp_path / 'plot.png'} exists" in err
    assert (tmp_path / "plot.png").read_bytes() == b"mine"


@pytest.mark.parametrize("args,needle", [
    (("dpair", "--help"), "parameters: alpha=0.5, "),
    (("dpair", "alpha=1", "-h"), "usage: python -m datagen dpair"),
    (("rankfreq", "--help"), "usage: python -m datagen rankfreq PATH"),
    (("list", "-h"), "usage: python -m datagen list"),
])
def test_help_after_a_command_is_its_usage(capsys, args, needle):
    code, out, _ = _run(capsys, *args)
    assert code == 0 and needle in out
