"""Tests for ppl.library.distributions: scipy agreement, support, gradients, samplers, name
lookup."""

from __future__ import annotations

import warnings

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from scipy import special, stats

from ppl.library.distributions import DISTRIBUTIONS, SUPPORTS, get_distribution

VALUE_SHAPE = (3, 4)
PARAM_SHAPES = [(4,), (3, 1), ()]


def _u(lo: float, hi: float):
    return lambda rng, shape: rng.uniform(lo, hi, size=shape)


def _ints(lo: int, hi: int):
    return lambda rng, shape: rng.integers(lo, hi + 1, size=shape)


def _invgamma(y, a, scale):
    return stats.invgamma.logpdf(y, a, scale=scale)


# name: (value sampler, parameter samplers, scipy reference log density)
UNIVARIATE = {
    "normal": (_u(-3, 3), [_u(-1, 1), _u(0.5, 2)], lambda y, m, s: stats.norm.logpdf(y, m, s)),
    "student_t": (
        _u(-5, 5),
        [_u(0.5, 10), _u(-1, 1), _u(0.5, 2)],
        lambda y, n, m, s: stats.t.logpdf(y, n, m, s),
    ),
    "cauchy": (_u(-5, 5), [_u(-1, 1), _u(0.5, 2)], lambda y, m, s: stats.cauchy.logpdf(y, m, s)),
    "double_exponential": (
        _u(-5, 5),
        [_u(-1, 1), _u(0.5, 2)],
        lambda y, m, s: stats.laplace.logpdf(y, m, s),
    ),
    "logistic": (
        _u(-40, 40),
        [_u(-1, 1), _u(0.5, 2)],
        lambda y, m, s: stats.logistic.logpdf(y, m, s),
    ),
    "lognormal": (
        _u(-0.5, 5),
        [_u(-1, 1), _u(0.5, 2)],
        lambda y, m, s: stats.lognorm.logpdf(y, s, scale=np.exp(m)),
    ),
    "exponential": (
        _u(-0.5, 5),
        [_u(0.2, 3)],
        lambda y, b: stats.expon.logpdf(y, scale=1 / b),
    ),
    "gamma": (
        _u(-0.5, 5),
        [_u(0.5, 5), _u(0.2, 3)],
        lambda y, a, b: stats.gamma.logpdf(y, a, scale=1 / b),
    ),
    "inv_gamma": (_u(-0.5, 5), [_u(0.5, 5), _u(0.2, 3)], _invgamma),
    "weibull": (
        _u(-0.5, 5),
        [_u(0.5, 5), _u(0.2, 3)],
        lambda y, a, s: stats.weibull_min.logpdf(y, a, scale=s),
    ),
    "beta": (_u(-0.2, 1.2), [_u(0.5, 5), _u(0.5, 5)], lambda y, a, b: stats.beta.logpdf(y, a, b)),
    "uniform": (
        _u(-2, 5),
        [_u(-1, 1), _u(2, 4)],
        lambda y, a, b: stats.uniform.logpdf(y, a, b - a),
    ),
    "chi_square": (_u(-0.5, 8), [_u(0.5, 6)], lambda y, n: stats.chi2.logpdf(y, n)),
    "inv_chi_square": (_u(-0.5, 3), [_u(0.5, 6)], lambda y, n: _invgamma(y, n / 2, 0.5)),
    "scaled_inv_chi_square": (
        _u(-0.5, 3),
        [_u(0.5, 6), _u(0.3, 2)],
        lambda y, n, s: _invgamma(y, n / 2, n * s * s / 2),
    ),
    "pareto": (
        _u(0.2, 6),
        [_u(0.5, 2), _u(0.5, 4)],
        lambda y, m, a: stats.pareto.logpdf(y, a, scale=m),
    ),
    "bernoulli": (_ints(0, 1), [_u(0.05, 0.95)], lambda y, t: stats.bernoulli.logpmf(y, t)),
    "bernoulli_logit": (
        _ints(0, 1),
        [_u(-30, 30)],
        # scipy's bernoulli loses digits in log(1 - expit(a)); log_expit is exact
        lambda y, a: np.where(y == 1, special.log_expit(a), special.log_expit(-a)),
    ),
    "binomial": (
        _ints(0, 12),
        [_ints(0, 10), _u(0.05, 0.95)],
        lambda n, N, t: stats.binom.logpmf(n, N, t),
    ),
    "binomial_logit": (
        _ints(0, 12),
        [_ints(0, 10), _u(-4, 4)],
        lambda n, N, a: stats.binom.logpmf(n, N, special.expit(a)),
    ),
    "beta_binomial": (
        _ints(0, 12),
        [_ints(0, 10), _u(0.5, 4), _u(0.5, 4)],
        lambda n, N, a, b: stats.betabinom.logpmf(n, N, a, b),
    ),
    "poisson": (_ints(0, 15), [_u(0.1, 10)], lambda n, lam: stats.poisson.logpmf(n, lam)),
    "poisson_log": (
        _ints(0, 15),
        [_u(-3, 3)],
        lambda n, a: stats.poisson.logpmf(n, np.exp(a)),
    ),
    "neg_binomial_2": (
        _ints(0, 15),
        [_u(0.1, 10), _u(0.2, 50)],
        lambda n, mu, phi: stats.nbinom.logpmf(n, phi, phi / (mu + phi)),
    ),
    "std_normal": (_u(-5, 5), [], lambda y: stats.norm.logpdf(y)),
    "skew_normal": (
        _u(-5, 5),
        [_u(-1, 1), _u(0.5, 2), _u(-4, 4)],
        lambda y, xi, om, a: stats.skewnorm.logpdf(y, a, xi, om),
    ),
    "von_mises": (
        _u(-3, 3),
        [_u(-1, 1), _u(0.1, 30)],
        lambda y, m, k: stats.vonmises.logpdf(y, k, m),
    ),
    "gumbel": (_u(-5, 5), [_u(-1, 1), _u(0.5, 2)], lambda y, m, b: stats.gumbel_r.logpdf(y, m, b)),
    "exp_mod_normal": (
        _u(-5, 5),
        [_u(-1, 1), _u(0.5, 2), _u(0.3, 3)],
        lambda y, m, s, lam: stats.exponnorm.logpdf(y, 1 / (s * lam), m, s),
    ),
    "frechet": (
        _u(-0.5, 5),
        [_u(0.5, 5), _u(0.2, 3)],
        lambda y, a, s: stats.invweibull.logpdf(y, a, scale=s),
    ),
    "rayleigh": (_u(-0.5, 5), [_u(0.3, 3)], lambda y, s: stats.rayleigh.logpdf(y, scale=s)),
    "pareto_type_2": (
        _u(-0.5, 6),
        [_u(-0.3, 0.3), _u(0.5, 2), _u(0.5, 4)],
        lambda y, m, lam, a: stats.lomax.logpdf(y, a, m, lam),
    ),
    "beta_proportion": (
        _u(-0.2, 1.2),
        [_u(0.1, 0.9), _u(0.5, 10)],
        lambda y, m, k: stats.beta.logpdf(y, m * k, (1 - m) * k),
    ),
    "loglogistic": (
        _u(-0.5, 5),
        [_u(0.5, 3), _u(0.5, 4)],
        lambda y, a, b: stats.fisk.logpdf(y, b, scale=a),
    ),
    "neg_binomial": (
        _ints(0, 15),
        [_u(0.2, 10), _u(0.1, 3)],
        lambda n, a, b: stats.nbinom.logpmf(n, a, b / (1 + b)),
    ),
    "neg_binomial_2_log": (
        _ints(0, 15),
        [_u(-3, 3), _u(0.2, 50)],
        lambda n, eta, phi: stats.nbinom.logpmf(n, phi, phi / (np.exp(eta) + phi)),
    ),
    "discrete_range": (
        _ints(-2, 8),
        [_ints(-1, 1), _ints(3, 6)],
        lambda y, lo, hi: stats.randint.logpmf(y, lo, hi + 1),
    ),
}


