"""The mean-field shrinkage factor against the exact marginal and conditional sds of Gaussians."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ppl.diagnostics.correlation import hidden_correlation


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 6))
def test_factor_is_marginal_over_conditional_sd(seed, dim):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(dim, dim))
    cov = B @ B.T + 0.1 * np.eye(dim)
    precision = np.linalg.inv(cov)
    marginal = np.sqrt(np.diag(cov))
    conditional = 1.0 / np.sqrt(np.diag(precision))  # the mean-field optimum's sd
    assert np.allclose(hidden_correlation(precision), marginal / conditional, rtol=1e-8)


def test_two_correlated_coordinates_and_refusals():
    r = -0.91
    factor = hidden_correlation(np.linalg.inv(np.array([[1.0, r], [r, 1.0]])))
    assert np.allclose(factor, 1 / np.sqrt(1 - r * r))
    assert np.allclose(hidden_correlation(np.diag([1.0, 1e6])), 1.0)
    assert hidden_correlation(np.array([[1.0, 2.0], [2.0, 1.0]])) is None  # not positive definite
    assert hidden_correlation(np.array([[np.nan, 0.0], [0.0, 1.0]])) is None
