"""Inverse-CDF gamma reparameterisation (ppl.families.gamma) against 50-digit mpmath references.

The reference for each (a, u) solves P(a, x) = u (or Q(a, x) = 1 - u for u >= 0.5) for log x with
mpmath.findroot at 50 digits and differentiates implicitly,
d log x / da = -(dP/da)(a, x) / (x f(x)), with dP/da by mpmath.diff. The 135 references are
computed once per session (~3 s).
"""

from __future__ import annotations

import functools

import autograd.numpy as anp
import mpmath
import numpy as np
import pytest
import scipy.stats
from autograd import elementwise_grad, grad, value_and_grad
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import gammaincinv, gammaln, polygamma

from ppl.families import GammaFamily, gamma_entropy, gamma_sample, gamma_sample_log
from ppl.families.gamma import _softplus_inv, _std_quantile, gamma_dlogx_da

GRID_A = np.logspace(-3, 4, 15)
GRID_U = np.array([1e-6, 1e-4, 0.01, 0.1, 0.5, 0.9, 0.99, 1 - 1e-4, 1 - 1e-6])
RATE = 2.5  # the grid tests use b = 2.5, so x = x_1 / 2.5 and every b-path is exercised
RTOL = 1e-4  # required accuracy
RTOL_EXACT = 1e-9  # what the method actually achieves (measured max ~1.3e-13); guards regressions
# Below this x is 0.0 or subnormal in float64 and x itself cannot be compared to 1e-4: there the
# tests compare log x (absolute error of log x = relative error of x) and d log x / da instead.
UNDERFLOW = 1e-300


@functools.cache
def _reference():
    """(log x_1, d log x_1 / da) at 50 digits for Gamma(a, 1) on GRID_A x GRID_U."""
    mpmath.mp.dps = 50
    log_x = np.empty((GRID_A.size, GRID_U.size))
    dlog = np.empty_like(log_x)
    for i, a_ in enumerate(GRID_A):
        for j, u_ in enumerate(GRID_U):
            a, u = mpmath.mpf(float(a_)), mpmath.mpf(float(u_))
            x0 = float(gammaincinv(a_, u_))  # only a starting point for the root finder
            y0 = mpmath.log(x0) if x0 > 1e-250 else (mpmath.log(u) + mpmath.loggamma(a + 1)) / a
            if u < 0.5:

                def eq(y, a=a, u=u):
                    return mpmath.log(mpmath.gammainc(a, 0, mpmath.exp(y), regularized=True)) - (
                        mpmath.log(u)
                    )

            else:

                def eq(y, a=a, u=u):
                    q = mpmath.gammainc(a, mpmath.exp(y), mpmath.inf, regularized=True)
                    return mpmath.log(q) - mpmath.log(1 - u)

            y = mpmath.findroot(eq, y0)
            x = mpmath.exp(y)
            dp_da = mpmath.diff(lambda s, x=x: mpmath.gammainc(s, 0, x, regularized=True), a)
            x_density = mpmath.exp(a * y - x - mpmath.loggamma(a))  # x f(x; a)
            log_x[i, j] = float(y)
            dlog[i, j] = float(-dp_da / x_density)
    return log_x, dlog


def _grid():
    a = np.repeat(GRID_A, GRID_U.size)
    u = np.tile(GRID_U, GRID_A.size)
    return a, u


def _rel(x, ref):
    return np.abs(x - ref) / np.abs(ref)


# --------------------------------------------------------------------------------------------------
# Accuracy against mpmath


@pytest.mark.slow
def test_log_sample_and_its_gradients_match_mpmath():
    ref_log_x1, ref_dlog = (v.ravel() for v in _reference())
    a, u = _grid()
    b = np.full_like(a, RATE)
    log_x = gamma_sample_log(a, b, u)
    dlog_da = elementwise_grad(gamma_sample_log, 0)(a, b, u)
    dlog_db = elementwise_grad(gamma_sample_log, 1)(a, b, u)
    for v in (log_x, dlog_da, dlog_db):
        assert np.all(np.isfinite(v))
    # log x is compared by absolute error: that is the relative error of x
    err_log_x = np.abs(log_x - (ref_log_x1 - np.log(RATE)))
    assert err_log_x.max() < RTOL
    assert err_log_x.max() < RTOL_EXACT * 10  # |log x| up to 1.4e4: allow its rounding
    assert _rel(dlog_da, ref_dlog).max() < RTOL_EXACT
    np.testing.assert_allclose(dlog_db, -1.0 / RATE, rtol=1e-15)