def _args(name: str, seed: int = 0):
    """A value grid of shape (3, 4) and parameters of shapes (4,), (3, 1), () in turn."""
    rng = np.random.default_rng(seed)
    value_fn, param_fns, ref = UNIVARIATE[name]
    value = value_fn(rng, VALUE_SHAPE)
    params = [fn(rng, PARAM_SHAPES[i % 3]) for i, fn in enumerate(param_fns)]
    return value, params, ref


#: distributions whose values are vectors or matrices, or whose parameters are (GLMs, ordinal)
VALUE_NDIM = {
    "multi_normal": 1,
    "multi_normal_cholesky": 1,
    "multi_normal_prec": 1,
    "multi_student_t": 1,
    "multi_student_t_cholesky": 1,
    "dirichlet": 1,
    "multinomial": 1,
    "multinomial_logit": 1,
    "lkj_corr": 2,
    "lkj_corr_cholesky": 2,
    "wishart": 2,
    "inv_wishart": 2,
    "bernoulli_logit_glm": 1,
    "poisson_log_glm": 1,
    "neg_binomial_2_log_glm": 1,
    "normal_id_glm": 1,
    "categorical_logit_glm": 1,
}
#: tested in tests/library/test_distributions_stdlib.py or below
OTHERS = {"categorical", "categorical_logit", "ordered_logistic", "ordered_probit"}


