"""ppl.library.gp_kernels.exp_quad: values against the direct formula, gradients to second order
against finite differences (the mode's Hessian differentiates the gradient)."""

from __future__ import annotations

import numpy as np
import pytest
from autograd.test_util import check_grads

from ppl.library.gp_kernels import add_to_diagonal, exp_quad


def test_exp_quad_values_and_gradients():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 2))
    d2 = ((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(exp_quad(x), np.exp(-d2 / 2), rtol=1e-12, atol=1e-14)
    check_grads(exp_quad, modes=["rev"], order=2)(x)
    check_grads(exp_quad, modes=["rev"], order=2)(x[0])  # no batch axis


def test_add_to_diagonal_values_and_gradients():
    rng = np.random.default_rng(1)
    m = rng.normal(size=(3, 5, 5))
    for d in (rng.normal(size=(3, 5)), rng.normal(size=(3, 1)), rng.normal(size=(2, 1, 5))):
        want = m + d[..., :, None] * np.eye(5)
        np.testing.assert_allclose(add_to_diagonal(m, d), want, rtol=0, atol=1e-15)
        check_grads(add_to_diagonal, modes=["rev"], order=2)(m, d)
    check_grads(add_to_diagonal, modes=["rev"], order=2)(m[0], rng.normal(size=(4, 5)))


def test_exp_quad_scale_and_per_draw_path(monkeypatch):
    """The scale (alpha^2) multiplied in, batched or not, with its own gradient; the same values
    and gradients when each draw's matrix is computed on its own (large n)."""
    import ppl.library.gp_kernels as kernels

    rng = np.random.default_rng(2)
    x, scale = rng.normal(size=(3, 6, 2)), rng.uniform(0.5, 2.0, size=3)
    d2 = ((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1)
    want = scale[:, None, None] * np.exp(-d2 / 2)
    np.testing.assert_allclose(exp_quad(x, scale), want, rtol=1e-12, atol=1e-14)
    shared = scale[:, None, None] * np.exp(-d2[0] / 2)  # one x, a scale per draw
    np.testing.assert_allclose(exp_quad(x[0], scale), shared, rtol=1e-12, atol=1e-14)
    check_grads(exp_quad, modes=["rev"], order=2)(x, scale)
    check_grads(lambda s: exp_quad(x, s), modes=["rev"], order=2)(scale)  # alpha's Hessian
    monkeypatch.setattr(kernels, "PER_DRAW_FROM", 1)
    np.testing.assert_allclose(exp_quad(x, scale), want, rtol=1e-12, atol=1e-14)
    check_grads(exp_quad, modes=["rev"], order=2)(x, scale)
    check_grads(exp_quad, modes=["rev"], order=2)(x[0], scale)  # x shared by the draws


def test_gp_density_gradients_match_the_plain_rules(monkeypatch):
    """A GP's log density as the GP regression example computes it (exp_quad, add_to_diagonal,
    cholesky, gaussian_quad: the tagged cotangents and the symmetric kernel rule) against the
    same density in autograd's own operations, to second order, over a batch of draws."""
    import autograd.numpy as anp
    from autograd import grad

    import ppl.library.cholesky_ops as co
    import ppl.library.gp_kernels as kernels

    rng = np.random.default_rng(3)
    n, k = co.LAPACK_FROM + 6, 3
    x, y = rng.normal(size=(n, k)), rng.normal(size=n)
    seen = []
    symmetric = kernels.is_symmetric
    monkeypatch.setattr(kernels, "is_symmetric", lambda g: seen.append(symmetric(g)) or seen[-1])

    def new(t):  # t: (draws, k + 2) = log rho, log alpha, log sigma
        xs = x / anp.exp(t[:, None, :k])
        cov = exp_quad(xs, anp.exp(2 * t[:, k]))
        L = co.cholesky(add_to_diagonal(cov, anp.exp(2 * t[:, k + 1 :])))
        return anp.sum(co.gaussian_quad(y, L) * anp.arange(1.0, len(t) + 1))

    def old(t):
        xs = x / anp.exp(t[:, None, :k])
        d2 = anp.sum((xs[:, :, None, :] - xs[:, None, :, :]) ** 2, axis=-1)
        cov = anp.exp(2 * t[:, k, None, None]) * anp.exp(-0.5 * d2)
        cov = cov + anp.exp(2 * t[:, k + 1, None, None]) * np.eye(n)
        L = anp.linalg.cholesky(cov)
        z = anp.linalg.solve(L, anp.broadcast_to(y, (len(t), n))[..., None])[..., 0]
        logdet = anp.sum(anp.log(anp.diagonal(L, axis1=-1, axis2=-2)), axis=-1)
        return anp.sum((-0.5 * anp.sum(z * z, axis=-1) - logdet) * anp.arange(1.0, len(t) + 1))

    t = rng.normal(scale=0.3, size=(3, k + 2))
    assert new(t) == pytest.approx(old(t), rel=1e-11)
    g_new, g_old = grad(new)(t), grad(old)(t)
    assert seen and all(seen), "the symmetric rule was not taken"
    np.testing.assert_allclose(g_new, g_old, rtol=1e-8, atol=1e-10 * np.abs(g_old).max())
    v = rng.normal(size=t.shape)  # the mode's Hessian: the plain rules under a trace
    h_new = grad(lambda t: anp.sum(grad(new)(t) * v))(t)
    h_old = grad(lambda t: anp.sum(grad(old)(t) * v))(t)
    np.testing.assert_allclose(h_new, h_old, rtol=1e-7, atol=1e-9 * np.abs(h_old).max())


def test_exp_quad_scales_without_a_finite_log():
    """A scale of 0 (alpha^2 underflowed) or below is multiplied in, not added as its log."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(3, 5, 2))
    d2 = ((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1)
    for scale in (np.array([0.0, 1.0, 2.0]), np.array([-1.0, 1e-300, 2.0])):
        want = scale[:, None, None] * np.exp(-d2 / 2)
        np.testing.assert_allclose(exp_quad(x, scale), want, rtol=1e-12, atol=1e-300)
