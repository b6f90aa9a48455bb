"""Everyday Stan programs written the way users write them (std_normal priors, the QR
reparameterisation, the _glm likelihoods, an LKJ-Cholesky prior, truncated and ordinal
likelihoods, a user-defined distribution, an ODE), fitted on simulated data: each against an
exact reference where one exists (closed forms, quadrature), else against the log density
written out with scipy. The LKJ multivariate normal's fits: tests/models/test_lkj_mvn.py;
posteriordb's
Lotka-Volterra ODE: tests/methods/test_accuracy.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

DRAWS = 4000


def _model(text: str, data: dict) -> CompiledModel:
    return CompiledModel(
        check(parse(text, "everyday.stan")), {k: np.asarray(v) for k, v in data.items()}
    )


def _regression(seed: int, N: int = 40, K: int = 3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, K))
    X[:, 1] += 0.8 * X[:, 0]  # correlated predictors
    y = 0.5 + X @ np.array([1.0, -2.0, 0.5]) + rng.normal(0, 0.8, N)
    return X, y


def _exact_gaussian(X, y, sigma, prior_sd):
    """Posterior of (alpha, beta) for y ~ normal(alpha + X beta, sigma), N(0, prior_sd^2) priors."""
    A = np.column_stack([np.ones(len(y)), X])
    precision = A.T @ A / sigma**2 + np.eye(A.shape[1]) / prior_sd**2
    cov = np.linalg.inv(precision)
    return cov @ A.T @ y / sigma**2, cov


def test_normal_id_glm_with_std_normal_priors_recovers_the_exact_posterior():
    X, y = _regression(0)
    text = """
    data { int<lower=0> N; int<lower=1> K; matrix[N, K] X; vector[N] y; }
    parameters { real alpha; vector[K] beta; }
    model {
      alpha ~ std_normal();
      target += std_normal_lpdf(beta);
      y ~ normal_id_glm(X, alpha, beta, 0.8);
    }
    """
    result = fit(
        _model(text, {"N": len(y), "K": 3, "X": X, "y": y}), "fullrank", seed=1, draws=DRAWS
    )
    mean, cov = _exact_gaussian(X, y, 0.8, 1.0)
    draws = np.column_stack([result.draws["alpha"], result.draws["beta"]])
    sd = np.sqrt(np.diag(cov))
    # a Gaussian family on a Gaussian posterior: only Monte Carlo error (sd / 63 for 4000 draws)
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * sd / np.sqrt(DRAWS))
    assert np.all(np.abs(draws.std(axis=0) / sd - 1) < 0.05)


def test_qr_reparameterisation_recovers_least_squares():
    """Stan's user-guide QR model: flat prior on theta, beta = R^-1 theta in generated quantities;
    the posterior of beta is N(OLS, sigma^2 (X'X)^-1) exactly."""
    X, y = _regression(1, K=3)
    y = y - 0.5
    text = """
    data { int<lower=0> N; int<lower=1> K; matrix[N, K] x; vector[N] y; }
    transformed data {
      matrix[N, K] Q_ast = qr_thin_Q(x) * sqrt(N - 1);
      matrix[K, K] R_ast = qr_thin_R(x) / sqrt(N - 1);
      matrix[K, K] R_ast_inverse = inverse(R_ast);
    }
    parameters { vector[K] theta; }
    model { y ~ normal(Q_ast * theta, 0.8); }
    generated quantities { vector[K] beta = R_ast_inverse * theta; }
    """
    result = fit(
        _model(text, {"N": len(y), "K": 3, "x": X, "y": y}), "fullrank", seed=2, draws=DRAWS
    )
    ols = np.linalg.solve(X.T @ X, X.T @ y)
    sd = 0.8 * np.sqrt(np.diag(np.linalg.inv(X.T @ X)))
    beta = result.draws["beta"]
    assert np.all(np.abs(beta.mean(axis=0) - ols) < 5 * sd / np.sqrt(DRAWS))
    assert np.all(np.abs(beta.std(axis=0) / sd - 1) < 0.05)


def test_glm_and_ordinal_log_density_matches_scipy():
    """bernoulli_logit_glm, poisson_log_glm, ordered_logistic, lkj_corr_cholesky with
    multi_normal_cholesky and a truncated normal, in one program: the log joint at random points
    equals the sum written with scipy (plus the transforms' log-Jacobians)."""
    rng = np.random.default_rng(3)
    N = 12
    X = rng.normal(size=(N, 2))
    data = {
        "N": N,
        "X": X,
        "y": rng.integers(0, 2, N),
        "c": rng.integers(0, 6, N),
        "k": rng.integers(1, 4, N),
        "z": rng.normal(size=(N, 2)),
        "h": np.abs(rng.normal(size=N)),
    }
    text = """
    data {
      int N; matrix[N, 2] X; array[N] int<lower=0, upper=1> y; array[N] int<lower=0> c;
      array[N] int<lower=1, upper=3> k; array[N] vector[2] z; vector<lower=0>[N] h;
    }
    parameters { real a; vector[2] b; ordered[2] cut; cholesky_factor_corr[2] L; }
    model {
      y ~ bernoulli_logit_glm(X, a, b);
      c ~ poisson_log_glm(X, a, b);
      k ~ ordered_logistic(X * b, cut);
      L ~ lkj_corr_cholesky(2.0);
      z ~ multi_normal_cholesky(rep_vector(0, 2), L);
      h ~ normal(a, 1) T[0, ];
    }
    """
    model = _model(text, data)
    zeta = rng.normal(size=(3, model.dim)) * 0.5
    got = model.log_joint(zeta)
    for s in range(3):
        a, b = zeta[s, 0], zeta[s, 1:3]
        cut = np.array([zeta[s, 3], zeta[s, 3] + np.exp(zeta[s, 4])])
        r = np.tanh(zeta[s, 5])
        L = np.array([[1.0, 0.0], [r, np.sqrt(1 - r * r)]])
        eta = a + X @ b
        lp = stats.bernoulli.logpmf(data["y"], special.expit(eta)).sum()
        lp += stats.poisson.logpmf(data["c"], np.exp(eta)).sum()
        probs = np.column_stack(
            [
                1 - special.expit(X @ b - cut[0]),
                special.expit(X @ b - cut[0]) - special.expit(X @ b - cut[1]),
                special.expit(X @ b - cut[1]),
            ]
        )
        lp += np.log(probs[np.arange(N), data["k"] - 1]).sum()
        # LKJ(2) on 2x2: density of r is (1 - r^2)^(eta-1) / (2^(2 eta - 1) B(eta, eta)); for the
        # Cholesky factor the density in L[2,1] = r picks up L_22^(K - 2) = 1
        lp += np.log(1 - r * r) - (3 * np.log(2) + special.betaln(2.0, 2.0))
        lp += stats.multivariate_normal(np.zeros(2), L @ L.T).logpdf(data["z"]).sum()
        lp += (stats.norm.logpdf(data["h"], a, 1) - stats.norm.logsf(0, a, 1)).sum()
        # log-Jacobians: ordered (u_2), cholesky_factor_corr (log(1 - tanh^2))
        lp += zeta[s, 4] + np.log1p(-r * r)
        np.testing.assert_allclose(got[s], lp, rtol=1e-9)


def _grid_posterior(log_density, lo: float, hi: float, n: int = 20001):
    """Mean and sd of a one-parameter posterior by quadrature on a fine grid: the exact
    reference for the three fits below."""
    grid = np.linspace(lo, hi, n)
    lp = np.array([log_density(g) for g in grid])
    w = np.exp(lp - lp.max())
    w /= w.sum()
    mean = float(w @ grid)
    return mean, float(np.sqrt(w @ (grid - mean) ** 2))


def _check_against(result, name: str, mean: float, sd: float):
    draws = np.asarray(result.draws[name], dtype=float).reshape(-1)
    assert result.vi.converged
    # 4000 draws: a mean's error is sd / 63, an sd's 1.1%
    assert abs(draws.mean() - mean) < 0.1 * sd, (draws.mean(), mean, sd)
    assert abs(draws.std() / sd - 1) < 0.1, (draws.std(), sd)


def test_a_user_defined_distribution_in_a_tilde_statement():
    """functions { real my_normal_lpdf(...) } used as `y[n] ~ my_normal(mu, s)`: the posterior
    of mu is the conjugate normal one."""
    rng = np.random.default_rng(11)
    y = rng.normal(1.5, 2.0, 30)
    text = """
    functions {
      real my_normal_lpdf(real x, real mu, real s) {
        return -0.5 * square((x - mu) / s) - log(s) - 0.5 * log(2 * pi());
      }
    }
    data { int N; vector[N] y; }
    parameters { real mu; }
    model { mu ~ normal(0, 10); for (n in 1:N) y[n] ~ my_normal(mu, 2); }
    """
    result = fit(_model(text, {"N": 30, "y": y}), "auto", seed=1, draws=DRAWS)
    precision = 1 / 100 + 30 / 4
    _check_against(result, "mu", (y.sum() / 4) / precision, 1 / np.sqrt(precision))


@pytest.mark.slow
def test_truncated_normal_data_with_an_unknown_location():
    """y ~ normal(mu, 1) T[0, ]: every term renormalised by 1 - Phi(-mu), so the posterior of mu
    is not the untruncated one; reference by quadrature."""
    rng = np.random.default_rng(12)
    y = stats.truncnorm.rvs(-0.3, np.inf, loc=0.3, scale=1.0, size=60, random_state=rng)
    text = """
    data { int N; vector[N] y; }
    parameters { real mu; }
    model { mu ~ normal(0, 5); for (n in 1:N) y[n] ~ normal(mu, 1) T[0, ]; }
    """
    result = fit(_model(text, {"N": 60, "y": y}), "auto", seed=1, draws=DRAWS)

    def log_density(mu):
        return (stats.norm.logpdf(mu, 0, 5) + stats.norm.logpdf(y, mu, 1).sum()
                - 60 * stats.norm.logsf(0, mu, 1))  # fmt: skip

    _check_against(result, "mu", *_grid_posterior(log_density, -3.0, 3.0))


@pytest.mark.slow
def test_an_ode_decay_rate_from_noisy_measurements():
    """ode_rk45 on y' = -k y (y0 = 5 known), measurements with noise 0.1: the posterior of
    k > 0 (its log-normal prior included) by quadrature on the closed-form solution."""
    rng = np.random.default_rng(13)
    ts = np.linspace(0.5, 5.0, 10)
    y = 5 * np.exp(-0.7 * ts) + rng.normal(0, 0.1, ts.size)
    text = """
    functions { vector decay(real t, vector z, real k) { return -k * z; } }
    data { int T; array[T] real ts; vector[T] y; }
    parameters { real<lower=0> k; }
    model {
      array[T] vector[1] z = ode_rk45(decay, [5.0]', 0.0, ts, k);
      k ~ lognormal(0, 1);
      for (t in 1:T) y[t] ~ normal(z[t][1], 0.1);
    }
    """
    result = fit(_model(text, {"T": ts.size, "ts": ts, "y": y}), "auto", seed=1, draws=DRAWS)

    def log_density(k):
        return stats.lognorm.logpdf(k, 1.0) + stats.norm.logpdf(y, 5 * np.exp(-k * ts), 0.1).sum()

    _check_against(result, "k", *_grid_posterior(log_density, 0.5, 0.9))