def test_sample_and_its_gradients_match_mpmath_where_x_is_representable():
    ref_log_x1, ref_dlog = (v.ravel() for v in _reference())
    a, u = _grid()
    b = np.full_like(a, RATE)
    x = gamma_sample(a, b, u)
    dx_da = elementwise_grad(gamma_sample, 0)(a, b, u)
    dx_db = elementwise_grad(gamma_sample, 1)(a, b, u)
    for v in (x, dx_da, dx_db):
        assert np.all(np.isfinite(v))
    ref_x = np.exp(ref_log_x1) / RATE
    ok = ref_x > UNDERFLOW  # elsewhere see the log test above; here x must just be ~0
    assert ok.sum() >= 120 and (~ok).sum() >= 5  # the grid does reach the underflow regime
    assert _rel(x[ok], ref_x[ok]).max() < RTOL_EXACT
    assert _rel(dx_da[ok], (ref_x * ref_dlog)[ok]).max() < RTOL_EXACT
    assert _rel(dx_db[ok], -ref_x[ok] / RATE).max() < RTOL_EXACT
    assert np.all(x[~ok] <= 1e-290) and np.all(np.abs(dx_da[~ok]) <= 1e-280)
    assert np.all(dx_db[~ok] <= 0.0)


def test_required_accuracy_everywhere():
    """Relative error < 1e-4 for x and dx/da (d log x / da has the relative error of dx/da); on
    the log scale where x < 1e-300. dx/db = -x/b is exact by construction (tested above)."""
    ref_log_x1, ref_dlog = (v.ravel() for v in _reference())
    a, u = _grid()
    x1, log_x1 = _std_quantile(a, u)
    dlog = gamma_dlogx_da(a, log_x1)
    small = np.exp(ref_log_x1) <= UNDERFLOW
    err_x = np.abs(log_x1 - ref_log_x1)
    err_x[~small] = _rel(x1[~small], np.exp(ref_log_x1[~small]))
    err_d = _rel(dlog, ref_dlog)  # = relative error of dx/da where x is representable
    assert np.all(np.isfinite(x1)) and np.all(np.isfinite(log_x1)) and np.all(np.isfinite(dlog))
    assert err_x.max() < RTOL and err_d.max() < RTOL


def test_no_nan_or_inf_at_extremes():
    a = np.array([1e-8, 1e-6, 1e-3, 0.1, 1.0, 9.99, 10.0, 1e3, 1e6, 1e8])[:, None]
    u = np.array([0.0, 1e-300, 1e-12, 1e-6, 0.5, 1 - 1e-6, 1 - 1e-12, 1.0])[None, :]
    b = np.array([1e-3, 1.0, 1e3])[:, None, None]
    for f in (gamma_sample, gamma_sample_log):
        out = f(a, b, u)
        assert out.shape == (3, 10, 8)
        assert np.all(np.isfinite(out))
        for argnum in (0, 1):
            g = elementwise_grad(f, argnum)(a * np.ones((3, 10, 8)), b * np.ones((3, 10, 8)), u)
            assert np.all(np.isfinite(g)), (f.__name__, argnum)
    assert np.all(gamma_sample(a, 1.0, u) >= 0.0)
    # monotone in u
    assert np.all(np.diff(gamma_sample_log(a, 1.0, u), axis=1) >= 0.0)


@settings(max_examples=200, deadline=None)
@given(
    log10_a=st.floats(-3.0, 5.0),
    u=st.floats(1e-10, 1 - 1e-10),
)
def test_dlogx_da_matches_finite_differences_of_the_quantile(log10_a, u):
    """Random (a, u), so the regime boundaries of the derivative are crossed at random points."""
    a = 10.0**log10_a
    h = 1e-5 * a
    _, lo = _std_quantile(np.array(a - h), np.array(u))
    _, hi = _std_quantile(np.array(a + h), np.array(u))
    _, mid = _std_quantile(np.array(a), np.array(u))
    fd = (hi - lo) / (2 * h)
    exact = gamma_dlogx_da(a, mid)
    # FD error: O(h^2) truncation + rounding of log x (~1e-16 |log x|) / h
    tol = 1e-6 * abs(exact) + 4e-16 * max(1.0, abs(float(mid))) / h
    assert abs(exact - fd) <= tol


# --------------------------------------------------------------------------------------------------
# Autograd: broadcasting and finite differences


