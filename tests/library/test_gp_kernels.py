"""ppl.library.gp_kernels.exp_quad: values against the direct formula, gradients to second order
against finite differences (the mode's Hessian differentiates the gradient)."""

from __future__ import annotations

import numpy as np
from autograd.test_util import check_grads

from ppl.library.gp_kernels import exp_quad


def test_exp_quad_values_and_gradients():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 7, 2))
    d2 = ((x[:, :, None, :] - x[:, None, :, :]) ** 2).sum(-1)
    np.testing.assert_allclose(exp_quad(x), np.exp(-d2 / 2), rtol=1e-12, atol=1e-14)
    check_grads(exp_quad, modes=["rev"], order=2)(x)
    check_grads(exp_quad, modes=["rev"], order=2)(x[0])  # no batch axis
