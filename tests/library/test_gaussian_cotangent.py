"""ppl.library.cholesky_ops.gaussian_quad: a Gaussian log density on a Cholesky factor whose
reverse rule hands the factor a GaussianCotangent, which cholesky's rule turns into the
covariance's cotangent 0.5 (w w^T - A^-1) without its general solves. Checked against the
plain composition of the primitives (triangular solve, log-diagonal), to second order, with
broadcasting between y and the factors, and with the factor used twice (the shortcut must not
be taken: the cotangents add to a plain array)."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl.library import cholesky_ops as co


def _plain(y, L):
    z = co.solve_lower_vector(L, y)
    return -0.5 * anp.sum(z * z, axis=-1) - anp.sum(co.log_diagonal(L), axis=-1)


def _cov(B, t):
    n = B.shape[-1]
    return anp.matmul(B * t, anp.swapaxes(B, -1, -2)) + n * np.eye(n)


CASES = [((3,), (3,)), ((), (4,)), ((2,), (2,)), ((2,), (5, 1))]  # (L's batch, y's batch)


@pytest.mark.parametrize("n", [5, co.LAPACK_FROM + 3])
@pytest.mark.parametrize("batch_L,batch_y", CASES)
def test_gradients_match_the_plain_rules(n, batch_L, batch_y, monkeypatch):
    rng = np.random.default_rng(2)
    B = rng.normal(size=batch_L + (n, n))
    y = rng.normal(size=batch_y + (n,))
    t = rng.uniform(0.5, 1.5, size=B.shape)
    weights = rng.uniform(0.5, 2.0, size=np.broadcast_shapes(batch_L, batch_y))
    calls = []
    inverse = co.inverse_from_factor
    monkeypatch.setattr(co, "inverse_from_factor", lambda L: calls.append(1) or inverse(L))

    def new(t):
        return anp.sum(weights * co.gaussian_quad(y, co.cholesky(_cov(B, t))))

    def old(t):
        return anp.sum(weights * _plain(y, co.cholesky(_cov(B, t))))

    assert new(t) == pytest.approx(old(t), rel=1e-12)
    g_new, g_old = grad(new)(t), grad(old)(t)
    assert calls, "the shortcut was not taken"
    np.testing.assert_allclose(g_new, g_old, rtol=1e-9, atol=1e-12 * np.abs(g_old).max())
    v = rng.normal(size=t.shape)  # second order: the plain rule under a trace
    h_new = grad(lambda t: anp.sum(grad(new)(t) * v))(t)
    h_old = grad(lambda t: anp.sum(grad(old)(t) * v))(t)
    np.testing.assert_allclose(h_new, h_old, rtol=1e-8, atol=1e-11 * np.abs(h_old).max())


def test_a_factor_used_twice_takes_the_general_rule(monkeypatch):
    rng = np.random.default_rng(3)
    n = co.LAPACK_FROM + 1
    B, y = rng.normal(size=(2, n, n)), rng.normal(size=(2, n))
    monkeypatch.setattr(co, "inverse_from_factor", lambda L: pytest.fail("shortcut taken"))

    def new(t):
        L = co.cholesky(_cov(B, t))
        return anp.sum(co.gaussian_quad(y, L)) + anp.sum(L[..., 0, 0] ** 3)

    def old(t):
        L = co.cholesky(_cov(B, t))
        return anp.sum(_plain(y, L)) + anp.sum(L[..., 0, 0] ** 3)

    t = rng.uniform(0.5, 1.5, size=B.shape)
    np.testing.assert_allclose(grad(new)(t), grad(old)(t), rtol=1e-9, atol=1e-14)


def test_inverse_from_factor_is_the_inverse():
    rng = np.random.default_rng(4)
    for n in (6, co.LAPACK_FROM + 2):
        A = _cov(rng.normal(size=(3, n, n)), 1.0)
        got = co.inverse_from_factor(np.linalg.cholesky(A))
        np.testing.assert_allclose(got, np.linalg.inv(A), rtol=1e-10, atol=1e-14)


def test_inverse_from_factor_by_blocks_ignores_the_upper_triangle():
    """Orders spanning several halvings of the blocked triangular inverse, odd and even."""
    rng = np.random.default_rng(5)
    for n in (co.INVERSE_BLOCK * 4 + 3, 2 * co.INVERSE_BLOCK + 2):
        A = _cov(rng.normal(size=(2, n, n)), 1.0)
        L = np.linalg.cholesky(A)
        junk = L + np.triu(rng.normal(size=L.shape), 1)  # as a factor's upper triangle is unread
        np.testing.assert_allclose(co.inverse_from_factor(junk), np.linalg.inv(A), rtol=1e-9,
                                   atol=1e-12 * np.abs(np.linalg.inv(A)).max())  # fmt: skip


def test_a_symmetric_cotangent_tag_is_not_kept_by_views():
    g = co.symmetric_cotangent(np.eye(3))
    assert co.is_symmetric(g)
    assert not co.is_symmetric(g[:2])  # a view keeps the class, not the tag
    assert not co.is_symmetric(g.reshape(9).reshape(3, 3))
    assert type(g + 1.0) is np.ndarray  # arithmetic gives a plain array


def test_the_deferred_cotangent_is_made_where_it_is_read(monkeypatch):
    """A traced factor's GaussianCotangent defers its array (a nan placeholder): summed with
    another cotangent of the factor it is made then (the factor used twice, above), and a
    factor not made by a traced cholesky (here the variable itself) gets it at once."""
    rng = np.random.default_rng(6)
    n = co.LAPACK_FROM + 2
    A, y = _cov(rng.normal(size=(2, n, n)), 1.0), rng.normal(size=(2, n))
    L = co.cholesky(A)  # untraced: not in FACTORS
    assert co.FACTORS.get(id(L)) is not L
    got = grad(lambda L: anp.sum(co.gaussian_quad(y, L)))(L)
    want = grad(lambda L: anp.sum(_plain(y, L)))(L)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    seen = []
    rule = co._quad_cotangent_L

    def spy(*args):
        out = rule(*args)
        seen.append(out.dense is not None and np.isnan(np.asarray(out)).all())
        return out

    monkeypatch.setattr(co, "_quad_cotangent_L", spy)
    grad(lambda A: anp.sum(co.gaussian_quad(y, co.cholesky(A))))(A)
    assert seen == [True]  # deferred where the factor came from a traced cholesky
