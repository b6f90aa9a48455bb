"""The mixture of Gaussians (ppl.families.mixture): its log q is a normalised density whose
draws have its exact moments, and its stratified ELBO pieces are sum_k w_k E_{q_k}[.] exactly
(checked against a plain Monte Carlo estimate from its own draws)."""

from __future__ import annotations

import numpy as np
from scipy import integrate, stats

from ppl.families.mixture import GaussianMixture


def _family(theta_seed: int | None = None):
    means = [np.array([-3.0, 1.0]), np.array([4.0, -2.0])]
    scales = [np.array([[1.0, 0.0], [0.6, 0.5]]), np.array([[2.0, 0.0], [-0.3, 1.0]])]
    family = GaussianMixture(means, scales, [0.3, 0.7])
    theta = family.initial()
    if theta_seed is not None:
        theta = 0.3 * np.random.default_rng(theta_seed).standard_normal(family.size)
    return family, theta


def test_the_start_is_the_given_components_and_weights():
    family, theta = _family()
    np.testing.assert_allclose(family.weights(theta), [0.3, 0.7])
    (m1, L1), (m2, L2) = family.mean_scales(theta)
    np.testing.assert_allclose(m1, [-3.0, 1.0])
    np.testing.assert_allclose(L2, [[2.0, 0.0], [-0.3, 1.0]])


def test_log_q_is_the_mixture_density():
    family, theta = _family(theta_seed=1)
    zeta = np.random.default_rng(0).normal(0, 4, (50, 2))
    w = family.weights(theta)
    exact = sum(wk * stats.multivariate_normal(mu, L @ L.T).pdf(zeta)
                for wk, (mu, L) in zip(w, family.mean_scales(theta), strict=True))  # fmt: skip
    np.testing.assert_allclose(family.log_q(theta, zeta), np.log(exact), rtol=1e-10)


def test_a_one_dimensional_mixture_integrates_to_one():
    family = GaussianMixture([np.array([-10.0]), np.array([10.0])],
                             [np.eye(1), 2 * np.eye(1)], [0.3, 0.7])  # fmt: skip
    theta = family.initial()
    total = integrate.quad(lambda t: np.exp(family.log_q(theta, np.array([[t]]))[0]), -40, 40,
                           points=[-10, 10], limit=200)[0]  # fmt: skip
    assert abs(total - 1) < 1e-8


def test_draws_have_the_exact_moments_and_weights():
    family, theta = _family(theta_seed=2)
    zeta = family.sample(theta, np.random.default_rng(3), 200_000)
    mean, cov = family.mean_cov(theta)
    np.testing.assert_allclose(zeta.mean(axis=0), mean, atol=0.03)
    np.testing.assert_allclose(np.cov(zeta, rowvar=False), cov, rtol=0.02, atol=0.03)
    # E_q[w_1 q_1 / q] = w_1: the draws come from the components in their weights
    mu, L = family.mean_scales(theta)[0]
    first = family.weights(theta)[0] * stats.multivariate_normal(mu, L @ L.T).pdf(zeta)
    share = np.mean(first / np.exp(family.log_q(theta, zeta)))
    assert abs(share - family.weights(theta)[0]) < 0.005


def test_the_stratified_pieces_are_the_weighted_component_expectations():
    """Mean of factor * f(zeta) over the rows is sum_k w_k mean over component k's rows, and
    the entropy term on many draws is q's entropy by plain Monte Carlo."""
    family, theta = _family(theta_seed=4)
    eps = np.random.default_rng(5).standard_normal((20_000, 2))
    zeta, factor, entropy = family.stratified(theta, eps)
    zeta, factor = np.asarray(zeta), np.asarray(factor)
    f = zeta[:, 0] ** 2
    w = family.weights(theta)
    per_component = f.reshape(2, -1).mean(axis=1)
    np.testing.assert_allclose(np.mean(factor * f), w @ per_component, rtol=1e-12)
    draws = family.sample(theta, np.random.default_rng(6), 200_000)
    plain = -np.mean(family.log_q(theta, draws))
    assert abs(float(entropy) - plain) < 0.02


def test_changes_are_zero_for_the_same_theta_and_see_a_weight_move():
    family, theta = _family()
    assert np.all(family.changes(theta, theta) == 0)
    moved = theta.copy()
    moved[-1] += 0.5
    assert family.changes(theta, moved).max() > 0.05
