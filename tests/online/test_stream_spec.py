"""One run spec (StreamSpec): built and validated once, by the API and the stream CLI alike;
``run_stream(spark, spec)`` and ``run_stream(spark, **keywords)`` are the same run."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from joins.online import StreamSpec, run_stream


def _frames():
    r = pd.DataFrame({"key": [1, 2, 2, 3, 5] * 4})
    s = pd.DataFrame({"key": [2, 3, 3, 4, 5] * 4})
    return r, s


@pytest.mark.parametrize(("options", "message"), [
    (dict(joiners=0), "joiners must be >= 1"),
    (dict(spill="lots"), "spill must be charge, disk or evict"),
    (dict(controller="psychic"), "controller must be exact or sampled"),
    (dict(band=float("nan")), "band must be >= 0, got nan"),
    (dict(window=5.0), "need an event-time column"),
    (dict(time="t", window=5.0, archive=0.0), "archive="),
    (dict(batch_size=0), "batch_size must be >= 1"),
    (dict(migration_rate=0.0), "migration_rate must be > 0"),
    (dict(seed=-1), "seed must be >= 0"),
    (dict(order="fluct", k=-1.0), "order fluct: fluctuation factor k must be > 1"),
    (dict(tuple_bytes=(1.0,)), "tuple_bytes takes one size >= 0 per input"),
    (dict(on="a,b", band=1.0), "a band join takes one key column"),
    (dict(epsilon=0.5), "operator 'dynamic' got unknown parameters: ['epsilon']"),
    (dict(operator="shj", band=1.0), "shj is an equi-join operator"),
])
def test_a_spec_is_checked_when_it_is_built(options, message):
    r, s = _frames()
    given = {"operator": "dynamic", "joiners": 4, **options}
    with pytest.raises(ValueError, match=re.escape(message)):
        StreamSpec.of(r, s, **given)


def test_a_declared_operator_refuses_inputs_it_does_not_join():
    frames = {nm: pd.DataFrame({"key": [1, 2]}) for nm in "ABC"}
    with pytest.raises(ValueError, match="shj joins 2 inputs; operator=.*mjoin.* joins 3"):
        StreamSpec("shj", 2, inputs=frames)
    StreamSpec("mjoin", 2, inputs=frames)  # n-way


def test_the_spec_and_the_keywords_run_the_same():
    r, s = _frames()
    kw = dict(operator="shj", joiners=3, batch_size=7, collect_output=True, progress=False,
              backend="local", groups=6)
    by_keywords = run_stream(None, r, s, **kw)
    spec = StreamSpec.of(r, s, **kw)
    assert spec.params == {"groups": 6} and spec.operator_name == "shj"
    by_spec = run_stream(None, spec)
    pd.testing.assert_frame_equal(by_keywords.metrics.drop(columns=["seconds", "cpu_seconds",
                                                                     "batch_wall_seconds"],
                                                            errors="ignore"),
                                  by_spec.metrics.drop(columns=["seconds", "cpu_seconds",
                                                                "batch_wall_seconds"],
                                                       errors="ignore"))
    assert len(by_spec.output) == len(by_keywords.output) > 0
    with pytest.raises(TypeError, match="no other inputs or options"):
        run_stream(None, spec, joiners=2)


def test_the_cli_builds_the_same_spec(tmp_path):
    from joins.online.cli import parse, validate

    r, s = _frames()
    r.to_parquet(tmp_path / "R.parquet")
    s.to_parquet(tmp_path / "S.parquet")
    spec = validate(parse(["operator=shj", "joiners=3", f"r={tmp_path / 'R.parquet'}",
                           f"s={tmp_path / 'S.parquet'}", "groups=6", "batch_size=7",
                           "budget=100", "progress=false"]))
    assert isinstance(spec, StreamSpec)
    assert (spec.operator, spec.joiners, spec.params, spec.batch_size) == ("shj", 3,
                                                                           {"groups": 6}, 7)
    assert spec.memory_budget_tuples == 100 and spec.progress is False
    assert spec.data == [str(tmp_path / "R.parquet"), str(tmp_path / "S.parquet")]
    policy, program = spec.plan(20, 20)
    assert program.name == "joiner" and policy.layout.kind == "hash"
