"""ppl.library.cholesky_ops: LAPACK/BLAS one matrix at a time from LAPACK_FROM, numpy's batched
routines below it; values against numpy, gradients against autograd's own rules and finite
differences, to second order (the mode's Hessian differentiates the gradient)."""

from __future__ import annotations

from functools import partial

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from autograd.test_util import check_grads

from ppl.library import cholesky_ops as co


def _spd(rng, batch, n):
    B = rng.normal(size=batch + (n, n))
    return B @ np.swapaxes(B, -1, -2) + n * np.eye(n)


@pytest.mark.parametrize("n", [4, co.LAPACK_FROM + 3])
def test_values_match_numpy(n):
    rng = np.random.default_rng(0)
    A = _spd(rng, (2, 3), n)
    L = np.linalg.cholesky(A)
    assert np.allclose(co.cholesky(A), L, atol=1e-12)
    b = rng.normal(size=(3, n, 2))  # broadcasts against L's batch (2, 3)
    assert np.allclose(co.solve_lower(L, b), np.linalg.solve(L, b), atol=1e-12)
    Lt = np.swapaxes(L, -1, -2)
    assert np.allclose(co.solve_lower(L, b, True), np.linalg.solve(Lt, b), atol=1e-12)
    # the upper triangle is not read (as Stan's mdivide_left_tri_low)
    junk = L + np.triu(rng.normal(size=L.shape), 1)
    assert np.allclose(co.solve_lower(junk, b), co.solve_lower(L, b), atol=1e-12)
    d = np.diagonal(L, axis1=-2, axis2=-1)
    assert np.allclose(co.log_diagonal(L), np.log(d))


@pytest.mark.parametrize("n", [4, co.LAPACK_FROM + 1])
def test_not_positive_definite_raises(n):
    A = np.eye(n)
    A[-1, -1] = -1.0
    with pytest.raises(np.linalg.LinAlgError):
        co.cholesky(np.stack([np.eye(n), A]))


@pytest.mark.parametrize("n", [4, co.LAPACK_FROM + 1])
def test_gradients_to_second_order(n):
    rng = np.random.default_rng(1)
    A = _spd(rng, (2,), n)
    L = np.linalg.cholesky(A)
    W = rng.normal(size=A.shape)

    def sym(X):
        return 0.5 * (X + np.swapaxes(X, -1, -2))

    # against autograd's own Cholesky rule
    mine = grad(lambda X: anp.sum(W * co.cholesky(X)))(A)
    theirs = grad(lambda X: anp.sum(W * anp.linalg.cholesky(X)))(A)
    assert np.allclose(mine, theirs, atol=1e-10)
    check_grads(lambda X: co.cholesky(sym(X)), modes=["rev"], order=2)(A)
    b, b1 = rng.normal(size=(2, n, 2)), rng.normal(size=(n, 3))
    for transpose in (False, True):
        solve = partial(co.solve_lower, transpose=transpose)
        check_grads(solve, modes=["rev"], order=2)(L, b)
        check_grads(solve, modes=["rev"], order=2)(L, b1)


def test_mvn_cholesky_density_gradient_matches_the_closed_form():
    """d/dSigma log N(y | 0, Sigma) through cholesky and multi_normal_cholesky is
    (a a^T - Sigma^-1) / 2, a = Sigma^-1 y (symmetric), on a matrix large enough for LAPACK."""
    from ppl.library.distributions.multivariate import _mvn_cholesky_lp

    rng = np.random.default_rng(2)
    n = co.LAPACK_FROM + 5
    S = _spd(rng, (), n)
    y = rng.normal(size=n)
    g = grad(lambda X: _mvn_cholesky_lp(y, 0.0, co.cholesky(X)))(S)
    a = np.linalg.solve(S, y)
    assert np.allclose(g, 0.5 * (np.outer(a, a) - np.linalg.inv(S)), atol=1e-10)
    value = _mvn_cholesky_lp(y, 0.0, np.linalg.cholesky(S))
    sign, logdet = np.linalg.slogdet(S)
    assert np.isclose(value, -0.5 * (y @ a + logdet + n * np.log(2 * np.pi)))
