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
