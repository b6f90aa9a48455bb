"""The normalizing flow family (ppl.families.flow): its start is the Gaussian it is given, its
inverse is exact, and log q is a normalised density (change of variables checked against a
finite-difference Jacobian and numerical integration)."""

from __future__ import annotations

import numpy as np

from ppl.families.flow import CouplingFlow
from ppl.inference.result import VIResult


def _flow(D: int, seed: int = 0) -> CouplingFlow:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((D, D))
    L = np.linalg.cholesky(A @ A.T + D * np.eye(D))
    return CouplingFlow(rng.standard_normal(D), L, seed=seed)


def _moved(flow: CouplingFlow, scale: float = 0.3, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return flow.initial() + scale * rng.standard_normal(flow.size)


def test_the_start_is_the_gaussian_it_is_given():
    flow = _flow(3)
    eps = np.random.default_rng(2).standard_normal((50, 3))
    zeta, log_det = flow.forward(flow.initial(), eps)
    assert np.allclose(zeta, flow.m0 + eps @ flow.C.T)
    gaussian = VIResult("fullrank", flow.m0, flow.C, [], 0.0, 0, 0, True, 0.0, 0.0)
    assert np.allclose(flow.log_q(flow.initial(), zeta), gaussian.log_density(zeta))
    assert np.allclose(log_det, np.sum(np.log(np.diag(flow.C))))


def test_inverse_and_log_determinant_are_exact():
    for D in (1, 2, 3, 5):
        flow = _flow(D, seed=D)
        theta = _moved(flow)
        eps = np.random.default_rng(3).standard_normal((20, D))
        zeta, log_det = flow.forward(theta, eps)
        back, log_det_back = flow.inverse(theta, zeta)
        assert np.allclose(back, eps, atol=1e-9)
        assert np.allclose(log_det_back, log_det, atol=1e-9)
        h = 1e-6
        for i in range(3):  # central-difference Jacobian of eps -> zeta
            J = np.empty((D, D))
            for j in range(D):
                step = np.zeros(D)
                step[j] = h
                up = np.asarray(flow.forward(theta, (eps[i] + step)[None])[0])[0]
                down = np.asarray(flow.forward(theta, (eps[i] - step)[None])[0])[0]
                J[:, j] = (up - down) / (2 * h)
            assert abs(np.linalg.slogdet(J)[1] - log_det[i]) < 1e-6


def test_log_q_integrates_to_one():
    """exp(log q) on a fine grid, in one and two dimensions, away from the start."""
    flow = _flow(1, seed=4)
    theta = _moved(flow, 0.5)
    grid = np.linspace(-40, 40, 200_001)
    mass = np.sum(np.exp(flow.log_q(theta, grid[:, None]))) * (grid[1] - grid[0])
    assert abs(mass - 1) < 1e-4

    flow = _flow(2, seed=5)
    theta = _moved(flow, 0.3)
    zeta = np.asarray(flow.forward(theta, np.random.default_rng(0).standard_normal((4000, 2)))[0])
    lo, hi = zeta.min(axis=0) - 6 * zeta.std(axis=0), zeta.max(axis=0) + 6 * zeta.std(axis=0)
    x, y = np.linspace(lo[0], hi[0], 1201), np.linspace(lo[1], hi[1], 1201)
    X, Y = np.meshgrid(x, y, indexing="ij")
    density = np.exp(flow.log_q(theta, np.c_[X.ravel(), Y.ravel()]))
    mass = density.sum() * (x[1] - x[0]) * (y[1] - y[0])
    assert abs(mass - 1) < 2e-3


def test_entropy_on_draws_is_the_mean_log_determinant():
    """draws()' entropy is the base Gaussian's plus the mean log-determinant, i.e. -mean log q
    of the draws (the fixed-draw ELBO's entropy term)."""
    flow = _flow(3, seed=6)
    theta = _moved(flow)
    eps = np.random.default_rng(7).standard_normal((200, 3))
    zeta, entropy = flow.draws(theta, eps)
    base = -0.5 * np.sum(eps**2, axis=1) - 1.5 * np.log(2 * np.pi)
    log_q = flow.log_q(theta, np.asarray(zeta))
    assert np.isclose(entropy, -np.mean(log_q) + np.mean(base) + 1.5 * (1 + np.log(2 * np.pi)))