def _central_fd(f, x, h):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = h if np.ndim(h) == 0 else h[i]
        g[i] = (f(x + e) - f(x - e)) / (2 * e[i])
    return g


@pytest.mark.parametrize(
    "shape_a, shape_b, shape_u",
    [((4,), (4,), (6, 4)), ((), (4,), (6, 1)), ((6, 1), (), (6, 4)), ((1, 4), (6, 1), (4,))],
)
@pytest.mark.parametrize("fn", [gamma_sample, gamma_sample_log])
def test_autograd_gradient_with_broadcasting_matches_finite_differences(
    fn, shape_a, shape_b, shape_u
):
    rng = np.random.default_rng(3)
    a = 10 ** rng.uniform(-1.5, 3.0, size=shape_a)
    b = 10 ** rng.uniform(-1.0, 1.0, size=shape_b)
    u = rng.uniform(0.01, 0.99, size=shape_u)
    out_shape = np.broadcast_shapes(shape_a, shape_b, shape_u)
    w = rng.normal(size=out_shape)

    def objective(a, b):
        x = fn(a, b, u)
        return anp.sum(w * anp.sin(x / (1.0 + anp.abs(x))))

    ga = grad(objective, 0)(a, b)
    gb = grad(objective, 1)(a, b)
    assert np.shape(ga) == shape_a and np.shape(gb) == shape_b
    fd_a = _central_fd(lambda v: objective(v, b), a, 1e-6 * np.asarray(a))
    fd_b = _central_fd(lambda v: objective(a, v), b, 1e-6 * np.asarray(b))
    np.testing.assert_allclose(ga, fd_a, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(gb, fd_b, rtol=1e-5, atol=1e-9)


def test_log_sample_gradient_in_the_underflow_regime_matches_finite_differences():
    a, b = np.array([1e-3, 3e-3]), np.array([0.5, 4.0])
    u = np.array([[1e-6, 1e-4], [0.01, 0.5]])
    assert np.all(gamma_sample(a, b, u)[0] == 0.0)  # x underflows, log x does not
    objective = lambda a, b: anp.sum(gamma_sample_log(a, b, u) * np.array([1.0, -2.0]))  # noqa: E731
    # |log x| ~ 1e4 here, so its rounding (~1e-12) needs a large step: h = 1e-4 (relative)
    fd_a = _central_fd(lambda v: objective(v, b), a, 1e-4 * a)
    fd_b = _central_fd(lambda v: objective(a, v), b, 1e-4 * b)
    np.testing.assert_allclose(grad(objective, 0)(a, b), fd_a, rtol=1e-6)
    np.testing.assert_allclose(grad(objective, 1)(a, b), fd_b, rtol=1e-6)


# --------------------------------------------------------------------------------------------------
# Monte Carlo: unbiased pathwise gradients of E[x] = a / b


@pytest.mark.slow
@pytest.mark.parametrize("a, b", [(0.05, 2.0), (1.0, 0.5), (30.0, 3.0), (3000.0, 10.0)])
def test_pathwise_gradient_of_the_mean_is_unbiased(a, b):
    n = 100_000
    u = np.random.default_rng(11).uniform(size=n)
    per_draw_a = elementwise_grad(gamma_sample, 0)(np.full(n, a), b, u)
    per_draw_b = elementwise_grad(gamma_sample, 1)(a, np.full(n, b), u)
    for draws, exact in ((per_draw_a, 1.0 / b), (per_draw_b, -a / b**2)):
        se = draws.std() / np.sqrt(n)
        assert abs(draws.mean() - exact) < 5 * se + 1e-12 * abs(exact)
    # the same through the scalar parameters (unbroadcast sums the per-draw gradients)
    mean_x = lambda a, b: anp.mean(gamma_sample(a, b, u))  # noqa: E731
    assert grad(mean_x, 0)(a, b) == pytest.approx(per_draw_a.mean(), rel=1e-12)
    assert grad(mean_x, 1)(a, b) == pytest.approx(per_draw_b.mean(), rel=1e-12)


# --------------------------------------------------------------------------------------------------
# Entropy and the family


def test_entropy_matches_scipy_and_its_gradient_is_exact():
    a = np.array([1e-3, 0.3, 1.0, 7.0, 2e3])
    b = np.array([0.1, 1.0, 3.0, 1e-2, 50.0])
    np.testing.assert_allclose(
        gamma_entropy(a, b), scipy.stats.gamma(a, scale=1 / b).entropy(), rtol=1e-10
    )
    np.testing.assert_allclose(
        elementwise_grad(gamma_entropy, 0)(a, b), 1.0 + (1.0 - a) * polygamma(1, a), rtol=1e-10
    )
    np.testing.assert_allclose(elementwise_grad(gamma_entropy, 1)(a, b), -1.0 / b, rtol=1e-14)


def test_family_parameters_moments_and_sampling():
    fam = GammaFamily(3)
    params = fam.init(mean=[0.5, 2.0, 40.0], shape=10.0)
    assert params.shape == (6,)
    a, b = fam.shape_rate(params)
    np.testing.assert_allclose(a, 10.0)
    np.testing.assert_allclose(fam.mean(params), [0.5, 2.0, 40.0])
    np.testing.assert_allclose(fam.var(params), np.array([0.5, 2.0, 40.0]) ** 2 / 10.0)
    params = params + np.array([0.3, -2.0, 4.0, 0.1, 0.2, -0.5])
    a, b = fam.shape_rate(params)
    u = np.random.default_rng(0).uniform(size=(50, 3))
    x = fam.sample(params, u)
    assert x.shape == (50, 3)
    np.testing.assert_allclose(x, scipy.stats.gamma(a, scale=1 / b).ppf(u), rtol=1e-10)
    np.testing.assert_allclose(fam.sample_log(params, u), np.log(x), rtol=1e-12)
    assert fam.entropy(params) == pytest.approx(np.sum(gamma_entropy(a, b)))
    np.testing.assert_allclose(
        fam.log_density(params, x),
        scipy.stats.gamma(a, scale=1 / b).logpdf(x).sum(axis=-1),
        rtol=1e-10,
    )
    # differentiable in the unconstrained parameters
    objective = lambda p: anp.sum(anp.sqrt(fam.sample(p, u))) + fam.entropy(p)  # noqa: E731
    np.testing.assert_allclose(
        grad(objective)(params), _central_fd(objective, params, 1e-6), rtol=1e-6, atol=1e-8
    )


def test_elbo_recovers_the_conjugate_gamma_poisson_posterior():
    """lambda ~ Gamma(2, 1), y_i ~ Poisson(lambda): the posterior Gamma(2 + sum y, 1 + n) is in the
    family, so maximising the ELBO (fixed stratified u, L-BFGS on exact gradients) must find it."""
    rng = np.random.default_rng(5)
    y = rng.poisson(3.0, size=25)
    post_a, post_b = 2.0 + y.sum(), 1.0 + y.size
    n_draws = 2000
    u = ((np.arange(n_draws) + rng.uniform(size=n_draws)) / n_draws)[:, None]  # (S, 1)
    fam = GammaFamily(1)

    def log_joint(lam):  # (S, 1) -> (S,)
        log_prior = 2.0 * np.log(1.0) - gammaln(2.0) + (2.0 - 1.0) * anp.log(lam) - 1.0 * lam
        log_lik = y.sum() * anp.log(lam) - y.size * lam - np.sum(gammaln(y + 1.0))
        return (log_prior + log_lik)[:, 0]

    def neg_elbo(params):
        return -(anp.mean(log_joint(fam.sample(params, u))) + fam.entropy(params))

    result = minimize(value_and_grad(neg_elbo), fam.init(mean=1.0), jac=True, method="L-BFGS-B")
    assert result.success
    a, b = fam.shape_rate(result.x)
    assert a[0] == pytest.approx(post_a, rel=0.02)
    assert b[0] == pytest.approx(post_b, rel=0.02)


@pytest.mark.parametrize("shape", [1e-3, 0.01, 1.0, 30.0, 1e5])
def test_natural_factor_is_the_inverse_fisher_information(shape):
    """L L^T = F^-1 with F the Fisher information of Gamma(a, b) in (a, b), [[trigamma(a),
    -1/b], [-1/b, a/b^2]], carried to (alpha, beta) = softplus^-1(a, b) by the chain rule."""
    fam = GammaFamily(2)
    rates = np.array([0.3, 7.0])
    params = _softplus_inv(np.array([shape, shape, *rates]))
    L = fam.natural_factor(params)
    for k, b in enumerate(rates):
        info = np.array([[polygamma(1, shape), -1 / b], [-1 / b, shape / b**2]])
        D = np.diag(-np.expm1(-np.array([shape, b])))  # softplus' = 1 - e^-softplus
        fisher = D @ info @ D
        np.testing.assert_allclose(L[k] @ L[k].T @ fisher, np.eye(2), atol=1e-6)
