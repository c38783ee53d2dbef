import numpy as np
import pytest
from scipy import stats

from datagen.errors import GeneratorError
from datagen.zipf import sample_zipf, zipf_pmf


def test_pmf_is_normalised_power_law():
    p = zipf_pmf(0.8, 100)
    assert p.shape == (100,)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    k = np.arange(1, 101)
    np.testing.assert_allclose(p[0] / p, k**0.8, rtol=1e-10)


def test_pmf_z0_is_uniform_and_huge_z_concentrates():
    np.testing.assert_allclose(zipf_pmf(0.0, 7), np.full(7, 1 / 7))
    p = zipf_pmf(60.0, 1000)
    assert np.all(np.isfinite(p)) and p[0] > 0.999999


def _chi2_pvalue(z_true: float, z_model: float, k: int = 40, n: int = 30_000) -> float:
    ranks = sample_zipf(np.random.default_rng(12345), z_true, k, n)
    observed = np.bincount(ranks, minlength=k + 1)[1:]
    return stats.chisquare(observed, n * zipf_pmf(z_model, k)).pvalue


@pytest.mark.parametrize("z", [0.0, 0.3, 0.7, 1.0, 1.5])
def test_sampled_frequencies_match_exact_pmf(z):
    assert _chi2_pvalue(z, z) > 1e-3


def test_chi_square_check_has_power():
    # the same check rejects a slightly wrong exponent: the test above can fail
    assert _chi2_pvalue(0.7, 0.8) < 1e-3


def test_z0_is_uniform_and_covers_domain():
    ranks = sample_zipf(np.random.default_rng(7), 0.0, 10, 50_000)
    counts = np.bincount(ranks, minlength=11)[1:]
    assert counts.min() > 0 and stats.chisquare(counts).pvalue > 1e-3


def test_ranks_are_int64_in_domain_and_seeded():
    a = sample_zipf(np.random.default_rng(1), 1.2, 5, 1000)
    b = sample_zipf(np.random.default_rng(1), 1.2, 5, 1000)
    assert a.dtype == np.int64 and a.min() >= 1 and a.max() <= 5
    np.testing.assert_array_equal(a, b)
    assert np.all(sample_zipf(np.random.default_rng(1), 0.5, 1, 100) == 1)
    assert sample_zipf(np.random.default_rng(1), 0.5, 3, 0).shape == (0,)


@pytest.mark.parametrize("z,k", [(-0.1, 10), (float("nan"), 10), (1.0, 0), (1.0, -3)])
def test_bad_inputs_raise(z, k):
    with pytest.raises(GeneratorError):
        sample_zipf(np.random.default_rng(0), z, k, 10)