def test_every_distribution_is_tested_and_well_formed():
    assert set(DISTRIBUTIONS) == set(UNIVARIATE) | set(VALUE_NDIM) | OTHERS
    for name, d in DISTRIBUTIONS.items():
        assert d.name == name
        assert len(d.param_ndims) == len(d.params)
        assert d.param_min_ndims is None or len(d.param_min_ndims) == len(d.params)
        assert d.support in SUPPORTS
        assert d.value_ndim == VALUE_NDIM.get(name, 0)
    assert DISTRIBUTIONS["multi_normal"].param_ndims == (1, 2)
    assert DISTRIBUTIONS["dirichlet"].param_ndims == (1,)
    assert DISTRIBUTIONS["categorical"].param_ndims == (1,)
    assert DISTRIBUTIONS["poisson"].discrete and not DISTRIBUTIONS["normal"].discrete
    assert DISTRIBUTIONS["student_t"].params == ("nu", "mu", "sigma")


@pytest.mark.parametrize("name", sorted(UNIVARIATE))
def test_univariate_matches_scipy_with_broadcasting(name):
    value, params, ref = _args(name)
    d = DISTRIBUTIONS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = d.log_prob(value, *params)
    expected = ref(value, *params)
    assert np.shape(got) == VALUE_SHAPE
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)
    # a single scalar evaluation gives a scalar
    scalar = d.log_prob(float(value[0, 0]), *(float(np.ravel(p)[0]) for p in params))
    assert np.shape(scalar) == ()


@pytest.mark.parametrize("name", sorted(UNIVARIATE))
def test_batch_shape_comes_from_parameters_too(name):
    value, params, ref = _args(name, seed=1)
    scalar_value = value[0, 0]
    got = DISTRIBUTIONS[name].log_prob(scalar_value, *params)
    expected = ref(scalar_value, *params)
    assert np.shape(got) == np.shape(expected)
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-10)


OUT_OF_SUPPORT = [
    ("lognormal", [-1.0, 0.0], (0.0, 1.0)),
    ("exponential", [-1e-3, -np.inf], (2.0,)),
    ("gamma", [-1.0, 0.0], (2.0, 1.0)),
    ("inv_gamma", [-1.0, 0.0], (2.0, 1.0)),
    ("weibull", [-1.0], (2.0, 1.0)),
    ("beta", [-0.1, 0.0, 1.0, 1.5], (2.0, 3.0)),
    ("uniform", [-1.01, 2.5], (-1.0, 2.0)),
    ("chi_square", [-1.0, 0.0], (3.0,)),
    ("inv_chi_square", [-1.0, 0.0], (3.0,)),
    ("scaled_inv_chi_square", [-1.0, 0.0], (3.0, 1.0)),
    ("pareto", [0.5, -1.0], (1.0, 2.0)),
    ("bernoulli", [-1, 2, 0.5], (0.3,)),
    ("bernoulli_logit", [-1, 2, 0.5], (0.3,)),
    ("binomial", [-1, 6, 2.5], (5, 0.3)),
    ("binomial_logit", [-1, 6, 2.5], (5, 0.3)),
    ("beta_binomial", [-1, 6, 2.5], (5, 2.0, 3.0)),
    ("poisson", [-1, 2.5], (3.0,)),
    ("poisson_log", [-1, 2.5], (1.0,)),
    ("neg_binomial_2", [-1, 2.5], (3.0, 2.0)),
    ("neg_binomial", [-1, 2.5], (3.0, 2.0)),
    ("neg_binomial_2_log", [-1, 2.5], (0.3, 2.0)),
    ("frechet", [-1.0, 0.0], (2.0, 1.0)),
    ("rayleigh", [-1.0], (2.0,)),
    ("pareto_type_2", [-1.0], (0.0, 1.0, 2.0)),
    ("beta_proportion", [-0.1, 0.0, 1.0], (0.3, 4.0)),
    ("loglogistic", [-1.0, 0.0], (1.0, 2.0)),
    ("discrete_range", [-1, 4, 1.5], (0, 3)),
    ("ordered_logistic", [0, 4, 1.5], (0.3, np.array([-1.0, 0.0]))),
    ("ordered_probit", [0, 4, 1.5], (0.3, np.array([-1.0, 0.0]))),
    ("categorical", [0, 4, 1.5], (np.array([0.2, 0.3, 0.5]),)),
    ("categorical_logit", [0, 4, 1.5], (np.array([0.2, 0.3, 0.5]),)),
]


