import numpy as np
import pyarrow as pa
import pytest

from datagen import materialize
from datagen.errors import GeneratorError
from datagen.rankfreq import fit_exponent, plot_rankfreq, rank_frequencies
from datagen.zipf import sample_zipf, zipf_pmf


def test_fit_recovers_exponent_of_exact_frequencies():
    freqs = np.round(1e6 * zipf_pmf(0.75, 500)).astype(np.int64)
    assert fit_exponent(freqs) == pytest.approx(0.75, abs=0.01)


def test_fit_of_a_sample_and_of_uniform_data():
    ranks = sample_zipf(np.random.default_rng(0), 1.0, 1000, 200_000)
    assert fit_exponent(rank_frequencies(pa.array(ranks))) == pytest.approx(1.0, abs=0.03)
    ranks = sample_zipf(np.random.default_rng(0), 0.3, 10_000, 200_000)
    assert fit_exponent(rank_frequencies(pa.array(ranks))) == pytest.approx(0.3, abs=0.04)
    flat = rank_frequencies(pa.array(np.repeat(np.arange(100), 50)))
    assert fit_exponent(flat) == pytest.approx(0.0, abs=1e-9)


def test_rank_frequencies_sorted_and_null_free():
    f = rank_frequencies(pa.array([3, 3, 1, None, 3, 2, 1]))
    assert f.tolist() == [3, 2, 1]


def test_plot_of_generated_input(tmp_path):
    src = materialize("dpair", {"alpha": 0.6, "keys": 300, "rows": 30_000, "uniform_rows": 100},
                      root=tmp_path, progress=False)
    res = plot_rankfreq(src, "key", tmp_path / "p" / "rf.png", table="S")
    assert (tmp_path / "p" / "rf.png").stat().st_size > 1000
    assert res["rows"] == 30_100 and res["exponent"] == pytest.approx(0.6, abs=0.05)
    with pytest.raises(GeneratorError, match="valid: key, payload"):
        plot_rankfreq(src, "keyy", tmp_path / "x.png")
    with pytest.raises(GeneratorError, match="valid: R, S"):
        plot_rankfreq(src, "key", tmp_path / "x.png", table="T")
    assert not (tmp_path / "x.png").exists()
