"""The ordinal, multivariate, matrix and GLM distributions: against scipy, closed forms and
quadrature (normalisation), over batch axes, and their gradients against finite differences."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from scipy import integrate, special, stats

from ppl.library.distributions import DISTRIBUTIONS
from ppl.library.transforms import CholeskyFactorCorr, CorrMatrix


def _fd_check(f, args, argnum, direction, h=1e-6, rtol=1e-5, atol=1e-7):
    """Autograd's directional derivative of sum(f) against a central finite difference."""
    x = np.asarray(args[argnum], dtype=float)
    g = grad(lambda a: anp.sum(f(*args[:argnum], a, *args[argnum + 1 :])))(x)
    assert np.shape(g) == np.shape(x)
    plus, minus = list(args), list(args)
    plus[argnum], minus[argnum] = x + h * direction, x - h * direction
    fd = (np.sum(f(*plus)) - np.sum(f(*minus))) / (2 * h)
    np.testing.assert_allclose(np.sum(g * direction), fd, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ ordinal


def _ordinal_probs(cdf, eta, c):
    """Pr[k] = F(eta - c_{k-1}) - F(eta - c_k), c_0 = -inf, c_K = inf."""
    upper = np.concatenate([[1.0], cdf(eta - c), [0.0]])
    return upper[:-1] - upper[1:]


@pytest.mark.parametrize(
    "name, cdf", [("ordered_logistic", special.expit), ("ordered_probit", special.ndtr)]
)
def test_ordinal_matches_closed_form_and_sums_to_one(name, cdf):
    d = DISTRIBUTIONS[name]
    c = np.array([-1.2, 0.3, 0.4, 2.0])
    k = np.arange(1, 6)
    for eta in (-2.0, 0.35, 3.0):
        lp = d.log_prob(k, eta, c)
        np.testing.assert_allclose(lp, np.log(_ordinal_probs(cdf, eta, c)), rtol=1e-10)
        np.testing.assert_allclose(np.sum(np.exp(lp)), 1.0, rtol=1e-12)
    # batched: outcomes (3, 4) against eta (4,) and a cut-point vector per row (3, 1, K-1)
    rng = np.random.default_rng(0)
    kk = rng.integers(1, 6, size=(3, 4))
    eta = rng.normal(size=4)
    cc = np.sort(rng.normal(size=(3, 1, 4)), axis=-1)
    got = d.log_prob(kk, eta, cc)
    assert got.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            p = _ordinal_probs(cdf, eta[j], cc[i, 0])[kk[i, j] - 1]
            np.testing.assert_allclose(got[i, j], np.log(p), rtol=1e-10)
    for argnum, direction in ((1, rng.normal(size=4)), (2, rng.normal(size=(3, 1, 4)))):
        _fd_check(d.log_prob, [kk, eta, cc], argnum, direction)


@pytest.mark.parametrize("name", ["ordered_logistic", "ordered_probit"])
def test_ordinal_tails_stay_finite(name):
    d = DISTRIBUTIONS[name]
    c = np.array([-1.0, 1.0])
    lp = d.log_prob(np.array([1, 2, 3]), np.array([40.0, 40.0, -40.0]), c)
    assert np.all(np.isfinite(lp)) and np.all(lp < -10)
    g = grad(lambda e: anp.sum(d.log_prob(np.array([1, 2, 3]), e, c)))(
        np.array([30.0, 30.0, -30.0])
    )
    assert np.all(np.isfinite(g))


# ------------------------------------------------------------------ multivariate


def _spd(rng, batch, K):
    A = rng.normal(size=batch + (K, K))
    return A @ np.swapaxes(A, -1, -2) + K * np.eye(K)


def test_multi_student_t_and_prec_match_scipy_batched():
    rng = np.random.default_rng(1)
    K = 3
    y = rng.normal(size=(2, 4, K))
    mu = rng.normal(size=(4, K))
    Sigma = _spd(rng, (2, 1), K)
    nu = np.array([[2.5], [7.0]])
    t = DISTRIBUTIONS["multi_student_t"].log_prob(y, nu, mu, Sigma)
    tc = DISTRIBUTIONS["multi_student_t_cholesky"].log_prob(y, nu, mu, np.linalg.cholesky(Sigma))
    prec = DISTRIBUTIONS["multi_normal_prec"].log_prob(y, mu, np.linalg.inv(Sigma))
    assert t.shape == tc.shape == prec.shape == (2, 4)
    for i in range(2):
        for j in range(4):
            ref = stats.multivariate_t.logpdf(y[i, j], mu[j], Sigma[i, 0], df=nu[i, 0])
            np.testing.assert_allclose([t[i, j], tc[i, j]], ref, rtol=1e-10)
            ref_n = stats.multivariate_normal.logpdf(y[i, j], mu[j], Sigma[i, 0])
            np.testing.assert_allclose(prec[i, j], ref_n, rtol=1e-10)
    f = DISTRIBUTIONS["multi_student_t"].log_prob
    E = rng.normal(size=Sigma.shape)
    for argnum, direction in (
        (0, rng.normal(size=y.shape)),
        (1, rng.normal(size=nu.shape)),
        (2, rng.normal(size=mu.shape)),
        (3, E + np.swapaxes(E, -1, -2)),
    ):
        _fd_check(f, [y, nu, mu, Sigma], argnum, direction)


def test_wishart_and_inv_wishart_match_scipy():
    rng = np.random.default_rng(2)
    K = 3
    W = _spd(rng, (4,), K)
    S = _spd(rng, (), K)
    nu = 5.5
    w = DISTRIBUTIONS["wishart"].log_prob(W, nu, S)
    iw = DISTRIBUTIONS["inv_wishart"].log_prob(W, nu, S)
    np.testing.assert_allclose(w, stats.wishart.logpdf(np.moveaxis(W, 0, -1), nu, S), rtol=1e-10)
    np.testing.assert_allclose(
        iw, stats.invwishart.logpdf(np.moveaxis(W, 0, -1), nu, S), rtol=1e-10
    )
    E = rng.normal(size=(K, K))
    _fd_check(DISTRIBUTIONS["wishart"].log_prob, [W, nu, S], 2, E + E.T)
    _fd_check(DISTRIBUTIONS["inv_wishart"].log_prob, [W, nu, S], 1, np.array(1.0))
    draws = DISTRIBUTIONS["wishart"].sample(rng, nu, S, size=(2,))
    assert draws.shape == (2, K, K)


def test_multinomial_matches_scipy():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 6, size=(5, 4))
    theta = rng.dirichlet(np.ones(4), size=5)
    got = DISTRIBUTIONS["multinomial"].log_prob(y, theta)
    np.testing.assert_allclose(got, stats.multinomial.logpmf(y, y.sum(-1), theta), rtol=1e-10)
    gamma = np.log(theta) + 0.7
    got2 = DISTRIBUTIONS["multinomial_logit"].log_prob(y, gamma)
    np.testing.assert_allclose(got2, got, rtol=1e-10)
    assert DISTRIBUTIONS["multinomial"].log_prob(np.array([1, -1, 2, 0]), theta[0]) == -np.inf
    _fd_check(DISTRIBUTIONS["multinomial_logit"].log_prob, [y, gamma], 1, rng.normal(size=(5, 4)))