@pytest.mark.parametrize("name, values, params", OUT_OF_SUPPORT)
def test_out_of_support_is_minus_inf_without_warnings(name, values, params):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = DISTRIBUTIONS[name].log_prob(np.array(values), *params)
    assert np.all(got == -np.inf)


def test_boundary_parameters_give_exact_values_without_nan():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = DISTRIBUTIONS["bernoulli"].log_prob(np.array([0, 1, 0, 1]), np.array([0, 1, 1, 0.0]))
        p = DISTRIBUTIONS["poisson"].log_prob(np.array([0, 1]), 0.0)
        pl = DISTRIBUTIONS["poisson_log"].log_prob(np.array([0, 1]), -np.inf)
        c = DISTRIBUTIONS["categorical"].log_prob(np.array([1, 2]), np.array([0.0, 1.0]))
    np.testing.assert_array_equal(b, [0.0, 0.0, -np.inf, -np.inf])
    np.testing.assert_array_equal(p, [0.0, -np.inf])
    np.testing.assert_array_equal(pl, [0.0, -np.inf])
    np.testing.assert_array_equal(c, [-np.inf, 0.0])


def test_extreme_logits_are_stable():
    a = np.array([-800.0, 800.0])
    lp1 = DISTRIBUTIONS["bernoulli_logit"].log_prob(np.array([1, 0]), a)
    np.testing.assert_allclose(lp1, [-800.0, -800.0])
    lp2 = DISTRIBUTIONS["binomial_logit"].log_prob(np.array([0, 3]), 3, a)
    np.testing.assert_allclose(lp2, [0.0, 0.0], atol=1e-12)
    lp3 = DISTRIBUTIONS["logistic"].log_prob(np.array([-800.0, 800.0]), 0.0, 1.0)
    np.testing.assert_allclose(lp3, [-800.0, -800.0])


# ------------------------------------------------------------------ categorical / multivariate


def _simplex(rng, shape):
    g = rng.gamma(1.5, size=shape)
    return g / g.sum(axis=-1, keepdims=True)


def test_categorical_matches_scipy():
    rng = np.random.default_rng(3)
    theta = _simplex(rng, (4, 5))
    y = rng.integers(1, 6, size=VALUE_SHAPE)
    got = DISTRIBUTIONS["categorical"].log_prob(y, theta)
    th = np.broadcast_to(theta, VALUE_SHAPE + (5,))
    onehot = (y[..., None] == np.arange(1, 6)).astype(int)
    expected = stats.multinomial.logpmf(onehot, 1, th)
    assert got.shape == VALUE_SHAPE
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    beta = rng.normal(size=(3, 1, 5))
    got2 = DISTRIBUTIONS["categorical_logit"].log_prob(y, beta)
    softmax = np.exp(beta - special.logsumexp(beta, axis=-1, keepdims=True))
    expected2 = DISTRIBUTIONS["categorical"].log_prob(y, softmax)
    np.testing.assert_allclose(got2, expected2, rtol=1e-10)


def _spd(rng, batch, K):
    A = rng.normal(size=batch + (K, K))
    return A @ np.swapaxes(A, -1, -2) + K * np.eye(K)


def test_multi_normal_matches_scipy_batched():
    rng = np.random.default_rng(4)
    K = 3
    y = rng.normal(size=(3, 2, K))
    mu = rng.normal(size=(2, K))
    Sigma = _spd(rng, (3, 1), K)
    got = DISTRIBUTIONS["multi_normal"].log_prob(y, mu, Sigma)
    L = np.linalg.cholesky(Sigma)
    got_chol = DISTRIBUTIONS["multi_normal_cholesky"].log_prob(y, mu, L)
    assert got.shape == (3, 2) and got_chol.shape == (3, 2)
    for i in range(3):
        for j in range(2):
            ref = stats.multivariate_normal.logpdf(y[i, j], mu[j], Sigma[i, 0])
            np.testing.assert_allclose(got[i, j], ref, rtol=1e-10)
            np.testing.assert_allclose(got_chol[i, j], ref, rtol=1e-10)
    # batch shape can come from the covariance alone
    one = DISTRIBUTIONS["multi_normal"].log_prob(y[0, 0], mu[0], Sigma)
    assert one.shape == (3, 1)


