"""ppl.library.gp_kernels.exp_quad: values against the direct formula, gradients to second order
against finite differences (the mode's Hessian differentiates the gradient)."""

from __future__ import annotations

import numpy as np
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
