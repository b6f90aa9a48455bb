"""Log CDFs and complementary log CDFs (ppl.library.distributions.cdfs and the
`_cdf`/`_lcdf`/`_lccdf`
library functions): against scipy.stats, in the tails, over batch axes, and differentiated
(closed forms by autograd, shape parameters by the documented central difference, both
against mpmath or finite differences)."""

from __future__ import annotations

import autograd.numpy as anp
import mpmath
import numpy as np
import pytest
from autograd import grad
from scipy import stats

from ppl.language.types import REAL, VECTOR
from ppl.library.distributions.cdfs import CDFS, log_betainc, log_gammainc_p, log_gammainc_q
from ppl.library.functions import LIBRARY

# name: (parameters, scipy frozen distribution, points y)
CASES = {
    "normal": ((0.3, 1.7), lambda m, s: stats.norm(m, s), [-30.0, -2.0, 0.1, 3.0, 30.0]),
    "std_normal": ((), lambda: stats.norm(), [-20.0, -1.0, 0.5, 20.0]),
    "cauchy": ((0.3, 1.7), lambda m, s: stats.cauchy(m, s), [-1e6, -2.0, 0.1, 3.0, 1e6]),
    "double_exponential": (
        (0.3, 1.7),
        lambda m, s: stats.laplace(m, s),
        [-50.0, -2.0, 0.3, 3.0, 50.0],
    ),
    "logistic": ((0.3, 1.7), lambda m, s: stats.logistic(m, s), [-500.0, -2.0, 0.1, 3.0, 500.0]),
    "student_t": ((3.5, 0.3, 1.7), lambda n, m, s: stats.t(n, m, s), [-300.0, -2.0, 0.3, 3.0]),
    "gumbel": ((0.3, 1.7), lambda m, b: stats.gumbel_r(m, b), [-3.0, 0.1, 3.0, 40.0]),
    "exp_mod_normal": (
        (0.3, 1.2, 0.8),
        lambda m, s, lam: stats.exponnorm(1 / (s * lam), m, s),
        [-3.0, 0.1, 3.0, 8.0],
    ),
    "skew_normal": ((0.3, 1.2, 2.0), lambda x, o, a: stats.skewnorm(a, x, o), [-1.0, 0.3, 2.0]),
    "lognormal": ((0.3, 0.7), lambda m, s: stats.lognorm(s, scale=np.exp(m)), [0.05, 1.0, 4.0]),
    "exponential": ((1.3,), lambda b: stats.expon(scale=1 / b), [1e-8, 0.5, 3.0, 40.0]),
    "weibull": ((2.5, 1.3), lambda a, s: stats.weibull_min(a, scale=s), [0.01, 1.0, 3.0]),
    "frechet": ((2.5, 1.3), lambda a, s: stats.invweibull(a, scale=s), [0.3, 1.0, 30.0]),
    "rayleigh": ((1.3,), lambda s: stats.rayleigh(scale=s), [0.01, 1.0, 6.0]),
    "loglogistic": ((1.3, 2.5), lambda a, b: stats.fisk(b, scale=a), [0.01, 1.0, 30.0]),
    "gamma": ((2.5, 1.3), lambda a, b: stats.gamma(a, scale=1 / b), [0.01, 1.0, 5.0, 30.0]),
    "inv_gamma": ((2.5, 1.3), lambda a, b: stats.invgamma(a, scale=b), [0.05, 0.5, 5.0]),
    "chi_square": ((3.5,), lambda n: stats.chi2(n), [0.01, 2.0, 30.0]),
    "inv_chi_square": ((3.5,), lambda n: stats.invgamma(n / 2, scale=0.5), [0.05, 0.5, 5.0]),
    "scaled_inv_chi_square": (
        (3.5, 0.8),
        lambda n, s: stats.invgamma(n / 2, scale=n * s * s / 2),
        [0.05, 0.5, 5.0],
    ),
    "beta": ((2.5, 1.3), lambda a, b: stats.beta(a, b), [0.001, 0.4, 0.999]),
    "uniform": ((-1.0, 2.0), lambda a, b: stats.uniform(a, b - a), [-0.5, 0.5, 1.9]),
    "pareto": ((0.5, 2.5), lambda m, a: stats.pareto(a, scale=m), [0.6, 2.0, 50.0]),
    "pareto_type_2": (
        (0.1, 1.3, 2.5),
        lambda m, lam, a: stats.lomax(a, m, lam),
        [0.2, 2.0, 50.0],
    ),
    "poisson": ((3.5,), lambda lam: stats.poisson(lam), [0, 2, 3, 15]),
    "binomial": ((10, 0.3), lambda n, t: stats.binom(n, t), [0, 3, 9, 10]),
    "neg_binomial_2": (
        (3.0, 2.5),
        lambda mu, phi: stats.nbinom(phi, phi / (mu + phi)),
        [0, 2, 10],
    ),
    "bernoulli": ((0.3,), lambda t: stats.bernoulli(t), [0, 1]),
}