def test_multi_normal_not_positive_definite_is_minus_inf():
    Sigma = np.array([[1.0, 2.0], [2.0, 1.0]])
    got = DISTRIBUTIONS["multi_normal"].log_prob(np.zeros((3, 2)), np.zeros(2), Sigma)
    np.testing.assert_array_equal(got, np.full(3, -np.inf))
    # in a batch, only the bad covariance gives -inf; the others keep their density and gradient
    batch = np.stack([np.eye(2), Sigma, 2 * np.eye(2)])
    mn = DISTRIBUTIONS["multi_normal"].log_prob
    got = mn(np.zeros(2), np.zeros(2), batch)
    assert got[1] == -np.inf
    np.testing.assert_allclose(got[[0, 2]], [-np.log(2 * np.pi), -np.log(4 * np.pi)])
    g = grad(
        lambda S: anp.sum(
            anp.where(
                anp.isfinite(mn(np.ones(2), np.zeros(2), S)), mn(np.ones(2), np.zeros(2), S), 0.0
            )
        )
    )(batch)
    assert np.all(np.isfinite(g)) and np.any(g[0] != 0)


def test_dirichlet_matches_scipy_and_support():
    rng = np.random.default_rng(5)
    y = _simplex(rng, (3, 4, 3))
    alpha = rng.uniform(0.5, 4, size=(4, 3))
    got = DISTRIBUTIONS["dirichlet"].log_prob(y, alpha)
    assert got.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            ref = stats.dirichlet.logpdf(y[i, j], alpha[j])
            np.testing.assert_allclose(got[i, j], ref, rtol=1e-10)
    bad = np.array([[0.5, 0.6, -0.1], [0.5, 0.6, 0.1], [0.0, 0.5, 0.5]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = DISTRIBUTIONS["dirichlet"].log_prob(bad, np.ones(3) * 2.0)
    np.testing.assert_array_equal(out, [-np.inf] * 3)


# ------------------------------------------------------------------ gradients


def _check_grad(f, args, argnum, direction, h=1e-5, rtol=1e-5, atol=1e-7):
    """Autograd's directional derivative of f against a central finite difference."""
    x = np.asarray(args[argnum], dtype=float)
    g = grad(lambda a: anp.sum(f(*args[:argnum], a, *args[argnum + 1 :])))(x)
    assert np.all(np.isfinite(g))
    plus = list(args)
    minus = list(args)
    plus[argnum] = x + h * direction
    minus[argnum] = x - h * direction
    fd = (np.sum(f(*plus)) - np.sum(f(*minus))) / (2 * h)
    np.testing.assert_allclose(np.sum(g * direction), fd, rtol=rtol, atol=atol)


# (value, params) well inside the support; argnums of the continuous arguments
GRAD_CASES = {
    "normal": ([0.3, -1.2, 2.0], [0.1, 1.3], (0, 1, 2)),
    "student_t": ([0.3, -1.2, 2.0], [3.5, 0.1, 1.3], (0, 1, 2, 3)),
    "cauchy": ([0.3, -1.2, 2.0], [0.1, 1.3], (0, 1, 2)),
    "double_exponential": ([0.3, -1.2, 2.0], [0.1, 1.3], (0, 1, 2)),
    "logistic": ([0.3, -1.2, 2.0], [0.1, 1.3], (0, 1, 2)),
    "lognormal": ([0.3, 1.2, 2.0], [0.1, 1.3], (0, 1, 2)),
    "exponential": ([0.3, 1.2, 2.0], [1.3], (0, 1)),
    "gamma": ([0.3, 1.2, 2.0], [2.5, 1.3], (0, 1, 2)),
    "inv_gamma": ([0.3, 1.2, 2.0], [2.5, 1.3], (0, 1, 2)),
    "weibull": ([0.3, 1.2, 2.0], [2.5, 1.3], (0, 1, 2)),
    "beta": ([0.3, 0.6, 0.9], [2.5, 1.3], (0, 1, 2)),
    "uniform": ([0.3, 0.6, 0.9], [-0.5, 1.3], (1, 2)),
    "chi_square": ([0.3, 1.2, 2.0], [2.5], (0, 1)),
    "inv_chi_square": ([0.3, 1.2, 2.0], [2.5], (0, 1)),
    "scaled_inv_chi_square": ([0.3, 1.2, 2.0], [2.5, 0.7], (0, 1, 2)),
    "pareto": ([1.3, 2.2, 3.0], [1.1, 2.5], (0, 1, 2)),
    "bernoulli": ([0, 1, 1], [0.3], (1,)),
    "bernoulli_logit": ([0, 1, 1], [0.3], (1,)),
    "binomial": ([0, 3, 5], [5, 0.3], (2,)),
    "binomial_logit": ([0, 3, 5], [5, 0.3], (2,)),
    "beta_binomial": ([0, 3, 5], [5, 1.5, 2.5], (2, 3)),
    "poisson": ([0, 3, 5], [2.5], (1,)),
    "poisson_log": ([0, 3, 5], [0.7], (1,)),
    "neg_binomial_2": ([0, 3, 5], [2.5, 3.5], (1, 2)),
    "std_normal": ([0.3, -1.2, 2.0], [], (0,)),
    "skew_normal": ([0.3, -1.2, 2.0], [0.1, 1.3, -2.5], (0, 1, 2, 3)),
    "von_mises": ([0.3, -1.2, 2.0], [0.1, 2.3], (0, 1, 2)),
    "gumbel": ([0.3, -1.2, 2.0], [0.1, 1.3], (0, 1, 2)),
    "exp_mod_normal": ([0.3, -1.2, 2.0], [0.1, 1.3, 0.8], (0, 1, 2, 3)),
    "frechet": ([0.3, 1.2, 2.0], [2.5, 1.3], (0, 1, 2)),
    "rayleigh": ([0.3, 1.2, 2.0], [1.3], (0, 1)),
    "pareto_type_2": ([0.3, 1.2, 2.0], [0.1, 1.3, 2.5], (0, 1, 2, 3)),
    "beta_proportion": ([0.3, 0.6, 0.9], [0.4, 5.3], (0, 1, 2)),
    "loglogistic": ([0.3, 1.2, 2.0], [1.4, 2.5], (0, 1, 2)),
    "neg_binomial": ([0, 3, 5], [2.5, 0.7], (1, 2)),
    "neg_binomial_2_log": ([0, 3, 5], [0.9, 3.5], (1, 2)),
}


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_match_finite_differences(name):
    value, params, argnums = GRAD_CASES[name]
    d = DISTRIBUTIONS[name]
    args = [np.array(value, dtype=float)] + [np.array(p, dtype=float) for p in params]
    for argnum in argnums:
        _check_grad(d.log_prob, args, argnum, np.ones_like(args[argnum]))


@pytest.mark.parametrize("name", sorted(GRAD_CASES))
def test_gradients_under_broadcasting(name):
    """Parameters of shapes (4,), (3, 1), () against values (3, 4): gradients keep their shape."""
    value, params, argnums = GRAD_CASES[name]
    d = DISTRIBUTIONS[name]
    rng = np.random.default_rng(10)
    args = [np.array(value, dtype=float)[:, None] * np.ones(4)]
    for i, p in enumerate(params):
        shape = PARAM_SHAPES[i % 3]
        if i + 1 in argnums:
            args.append(p * rng.uniform(0.95, 1.05, size=shape))
        else:
            args.append(np.full(shape, p))
    for argnum in argnums:
        g = grad(lambda a, k=argnum: anp.sum(d.log_prob(*args[:k], a, *args[k + 1 :])))(
            args[argnum]
        )
        assert np.shape(g) == np.shape(args[argnum])
        _check_grad(d.log_prob, args, argnum, rng.normal(size=np.shape(args[argnum])))


@pytest.mark.parametrize("name", ["gamma", "beta", "lognormal", "bernoulli", "poisson", "pareto"])
def test_gradients_stay_finite_outside_support(name):
    d = DISTRIBUTIONS[name]
    value = np.array([-1.0, 0.0, 0.5, 1.0, 1.5, 2.0])
    params = [np.array(p, dtype=float) for p in GRAD_CASES[name][1]]
    for i in range(len(params)):
        if i + 1 not in GRAD_CASES[name][2]:
            continue
        g = grad(
            lambda p, i=i: anp.sum(
                anp.where(
                    anp.isfinite(d.log_prob(value, *params[:i], p, *params[i + 1 :])),
                    d.log_prob(value, *params[:i], p, *params[i + 1 :]),
                    0.0,
                )
            )
        )(params[i])
        assert np.all(np.isfinite(g))


def test_gradients_categorical_and_multivariate():
    rng = np.random.default_rng(6)
    y = np.array([1, 3, 2, 3])
    theta = _simplex(rng, (4, 3))
    _check_grad(DISTRIBUTIONS["categorical"].log_prob, [y, theta], 1, rng.normal(size=(4, 3)))
    beta = rng.normal(size=(3,))
    _check_grad(DISTRIBUTIONS["categorical_logit"].log_prob, [y, beta], 1, rng.normal(size=3))

    K = 3
    yv = rng.normal(size=(2, K))
    mu = rng.normal(size=(K,))
    Sigma = _spd(rng, (2,), K)
    L = np.linalg.cholesky(Sigma)
    mn = DISTRIBUTIONS["multi_normal"].log_prob
    mnc = DISTRIBUTIONS["multi_normal_cholesky"].log_prob
    for f, cov, sym in ((mn, Sigma, True), (mnc, L, False)):
        args = [yv, mu, cov]
        _check_grad(f, args, 0, rng.normal(size=yv.shape))
        _check_grad(f, args, 1, rng.normal(size=mu.shape))
        E = rng.normal(size=cov.shape)
        E = E + np.swapaxes(E, -1, -2) if sym else np.tril(E)
        _check_grad(f, args, 2, E)
    # broadcast (unbatched) covariance against batched values: gradient keeps its shape
    g = grad(lambda S: anp.sum(mn(yv, mu, S)))(Sigma[0])
    assert g.shape == (K, K)

    ys = _simplex(rng, (2, 4))
    alpha = rng.uniform(0.5, 3, size=(4,))
    dr = DISTRIBUTIONS["dirichlet"].log_prob
    _check_grad(dr, [ys, alpha], 1, rng.normal(size=4))
    direction = rng.normal(size=(2, 4))
    direction -= direction.mean(axis=-1, keepdims=True)  # stay on the simplex
    _check_grad(dr, [ys, alpha], 0, direction)


# ------------------------------------------------------------------ samplers

N_DRAWS = 20000

# name, params, mean, variance
MOMENTS = [
    ("normal", (1.5, 2.0), 1.5, 4.0),
    ("gamma", (3.0, 2.0), 1.5, 0.75),
    ("inv_gamma", (5.0, 2.0), 0.5, 0.25 / 3),
    ("exponential", (2.0,), 0.5, 0.25),
    ("weibull", (2.0, 1.0), np.sqrt(np.pi) / 2, 1 - np.pi / 4),
    ("beta", (2.0, 3.0), 0.4, 0.04),
    ("uniform", (-1.0, 3.0), 1.0, 16 / 12),
    ("scaled_inv_chi_square", (10.0, 1.5), 10 / 8 * 2.25, 2 * 100 / (64 * 6) * 2.25**2),
    ("bernoulli_logit", (0.4,), special.expit(0.4), special.expit(0.4) * special.expit(-0.4)),
    ("binomial", (10, 0.3), 3.0, 2.1),
    ("poisson_log", (1.0,), np.e, np.e),
    ("neg_binomial_2", (4.0, 2.0), 4.0, 4.0 + 16.0 / 2.0),
    ("beta_binomial", (10, 2.0, 3.0), 4.0, 10 * 0.4 * 0.6 * (2 + 3 + 10) / (2 + 3 + 1)),
    ("std_normal", (), 0.0, 1.0),
    ("skew_normal", (0.5, 2.0, 3.0), 0.5 + 2.0 * 0.3 * np.sqrt(20 / np.pi), 4 * (1 - 1.8 / np.pi)),
    ("gumbel", (1.0, 2.0), 1.0 + 2.0 * np.euler_gamma, np.pi**2 / 6 * 4),
    ("exp_mod_normal", (1.0, 0.5, 2.0), 1.5, 0.25 + 0.25),
    ("rayleigh", (2.0,), 2.0 * np.sqrt(np.pi / 2), (4 - np.pi) / 2 * 4),
    ("frechet", (5.0, 1.0), special.gamma(0.8), special.gamma(0.6) - special.gamma(0.8) ** 2),
    ("pareto_type_2", (0.5, 1.0, 5.0), 0.75, 5 / (16 * 3)),
    ("beta_proportion", (0.3, 5.0), 0.3, 0.21 / 6),
    (
        "loglogistic",
        (1.0, 4.0),
        (np.pi / 4) / np.sin(np.pi / 4),
        (np.pi / 2) / np.sin(np.pi / 2) - ((np.pi / 4) / np.sin(np.pi / 4)) ** 2,
    ),
    ("neg_binomial", (3.0, 0.5), 6.0, 6.0 + 12.0),
    ("neg_binomial_2_log", (np.log(4.0), 2.0), 4.0, 4.0 + 16.0 / 2.0),
    ("von_mises", (0.5, 4.0), 0.5, 0.3),
    ("discrete_range", (2, 6), 4.0, 2.0),
]


@pytest.mark.parametrize("name, params, mean, var", MOMENTS)
def test_sample_moments(name, params, mean, var):
    rng = np.random.default_rng(7)
    draws = DISTRIBUTIONS[name].sample(rng, *params, size=N_DRAWS)
    assert draws.shape == (N_DRAWS,)
    if DISTRIBUTIONS[name].discrete:
        assert np.issubdtype(draws.dtype, np.integer)
    assert abs(draws.mean() - mean) < 5 * np.sqrt(var / N_DRAWS)


def test_sample_shapes():
    rng = np.random.default_rng(8)
    normal = DISTRIBUTIONS["normal"]
    assert isinstance(normal.sample(rng, 0.0, 1.0), float)
    assert normal.sample(rng, np.zeros(3), np.ones((2, 1))).shape == (2, 3)
    assert normal.sample(rng, 0.0, 1.0, size=(4, 2)).shape == (4, 2)
    assert isinstance(DISTRIBUTIONS["poisson"].sample(rng, 3.0), int)
    for name in UNIVARIATE:
        _, params, _ = _args(name)
        draws = np.asarray(DISTRIBUTIONS[name].sample(rng, *params))
        assert draws.shape == np.broadcast_shapes(*(np.shape(p) for p in params))
        lp = DISTRIBUTIONS[name].log_prob(draws, *params)
        assert np.all(np.isfinite(lp)), name  # draws lie in the support


def test_sample_categorical_and_multivariate():
    rng = np.random.default_rng(9)
    theta = np.array([0.1, 0.6, 0.3])
    draws = DISTRIBUTIONS["categorical"].sample(rng, theta, size=N_DRAWS)
    freq = np.bincount(draws, minlength=4)[1:] / N_DRAWS
    np.testing.assert_allclose(freq, theta, atol=5 * np.sqrt(0.25 / N_DRAWS))
    draws = DISTRIBUTIONS["categorical_logit"].sample(rng, np.log(theta), size=N_DRAWS)
    freq = np.bincount(draws, minlength=4)[1:] / N_DRAWS
    np.testing.assert_allclose(freq, theta, atol=5 * np.sqrt(0.25 / N_DRAWS))
    assert DISTRIBUTIONS["categorical"].sample(rng, np.tile(theta, (5, 1))).shape == (5,)

    mu = np.array([1.0, -2.0])
    Sigma = np.array([[2.0, 0.5], [0.5, 1.0]])
    x = DISTRIBUTIONS["multi_normal"].sample(rng, mu, Sigma, size=N_DRAWS)
    assert x.shape == (N_DRAWS, 2)
    np.testing.assert_allclose(x.mean(axis=0), mu, atol=5 * np.sqrt(2.0 / N_DRAWS))
    np.testing.assert_allclose(np.cov(x.T), Sigma, atol=0.1)
    xc = DISTRIBUTIONS["multi_normal_cholesky"].sample(rng, mu, np.linalg.cholesky(Sigma))
    assert xc.shape == (2,)

    alpha = np.array([1.0, 2.0, 3.0])
    w = DISTRIBUTIONS["dirichlet"].sample(rng, alpha, size=N_DRAWS)
    assert w.shape == (N_DRAWS, 3)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0)
    np.testing.assert_allclose(w.mean(axis=0), alpha / 6, atol=5 * np.sqrt(0.25 / N_DRAWS))


# ------------------------------------------------------------------ lookup


@pytest.mark.parametrize(
    "spelling, name",
    [
        ("gamma", "gamma"),
        ("Gamma", "gamma"),
        ("student_t", "student_t"),
        ("StudentT", "student_t"),
        ("Student_t", "student_t"),
        ("Bernoulli_logit", "bernoulli_logit"),
        ("BernoulliLogit", "bernoulli_logit"),
        ("NegBinomial2", "neg_binomial_2"),
        ("MultiNormalCholesky", "multi_normal_cholesky"),
        ("normal_lpdf", "normal"),
        ("poisson_log_lpmf", "poisson_log"),
        ("normal_rng", "normal"),
    ],
)
def test_lookup(spelling, name):
    d = get_distribution(spelling)
    assert d is not None and d.name == name


def test_lookup_unknown_is_none():
    assert get_distribution("no_such_distribution") is None
    assert get_distribution("") is None
    assert get_distribution("wiener") is None


def test_wrong_number_of_parameters_is_an_error():
    with pytest.raises(TypeError):
        DISTRIBUTIONS["normal"].log_prob(0.0, 1.0)