# ------------------------------------------------------------------ LKJ


def test_lkj_corr_2x2_is_normalised():
    d = DISTRIBUTIONS["lkj_corr"]
    for eta in (0.7, 1.0, 3.2):

        def density(r, eta=eta):
            return np.exp(d.log_prob(np.array([[1.0, r], [r, 1.0]]), eta))

        total, _ = integrate.quad(density, -1, 1)
        np.testing.assert_allclose(total, 1.0, rtol=1e-8)


def test_lkj_corr_3x3_uniform_normaliser_is_the_elliptope_volume():
    # eta = 1 is uniform over 3x3 correlation matrices, whose volume is pi^2 / 2
    lp = DISTRIBUTIONS["lkj_corr"].log_prob(np.eye(3), 1.0)
    np.testing.assert_allclose(np.exp(-lp), np.pi**2 / 2, rtol=1e-12)


def _gauss_legendre_over_cube(n, dim):
    x, w = np.polynomial.legendre.leggauss(n)
    grids = np.meshgrid(*([x] * dim), indexing="ij")
    weights = np.prod(np.meshgrid(*([w] * dim), indexing="ij"), axis=0)
    return np.stack([g.ravel() for g in grids], axis=-1), weights.ravel()


@pytest.mark.parametrize(
    "name, transform",
    [
        ("lkj_corr", CorrMatrix()),
        ("lkj_corr_cholesky", CholeskyFactorCorr()),
    ],
)
@pytest.mark.parametrize("eta", [1.5, 4.0])
def test_lkj_3x3_integrates_to_one_through_the_transform(name, transform, eta):
    """Integrate the density over the unconstrained space via the transform's Jacobian, with
    u = atanh(z) and z (the partial correlations) on a Gauss-Legendre grid over (-1, 1)^3."""
    z, w = _gauss_legendre_over_cube(40, 3)
    u = np.arctanh(z)
    x, log_jac = transform.forward(u)
    log_du_dz = -np.sum(np.log1p(-z * z), axis=-1)
    lp = DISTRIBUTIONS[name].log_prob(x, eta)
    total = np.sum(w * np.exp(lp + log_jac + log_du_dz))
    # at eta = 1.5 the integrand has a (1 - z^2)^(1/2) factor, whose endpoint behaviour slows
    # Gauss-Legendre to ~1e-5 with 40 nodes; at eta = 4 it is smooth and the rule is exact to 1e-9
    np.testing.assert_allclose(total, 1.0, rtol=1e-4 if eta < 2 else 1e-8)


