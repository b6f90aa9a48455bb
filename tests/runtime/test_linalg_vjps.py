"""ppl.runtime.linalg_vjps: the Cholesky VJP (matmul in place of autograd's einsum) gives
autograd's own gradients, and its second derivatives (the mode's Hessian needs them)."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import grad
from autograd.numpy.linalg import cholesky, grad_cholesky

import ppl.runtime.linalg_vjps as fast


def test_cholesky_vjp_matches_autograds_and_differentiates_again():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(3, 7, 7))
    A = B @ np.swapaxes(B, -1, -2) + 7 * np.eye(7)
    g = rng.normal(size=A.shape)
    L = np.linalg.cholesky(A)
    assert np.allclose(fast._grad_cholesky(L, A)(g), grad_cholesky(L, A)(g), atol=1e-13)

    def f(A):
        return anp.sum(anp.sin(cholesky(A)) * g)

    # a Hessian-vector product through the rule, against central differences of the gradient
    h = 1e-6
    hvp = grad(lambda A: anp.sum(grad(f)(A) * g))(A)
    sym = (g + np.swapaxes(g, -1, -2)) / 2
    fd = (grad(f)(A + h * sym) - grad(f)(A - h * sym)) / (2 * h)
    assert np.allclose(np.sum(hvp * sym), np.sum(fd * g), rtol=1e-5)
