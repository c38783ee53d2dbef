"""The CLIs' shared checks: parameter names read from the code, outputs never overwritten."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from joins import cli_checks as C
from joins.registry import ALGORITHMS, get, names

BATCH = Path(C.__file__).parent / "batch"


def test_batch_parameters_are_the_params_keys_the_code_reads():
    assert C.algorithm_params(get("hash_join")) == []
    assert C.algorithm_params(get("full_skew_join")) == ["hot_threshold", "max_hot_keys"]
    assert set(C.algorithm_params(get("spark3_join"))) == {
        "advisory_partition_bytes", "auto_broadcast_bytes", "skewed_partition_factor",
        "skewed_partition_threshold_bytes"}
    # read through the functions it calls: hot_keys.hot_params, TreeOptions.of, amjoin_common
    assert {"lambda", "broadcast_rule", "persist_split", "subjoin_partitions", "hot_threshold",
            "hot_key_method", "sublist_ids"} <= set(C.algorithm_params(get("am_join")))
    assert C.algorithm_params(get("der")) == ["id_bytes", "small_record_bytes", "small_side"]


def test_online_parameters_are_the_operators_declared_ones():
    assert C.algorithm_params(get("dynamic")) == ["decide_on", "eps", "initial", "jump", "warmup"]
    assert C.algorithm_params(get("shj")) == ["groups"]
    assert C.algorithm_params(get("static_mid")) == []


def test_every_params_key_in_the_batch_code_belongs_to_an_algorithm():
    """The reader finds every key: one read where it cannot look would be refused as unknown."""
    everywhere = set()
    for f in BATCH.glob("*.py"):
        everywhere |= set(C._keys_read(ast.parse(f.read_text())))
    found = set().union(*(C.algorithm_params(a) for a in ALGORITHMS.values() if a.kind == "batch"))
    assert everywhere and everywhere == found


def test_no_params_key_is_computed():
    """Keys are literals, so the reader can list them (``ctx.params.get(name)`` would not be)."""
    for f in BATCH.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "get" and C._mentions(node.func.value, {"params"}):
                assert isinstance(node.args[0], ast.Constant), f"{f.name}:{node.lineno}"


def test_check_params_names_the_closest():
    with pytest.raises(C.CliError, match=r"param.hot_treshold for tree_join; did you mean "
                                         r"param.hot_threshold\?"):
        C.check_params(get("tree_join"), ["hot_threshold", "hot_treshold"])
    C.check_params(get("tree_join"), ["hot_threshold", "sublist_ids"])


def test_probe_leaves_nothing_behind(tmp_path):
    C.probe_writable(tmp_path / "a" / "b" / "out.parquet")
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(C.CliError, match="is not a folder"):
        C.probe_writable(tmp_path / "file" / "out.parquet")


def test_marked_folder_and_file(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-0.parquet").write_text("")
    with pytest.raises(C.CliError, match="exists; remove it"):
        C.check_output_folder(out)
    with pytest.raises(C.CliError, match="was not written by this tool"):
        C.check_output_folder(out, force=True)
    C.mark_output_folder(out, "test", algorithm="x")
    assert C.check_output_folder(out, force=True) is True
    (out / "sub").mkdir()  # even an empty folder of the user's is kept
    with pytest.raises(C.CliError, match=r"did not write \(sub\)"):
        C.check_output_folder(out, force=True)
    assert C.check_output_folder(tmp_path / "new") is False

    m = tmp_path / "m.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(m)
    with pytest.raises(C.CliError, match="exists and was not written by this tool"):
        C.check_output_file(m, force=True)
    C.write_marked_parquet(pd.DataFrame({"a": [1]}), m, "test")
    assert C.check_output_file(m, force=True) is True
    assert pd.read_parquet(m).to_dict("list") == {"a": [1]}
    with pytest.raises(C.CliError, match="exists; remove it"):
        C.check_output_file(m)
    with pytest.raises(C.CliError, match="is a folder"):
        C.check_output_file(out, force=True)


def test_every_parameter_of_every_algorithm_has_a_meaning():
    from joins.param_docs import PAPERS, meaning

    for algo in ALGORITHMS.values():
        assert algo.paper is None or algo.paper in PAPERS, algo.name
        undocumented = [p for p in C.algorithm_params(algo) if not meaning(algo, p)]
        assert not undocumented, f"{algo.name}: give {undocumented} a meaning (in its Param)"


def test_online_entries_are_derived_from_the_declarations():
    from joins.online import operators

    declared = operators.declared()
    assert set(declared) - set(names("online")) == {"relocating_shj"}  # not listed
    for name in names("online"):
        op, algo = declared[name], get(name, "online")
        assert algo.load() is op and algo.paper == op.paper
        assert algo.description == op.description and algo.join_types == op.join_types
    assert get("nested_loop").paper is None and declared["mjoin"].n_way


def test_batch_declarations_say_what_the_code_reads():
    """A batch algorithm declares exactly the ``ctx.params`` keys its code reads, with the
    code's defaults (a derived one as the code's expression), so they cannot drift."""
    from joins import batch

    for algo in ALGORITHMS.values():
        if algo.kind == "batch":
            assert C.algorithm_param_defaults(algo) == C.code_param_defaults(algo), algo.name
            declared = batch.declared()[algo.name]
            assert algo.target == declared.target and algo.paper == declared.paper
            assert algo.description == declared.description
    assert set(names("batch")) == set(batch.declared())


def test_defaults_are_read_from_the_code():
    assert C.algorithm_param_defaults(get("full_skew_join")) == {"hot_threshold": "100",
                                                                 "max_hot_keys": "1000"}
    am = C.algorithm_param_defaults(get("am_join"))
    assert am["hot_key_method"] == "'exact'" and am["hh_capacity"] == "None"
    assert am["lambda"].startswith("C.lambda_from_threshold")  # an expression: "derived"
    assert C.algorithm_param_defaults(get("dynamic"))["eps"] == "1.0"


def test_describe_lists_paper_join_types_and_each_parameter(capsys):
    from joins.cli import main

    assert main(["describe", "full_skew_join"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("full_skew_join (batch): Full-SkewJoin")
    assert out[1].split() [:2] == ["paper", "amjoin:"] and out[2].split() == ["join", "types", "inner"]
    assert out[4].split()[:4] == ["hot_threshold", "default", "100", "τ:"]
    assert main(["describe", "am_join", "lambda"]) == 2
    assert main(["describe", "dynamic"]) == 0  # an online operator: stream takes both spellings
    out = capsys.readouterr().out.splitlines()
    assert out[3].split()[-3:] == ["<name>=value", "or", "param.<name>=value)"]
    assert any(line.split()[:3] == ["eps", "default", "1.0"] for line in out)
    assert main(["describe", "no_such"]) == 2
    assert "unknown algorithm 'no_such'" in capsys.readouterr().err