def test_lkj_gradients():
    rng = np.random.default_rng(4)
    u = rng.normal(size=(2, 6)) * 0.5
    L, _ = CholeskyFactorCorr().forward(u)
    R = L @ np.swapaxes(L, -1, -2)
    eta = np.array([1.3, 2.5])
    _fd_check(DISTRIBUTIONS["lkj_corr_cholesky"].log_prob, [L, eta], 1, np.ones(2))
    _fd_check(
        DISTRIBUTIONS["lkj_corr_cholesky"].log_prob, [L, eta], 0, np.tril(rng.normal(size=L.shape))
    )
    _fd_check(DISTRIBUTIONS["lkj_corr"].log_prob, [R, eta], 1, np.ones(2))
    E = rng.normal(size=R.shape)
    _fd_check(DISTRIBUTIONS["lkj_corr"].log_prob, [R, eta], 0, E + np.swapaxes(E, -1, -2))


# ------------------------------------------------------------------ GLMs

GLM_FAMILIES = {
    "bernoulli_logit_glm": ("bernoulli_logit", (), lambda rng, n: rng.integers(0, 2, n)),
    "poisson_log_glm": ("poisson_log", (), lambda rng, n: rng.integers(0, 9, n)),
    "neg_binomial_2_log_glm": ("neg_binomial_2_log", (2.5,), lambda rng, n: rng.integers(0, 9, n)),
    "normal_id_glm": ("normal", (1.3,), lambda rng, n: rng.normal(size=n)),
}


@pytest.mark.parametrize("name", sorted(GLM_FAMILIES))
def test_glm_equals_family_of_linear_predictor(name):
    family, extra, draw_y = GLM_FAMILIES[name]
    rng = np.random.default_rng(5)
    N, P, S = 7, 3, 4
    y = draw_y(rng, N)
    x = rng.normal(size=(N, P))
    beta = rng.normal(size=(S, P)) * 0.5  # a batch of S draws
    glm = DISTRIBUTIONS[name].log_prob
    fam = DISTRIBUTIONS[family].log_prob
    # scalar intercept per draw (padded to (S, 1) as the evaluator does) and a per-row intercept
    for alpha in (rng.normal(size=(S, 1)), rng.normal(size=(S, N))):
        params = [np.full((S, 1), e) for e in extra]
        got = glm(y, x, alpha, beta, *params)
        eta = alpha + beta @ x.T
        expected = np.sum(fam(y, eta, *params), axis=-1)
        assert got.shape == (S,)
        np.testing.assert_allclose(got, expected, rtol=1e-10)
        args = [y, x, alpha, beta, *params]
        for argnum in range(2, len(args)):
            _fd_check(glm, args, argnum, rng.normal(size=np.shape(args[argnum])))


def test_categorical_logit_glm():
    rng = np.random.default_rng(6)
    N, P, K = 6, 2, 3
    y = rng.integers(1, K + 1, size=N)
    x = rng.normal(size=(N, P))
    alpha = rng.normal(size=K)
    beta = rng.normal(size=(P, K))
    got = DISTRIBUTIONS["categorical_logit_glm"].log_prob(y, x, alpha, beta)
    eta = x @ beta + alpha
    expected = np.sum(special.log_softmax(eta, axis=-1)[np.arange(N), y - 1])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    _fd_check(
        DISTRIBUTIONS["categorical_logit_glm"].log_prob,
        [y, x, alpha, beta],
        3,
        rng.normal(size=(P, K)),
    )
