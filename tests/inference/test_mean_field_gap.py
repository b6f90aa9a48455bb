"""The best mean-field q from the curvature at the mode (ppl.inference.mean_field_gap): its PSIS
k (1 - lam_min of the unit-diagonal precision) and KL gap (-1/2 log det) against closed forms,
and the bounded solve it sets for a model it condemns (a gamma_normal factor model)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from ppl.families.composite import MixedFamily, blocks_of
from ppl.inference.mean_field_gap import (
    STALL_SHARE,
    best_mean_field,
    dense_precision,
    mean_field_bound,
)
from ppl.inference.mode import find_mode
from ppl.inference.saa import FIRST_DRAWS, GROWTH, fit_fixed_draws

sys.path.insert(0, str(Path(__file__).parent))
from test_slow_ridge import _factor_model  # noqa: E402


@pytest.mark.parametrize("rho, unreliable", [(0.5, False), (-0.69, False), (0.8, True),
                                             (-0.95, True)])  # fmt: skip
def test_bivariate_gaussian_closed_form(rho, unreliable):
    """Precision of a bivariate Gaussian with correlation rho, on unequal scales: C has
    eigenvalues 1 +- rho, so the mean-field optimum's k is |rho| (unreliable past 0.7), and its
    KL gap to the posterior is -1/2 log(1 - rho^2)."""
    cov = np.array([[4.0, 2.0 * 0.1 * rho], [2.0 * 0.1 * rho, 0.01]])
    found = best_mean_field(np.linalg.inv(cov))
    assert found is not None
    assert found[0] is unreliable
    assert found[1] == pytest.approx(-0.5 * np.log(1 - rho**2), rel=1e-10)


def test_not_positive_definite_is_none():
    assert best_mean_field(np.array([[1.0, 2.0], [2.0, 1.0]])) is None
    assert best_mean_field(np.array([[-1.0, 0.0], [0.0, 1.0]])) is None


def test_dense_precision_in_chunks():
    """-H of a Gaussian log density, in chunks of Hessian-vector products, is its precision."""
    rng = np.random.default_rng(0)
    B = rng.normal(size=(7, 7))
    A = B @ B.T + 7 * np.eye(7)

    def log_density(z):
        return -0.5 * np.einsum("si,ij,sj->s", z, A, z)

    import ppl.inference.mean_field_gap as gap

    old, gap.HVP_CHUNK = gap.HVP_CHUNK, 3
    try:
        H = dense_precision(log_density, rng.normal(size=7))
    finally:
        gap.HVP_CHUNK = old
    np.testing.assert_allclose(H, A, rtol=1e-12)


def test_independent_or_small_is_not_bounded():
    """An independent Gaussian: mean-field is exact, nothing is bounded; nor at or below
    min_dim coordinates, where the road's richer Gaussians follow."""

    def log_density(z):
        return -0.5 * np.sum(z**2 / np.arange(1, 6) ** 2, axis=1)

    assert mean_field_bound(log_density, np.zeros(5), 10, FIRST_DRAWS, GROWTH, 0) is None

    def correlated(z):
        return -0.5 * (z[:, 0] ** 2 + 50 * (z[:, 1] - z[:, 0]) ** 2)

    assert mean_field_bound(correlated, np.zeros(2), 4, FIRST_DRAWS, GROWTH, 2) is None
    found = mean_field_bound(correlated, np.zeros(2), 4, FIRST_DRAWS, GROWTH, 1)
    assert found is not None and found["max_draws"] == FIRST_DRAWS
    # C's off-diagonal: 50 / sqrt(51 * 50); the gap is -1/2 log(1 - rho^2) = 1/2 log(51)
    assert found["gap"] == pytest.approx(0.5 * np.log(51.0), rel=1e-8)
    assert found["stall"] == pytest.approx(STALL_SHARE * found["gap"])


def test_a_factor_model_is_condemned_and_its_solve_bounded():
    """gamma_normal's structure on 93 coordinates: the scale ridges make the mean-field q
    unreliable at the mode's curvature (a gap of tens of nats); the bounded solve (stall at a
    1% share of the gap, draws capped where size / 2S falls under the gap) spends fewer
    gradients than the default one and ends within the gap's share of its ELBO."""
    model = _factor_model()
    rng = np.random.default_rng(1)
    mode = find_mode(model.log_joint, model.random_init(rng), rng, max_iter=2000)
    assert mode.converged
    family = MixedFamily(blocks_of(model, {"W": "gaussian", "x": "gamma", "sigma": "gamma"}),
                         model.dim)  # fmt: skip
    bound = mean_field_bound(model.log_joint, mode.point, family.size, FIRST_DRAWS, GROWTH, 0)
    assert bound is not None and bound["gap"] > 10
    theta0 = family.from_gaussian(mode.point, np.ones(model.dim))
    plain = fit_fixed_draws(model.log_joint, family, theta0, seed=3)
    bounded = fit_fixed_draws(model.log_joint, family, theta0, seed=3, stall=bound["stall"],
                              max_draws=bound["max_draws"])  # fmt: skip
    assert bounded.grad_evals < plain.grad_evals
    assert bounded.polish["rounds"][-1]["draws"] <= bound["max_draws"]


def test_the_warning_says_why_the_solve_stopped_short():
    from ppl.inference.mean_field_gap import bound_warnings

    assert bound_warnings({}) == [] and bound_warnings({"mean_field_bound": None}) == []
    bound = {"gap": 1019.8, "stall": 10.198, "max_draws": 8, "hessian_vector_products": 1843}
    (text,) = bound_warnings({"mean_field_bound": bound})
    assert "NOT converged" in text and "1020 nats" in text and "10.2 nats" in text
    assert "1843 coordinates" in text and "8 draws" in text