def test_every_cdf_is_tested():
    assert set(CASES) == set(CDFS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_lcdf_and_lccdf_match_scipy(name):
    params, frozen, points = CASES[name]
    ref = frozen(*params)
    y = np.array(points, dtype=float)
    lcdf, lccdf = CDFS[name]
    np.testing.assert_allclose(lcdf(y, *params), ref.logcdf(y), rtol=1e-7, atol=1e-12)
    np.testing.assert_allclose(lccdf(y, *params), ref.logsf(y), rtol=1e-7, atol=1e-12)


@pytest.mark.parametrize("name", sorted(CASES))
def test_library_functions_sum_over_elements_and_batch(name):
    params, frozen, points = CASES[name]
    y = np.array(points, dtype=float)
    types = [VECTOR] + [REAL] * len(params)
    total = LIBRARY[f"{name}_lcdf"].impl([y, *params], types)
    np.testing.assert_allclose(total, np.sum(frozen(*params).logcdf(y)), rtol=1e-7)
    prob = LIBRARY[f"{name}_cdf"].impl([y[:1], *params], types)
    np.testing.assert_allclose(prob, frozen(*params).cdf(y[:1]), rtol=1e-7)
    if params:  # a batch of draws of the first parameter: one total per draw
        batch = np.array([params[0], params[0]], dtype=float)
        got = LIBRARY[f"{name}_lccdf"].impl([y, batch, *params[1:]], types)
        assert got.shape == (2,)
        np.testing.assert_allclose(got, np.sum(frozen(*params).logsf(y)), rtol=1e-7)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_against_finite_differences(name):
    params, _, points = CASES[name]
    discrete = name in ("poisson", "binomial", "neg_binomial_2", "bernoulli")
    y = np.array(points[1:-1] or points[:1], dtype=float)
    args = [y] + [np.array(float(p)) for p in params]
    integer = {"binomial": (1,), "uniform": (), "pareto": ()}.get(name, ())
    for fn in CDFS[name]:
        for i in range(len(args)):
            if (i == 0 and discrete) or i in integer:
                continue

            def f(a, i=i, fn=fn):
                return anp.sum(fn(*args[:i], a, *args[i + 1 :]))

            g = grad(f)(args[i])
            h = 1e-6 * max(1.0, float(np.max(np.abs(args[i]))))
            fd = (f(args[i] + h) - f(args[i] - h)) / (2 * h)
            np.testing.assert_allclose(np.sum(g), fd, rtol=2e-5, atol=1e-8)


def test_shape_derivatives_against_mpmath():
    mpmath.mp.dps = 30
    a, b, x = 2.5, 1.3, 0.4
    exact_p = mpmath.diff(lambda s: mpmath.log(mpmath.gammainc(s, 0, x, regularized=True)), a)
    exact_q = mpmath.diff(
        lambda s: mpmath.log(mpmath.gammainc(s, x, mpmath.inf, regularized=True)), a
    )
    exact_i = mpmath.diff(lambda s: mpmath.log(mpmath.betainc(s, b, 0, x, regularized=True)), a)
    exact_j = mpmath.diff(lambda s: mpmath.log(mpmath.betainc(a, s, 0, x, regularized=True)), b)
    np.testing.assert_allclose(grad(lambda s: log_gammainc_p(s, x))(a), float(exact_p), rtol=1e-7)
    np.testing.assert_allclose(grad(lambda s: log_gammainc_q(s, x))(a), float(exact_q), rtol=1e-7)
    np.testing.assert_allclose(grad(lambda s: log_betainc(s, b, x))(a), float(exact_i), rtol=1e-7)
    np.testing.assert_allclose(grad(lambda s: log_betainc(a, s, x))(b), float(exact_j), rtol=1e-7)
