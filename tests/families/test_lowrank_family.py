"""The low-rank-plus-diagonal Gaussian family (ppl/families/lowrank.py) against dense algebra:
its entropy by the determinant lemma against a dense log-determinant, its draws' moments
against the covariance it claims, and its fixed-draw fit against a Gaussian target it holds."""

from __future__ import annotations

import numpy as np
from autograd import grad

from ppl.families.lowrank import LowRankGaussian, initial_factor
from ppl.inference.deterministic import minimise
from ppl.inference.saa import NegativeElbo, whitened_draws

LOG_2PI = np.log(2 * np.pi)


def _family(D=7, r=3, seed=0):
    rng = np.random.default_rng(seed)
    mean, sd = rng.normal(size=D), np.exp(rng.normal(size=D))
    family = LowRankGaussian(mean, sd, rng.normal(size=(D, r)))
    theta = family.initial() + 0.3 * rng.normal(size=family.size)
    return family, theta


def test_entropy_by_the_determinant_lemma_equals_the_dense_one():
    family, theta = _family()
    _, entropy = family.draws(theta, np.zeros((1, family.dim)))
    _, logdet = np.linalg.slogdet(family.covariance(theta))
    dense = 0.5 * logdet + 0.5 * family.latent_dim * (1 + LOG_2PI)
    assert abs(entropy - dense) < 1e-10
    # its gradient too: against central differences of the dense formula
    def dense_entropy(th):
        return 0.5 * np.linalg.slogdet(family.covariance(th))[1]

    g = grad(lambda th: family.draws(th, np.zeros((1, family.dim)))[1])(theta)
    h, k = 1e-6, [0, family.latent_dim + 2, family.size - 1]
    for i in k:
        e = np.zeros_like(theta)
        e[i] = h
        fd = (dense_entropy(theta + e) - dense_entropy(theta - e)) / (2 * h)
        assert abs(g[i] - fd) < 1e-6


def test_draws_have_the_mean_and_covariance_the_family_claims():
    """Whitened noise (sample mean 0, sample covariance I exactly) passes through the affine
    map to draws with sample mean mu and sample covariance B B' + diag(d^2) exactly."""
    family, theta = _family()
    eps = whitened_draws(256, family.dim, seed=3)
    zeta, _ = family.draws(theta, eps)
    mu, B, d = family.mean_factor_diag(theta)
    assert np.allclose(zeta.mean(axis=0), mu, atol=1e-10)
    centred = zeta - zeta.mean(axis=0)
    assert np.allclose(centred.T @ centred / len(zeta), B @ B.T + np.diag(d**2), atol=1e-9)
    mean, L = family.mean_scale(theta)
    assert np.allclose(L @ L.T, family.covariance(theta)) and np.allclose(mean, mu)
    assert np.allclose(family.moments(theta)[1], np.sqrt(np.diag(family.covariance(theta))))


def test_fixed_draw_fit_recovers_a_gaussian_target_in_the_family():
    """Target N(m, W W' + diag(v)) with rank(W) = 2: a quadratic log density, so the ELBO on
    whitened draws is exact and its optimum, to the optimiser's precision, is the target."""
    D, r = 12, 2
    rng = np.random.default_rng(5)
    m, W, v = rng.normal(size=D), rng.normal(size=(D, r)), np.exp(rng.normal(size=D) - 1)
    Sigma = W @ W.T + np.diag(v)
    P = np.linalg.inv(Sigma)

    def log_joint(zeta):
        z = zeta - m
        return -0.5 * np.sum((z @ P) * z, axis=1)

    sd = 1 / np.sqrt(np.diag(P))  # the mean-field optimum: too small
    family = LowRankGaussian(np.zeros(D), sd, initial_factor(sd, None, r, seed=1))
    objective = NegativeElbo(log_joint, family, whitened_draws(32, family.dim, 2), {"evals": 0},
                             None)  # fmt: skip
    _, theta, _ = minimise(objective, family.initial(), max_iter=5000, ftol=0, gtol=1e-10)
    assert np.allclose(family.mean_factor_diag(theta)[0], m, atol=1e-6)
    assert np.allclose(family.covariance(theta), Sigma, rtol=1e-5, atol=1e-6)


def test_initial_factor_follows_the_leading_directions_of_a_covariance():
    sd = np.array([1.0, 2.0, 0.5])
    u = np.array([1.0, 1.0, 0.0]) / np.sqrt(2)
    cov = np.diag(sd) @ (np.eye(3) + 8 * np.outer(u, u)) @ np.diag(sd)
    B = initial_factor(sd, cov, 1)
    assert np.allclose(np.abs(B[:, 0] / sd), np.sqrt(8) * u, atol=1e-12)
    assert np.any(initial_factor(sd, None, 2) != 0)  # off the saddle at B = 0
