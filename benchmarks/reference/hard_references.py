"""Data and reference posteriors of the hard-posterior suite in models/hard (issue 31).

Every problem is a folder models/hard/<name>/ with model.stan, data.json and reference.json, in
the layout of models/posteriordb/*/reference.json (a "parameters" dict keyed by Stan element
names, each with mean, sd, q05, q50, q95). This script writes data.json (simulated from a fixed
seed per problem, so a rerun writes the same bytes) and reference.json:

- exact problems (conjugate models, the funnel, the mixture, the tiny-shape gamma, the uncentred
  regression): closed forms, and quadrature with root finding for the quantiles without one;
- NUTS problems: NumPyro NUTS in double precision, 4 chains, diagonal mass matrix, fixed seed; the
  script fails (exit status 1, no file written) unless every stored quantity has rank-normalised
  split R-hat <= 1.01 and bulk ESS >= 2000 (pima_nuts.diagnostics, Vehtari et al. 2021).

Each NumPyro model is written here by hand to match its Stan program (same priors, same
constraints). `--check` verifies that: at a few random unconstrained points it maps ppl's draw to
the constrained parameters, evaluates ppl's log density there (without the Jacobian of the
constraining transforms) and NumPyro's (numpyro.infer.util.log_density, also without it), and
fails unless the two differ by one constant (Stan's `~` drops constants) to 1e-6. The reference
run of every NUTS problem does this check first.

Run from the repository root, with the `bench` extra installed (numpyro, jax):

    OPENBLAS_NUM_THREADS=1 python benchmarks/reference/hard_references.py --data
    OPENBLAS_NUM_THREADS=1 python benchmarks/reference/hard_references.py --check [NAME ...]
    OPENBLAS_NUM_THREADS=1 python benchmarks/reference/hard_references.py NAME [NAME ...]
    OPENBLAS_NUM_THREADS=1 python benchmarks/reference/hard_references.py --all
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)

import numpy as np  # noqa: E402
from scipy import integrate, optimize, stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HARD = ROOT / "models" / "hard"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ppl.outputs.summary import flatten_draws  # noqa: E402

SCRIPT = "benchmarks/reference/hard_references.py"
RHAT_MAX = 1.01
ESS_MIN = 2000.0
PROBS = (0.05, 0.5, 0.95)

EIGHT_Y = [28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0]
EIGHT_SIGMA = [15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0]


# ---------------------------------------------------------------- data (fixed seeds)
def data_eight_schools() -> dict:
    return {"J": 8, "y": EIGHT_Y, "sigma": EIGHT_SIGMA}


def data_truncated_normal() -> dict:
    """300 draws of normal(0, 1) above L = 1 (by inversion of the upper-tail CDF)."""
    rng = np.random.default_rng(3101)
    L = 1.0
    u = rng.uniform(size=300)
    y = stats.norm.isf(u * stats.norm.sf(L))
    return {"N": 300, "L": L, "y": np.round(y, 6).tolist()}


def data_measurement_error() -> dict:
    """N = 60 rows: true x ~ normal(1, 2), measured with tau = 1; y = 0.5 + 1.5 x + normal(0, 1)."""
    rng = np.random.default_rng(3102)
    N, tau = 60, 1.0
    x = rng.normal(1.0, 2.0, N)
    x_meas = x + rng.normal(0.0, tau, N)
    y = 0.5 + 1.5 * x + rng.normal(0.0, 1.0, N)
    return {"N": N, "x_meas": np.round(x_meas, 6).tolist(), "tau": tau,
            "y": np.round(y, 6).tolist()}  # fmt: skip


def data_lkj_varying_slopes() -> dict:
    """J = 12 groups of 8 rows; intercepts and slopes correlated 0.6 (sds 1 and 0.5)."""
    rng = np.random.default_rng(3103)
    J, per = 12, 8
    cov = np.array([[1.0, 0.6 * 0.5], [0.6 * 0.5, 0.25]])
    ab = rng.multivariate_normal([1.0, -0.5], cov, size=J)
    g = np.repeat(np.arange(J), per)
    x = rng.normal(0.0, 1.0, J * per)
    y = ab[g, 0] + ab[g, 1] * x + rng.normal(0.0, 0.7, J * per)
    return {"N": J * per, "J": J, "g": (g + 1).tolist(), "x": np.round(x, 6).tolist(),
            "y": np.round(y, 6).tolist()}  # fmt: skip


def data_mvn_lkj() -> dict:
    """N = 30 draws of a 3-variate normal with correlations 0.7, -0.4, -0.2."""
    rng = np.random.default_rng(3104)
    corr = np.array([[1.0, 0.7, -0.4], [0.7, 1.0, -0.2], [-0.4, -0.2, 1.0]])
    sd = np.array([1.0, 2.0, 0.5])
    y = rng.multivariate_normal([0.5, -1.0, 2.0], corr * np.outer(sd, sd), size=30)
    return {"N": 30, "K": 3, "y": np.round(y, 6).tolist()}


def data_stochastic_volatility() -> dict:
    """T = 100 returns from the model with mu = -1, phi = 0.9, sigma = 0.3."""
    rng = np.random.default_rng(3105)
    T, mu, phi, sigma = 100, -1.0, 0.9, 0.3
    h = np.empty(T)
    h[0] = mu + rng.normal() * sigma / np.sqrt(1 - phi**2)
    for t in range(1, T):
        h[t] = mu + phi * (h[t - 1] - mu) + rng.normal() * sigma
    y = rng.normal(0.0, np.exp(h / 2))
    return {"T": T, "y": np.round(y, 6).tolist()}


def data_gp_hyperparameters() -> dict:
    """N = 20 points of sin(x) + noise 0.3 on [-5, 5]."""
    rng = np.random.default_rng(3106)
    x = np.sort(rng.uniform(-5.0, 5.0, 20))
    y = np.sin(x) + rng.normal(0.0, 0.3, 20)
    return {"N": 20, "x": np.round(x, 6).tolist(), "y": np.round(y, 6).tolist()}


def data_zip_regression() -> dict:
    """N = 200 rows, K = 2 predictors; 30% structural zeros, log rate 0.5 + 0.8 x1 - 0.4 x2."""
    rng = np.random.default_rng(3107)
    N, K = 200, 2
    X = rng.normal(0.0, 1.0, (N, K))
    rate = np.exp(0.5 + X @ np.array([0.8, -0.4]))
    y = np.where(rng.uniform(size=N) < 0.3, 0, rng.poisson(rate))
    return {"N": N, "K": K, "X": np.round(X, 6).tolist(), "y": y.astype(int).tolist()}


def data_normal_known_sigma() -> dict:
    rng = np.random.default_rng(3108)
    return {"N": 20, "y": np.round(rng.normal(3.0, 2.0, 20), 6).tolist(), "sigma": 2.0}


def data_beta_binomial() -> dict:
    rng = np.random.default_rng(3109)
    n = rng.integers(5, 30, 10)
    return {"N": 10, "n": n.tolist(), "k": rng.binomial(n, 0.3).tolist()}


def data_gamma_poisson() -> dict:
    rng = np.random.default_rng(3110)
    return {"N": 15, "y": rng.poisson(4.0, 15).tolist()}


def data_uncentred_regression() -> dict:
    rng = np.random.default_rng(3111)
    x = rng.normal(2.0, 1.0, 50)
    y = 1.0 + 0.5 * x + rng.normal(0.0, 1.0, 50)
    return {"N": 50, "x": np.round(x, 6).tolist(), "y": np.round(y, 6).tolist()}


def no_data() -> dict:
    return {}


# ---------------------------------------------------------------- exact references
def normal_summary(mean: float, sd: float) -> dict:
    q = stats.norm.ppf(PROBS, mean, sd)
    return {"mean": mean, "sd": sd, "q05": q[0], "q50": q[1], "q95": q[2]}


def dist_summary(d) -> dict:
    q = d.ppf(PROBS)
    return {"mean": d.mean(), "sd": d.std(), "q05": q[0], "q50": q[1], "q95": q[2]}


def cdf_quantiles(cdf: Callable[[float], float], lo: float, hi: float) -> list[float]:
    return [optimize.brentq(lambda t, p=p: cdf(t) - p, lo, hi, xtol=1e-12) for p in PROBS]


def exact_funnel(data: dict) -> tuple[dict, str]:
    """v ~ normal(0, 3); each x[i] | v ~ normal(0, exp(v / 2)): E x = 0, var x = E exp(v) =
    exp(9 / 2); the CDF of x by quadrature over v, quantiles by root finding."""

    def cdf(t: float) -> float:
        f = lambda v: stats.norm.cdf(t * np.exp(-v / 2)) * stats.norm.pdf(v, 0, 3)  # noqa: E731
        return integrate.quad(f, -40, 40, limit=400, epsabs=1e-13)[0]

    qs = cdf_quantiles(cdf, -1e4, 1e4)
    out = {"v": normal_summary(0.0, 3.0)}
    for i in range(1, 10):
        out[f"x[{i}]"] = {"mean": 0.0, "sd": float(np.exp(9 / 4)), "q05": qs[0], "q50": qs[1],
                          "q95": qs[2]}  # fmt: skip
    return out, "exact: v normal(0, 3); x[i] mean 0, sd exp(9/4), quantiles by quadrature"


def exact_mixture(data: dict) -> tuple[dict, str]:
    cdf = lambda t: 0.5 * stats.norm.cdf(t, -10, 1) + 0.5 * stats.norm.cdf(t, 10, 1)  # noqa: E731
    q = cdf_quantiles(cdf, -50, 50)
    x = {"mean": 0.0, "sd": float(np.sqrt(101.0)), "q05": q[0], "q50": q[1], "q95": q[2]}
    return {"x": x}, "exact: mean 0, sd sqrt(1 + 10^2); quantiles by root finding"


def exact_gamma_tiny(data: dict) -> tuple[dict, str]:
    return {"lambda": dist_summary(stats.gamma(0.01, scale=1 / 1.01))}, "exact: gamma(0.01, 1.01)"


def exact_normal_known_sigma(data: dict) -> tuple[dict, str]:
    y, s = np.asarray(data["y"]), data["sigma"]
    prec = 1 / 10**2 + y.size / s**2
    return {"mu": normal_summary(y.sum() / s**2 / prec, prec**-0.5)}, (
        "exact: normal posterior, precision 1/10^2 + N/sigma^2"
    )


def exact_beta_binomial(data: dict) -> tuple[dict, str]:
    k, n = np.asarray(data["k"]), np.asarray(data["n"])
    d = stats.beta(2 + k.sum(), 2 + (n - k).sum())
    return {"theta": dist_summary(d)}, "exact: beta(2 + sum k, 2 + sum (n - k))"


def exact_gamma_poisson(data: dict) -> tuple[dict, str]:
    y = np.asarray(data["y"])
    return {"lambda": dist_summary(stats.gamma(2 + y.sum(), scale=1 / (0.5 + y.size)))}, (
        "exact: gamma(2 + sum y, 0.5 + N)"
    )


def exact_uncentred_regression(data: dict) -> tuple[dict, str]:
    x, y = np.asarray(data["x"]), np.asarray(data["y"])
    X = np.column_stack([np.ones_like(x), x])
    cov = np.linalg.inv(X.T @ X + np.eye(2) / 100.0)
    m = cov @ X.T @ y
    return {"a": normal_summary(m[0], np.sqrt(cov[0, 0])),
            "b": normal_summary(m[1], np.sqrt(cov[1, 1]))}, (
        f"exact: Gaussian posterior, precision X'X + I/100 (correlation "
        f"{cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]):.3f})")  # fmt: skip


# ---------------------------------------------------------------- NumPyro models
def numpyro_models() -> dict[str, Callable]:
    """The NumPyro restatement of each NUTS problem's Stan program (imported late: jax)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from jax import lax

    def eight_noncentered(J, y, sigma):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        tt = numpyro.sample("theta_tilde", dist.Normal(0.0, 1.0).expand([J]).to_event(1))
        numpyro.sample("y", dist.Normal(mu + tau * tt, sigma).to_event(1), obs=y)

    def eight_centered(J, y, sigma):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        theta = numpyro.sample("theta", dist.Normal(mu, tau).expand([J]).to_event(1))
        numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)

    def truncated(N, L, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(5.0))
        numpyro.sample("y", dist.TruncatedNormal(mu, sigma, low=L).expand([N]).to_event(1), obs=y)

    def measurement(N, x_meas, tau, y):
        mu_x = numpyro.sample("mu_x", dist.Normal(0.0, 10.0))
        sigma_x = numpyro.sample("sigma_x", dist.HalfCauchy(5.0))
        x = numpyro.sample("x", dist.Normal(mu_x, sigma_x).expand([N]).to_event(1))
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(5.0))
        numpyro.sample("x_meas", dist.Normal(x, tau).to_event(1), obs=x_meas)
        numpyro.sample("y", dist.Normal(alpha + beta * x, sigma).to_event(1), obs=y)

    def measurement_marginal(N, x_meas, tau, y):
        """measurement() with x integrated out: each row's (x_meas, y) is bivariate normal."""
        mu_x = numpyro.sample("mu_x", dist.Normal(0.0, 10.0))
        sigma_x = numpyro.sample("sigma_x", dist.HalfCauchy(5.0))
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(5.0))
        vx = sigma_x**2
        cov = jnp.array([[vx + tau**2, beta * vx], [beta * vx, beta**2 * vx + sigma**2]])
        obs = jnp.stack([x_meas, y], axis=-1)
        mean = jnp.stack([mu_x, alpha + beta * mu_x])
        numpyro.sample("xy", dist.MultivariateNormal(mean, cov).expand([N]).to_event(1), obs=obs)

    def varying_slopes(N, J, g, x, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0).expand([2]).to_event(1))
        tau = numpyro.sample("tau", dist.HalfNormal(2.5).expand([2]).to_event(1))
        L = numpyro.sample("L", dist.LKJCholesky(2, concentration=2.0))
        z = numpyro.sample("z", dist.Normal(0.0, 1.0).expand([2, J]).to_event(2))
        sigma = numpyro.sample("sigma", dist.HalfNormal(2.5))
        ab = ((tau[:, None] * L) @ z).T
        i = g - 1
        mean = mu[0] + ab[i, 0] + (mu[1] + ab[i, 1]) * x
        numpyro.sample("y", dist.Normal(mean, sigma).to_event(1), obs=y)

    def mvn(N, K, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 10.0).expand([K]).to_event(1))
        sigma = numpyro.sample("sigma", dist.HalfNormal(5.0).expand([K]).to_event(1))
        L = numpyro.sample("L", dist.LKJCholesky(K, concentration=2.0))
        numpyro.sample("y", dist.MultivariateNormal(mu, scale_tril=sigma[:, None] * L)
                       .expand([N]).to_event(1), obs=y)  # fmt: skip

    def sv(T, y):
        mu = numpyro.sample("mu", dist.Cauchy(0.0, 10.0))
        phi = numpyro.sample("phi", dist.Uniform(-1.0, 1.0))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(5.0))
        h_std = numpyro.sample("h_std", dist.Normal(0.0, 1.0).expand([T]).to_event(1))
        e = h_std * sigma
        h1 = e[0] / jnp.sqrt(1 - phi * phi) + mu

        def step(prev, et):
            h = et + mu + phi * (prev - mu)
            return h, h

        _, rest = lax.scan(step, h1, e[1:])
        h = jnp.concatenate([h1[None], rest])
        numpyro.sample("y", dist.Normal(0.0, jnp.exp(h / 2)).to_event(1), obs=y)

    def gp(N, x, y):
        rho = numpyro.sample("rho", dist.InverseGamma(5.0, 5.0))
        alpha = numpyro.sample("alpha", dist.HalfNormal(1.0))
        sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
        d = x[:, None] - x[None, :]
        K = alpha**2 * jnp.exp(-0.5 * d**2 / rho**2) + sigma**2 * jnp.eye(N)
        numpyro.sample("y", dist.MultivariateNormal(jnp.zeros(N), covariance_matrix=K), obs=y)

    def zip_(N, K, X, y):
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 2.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([K]).to_event(1))
        theta = numpyro.sample("theta", dist.Beta(1.0, 1.0))
        rate = jnp.exp(alpha + X @ beta)
        numpyro.sample("y", dist.ZeroInflatedPoisson(gate=theta, rate=rate).to_event(1), obs=y)

    return {"eight_schools_noncentered": eight_noncentered,
            "eight_schools_centered": eight_centered, "truncated_normal": truncated,
            "measurement_error": measurement, "lkj_varying_slopes": varying_slopes,
            "mvn_lkj": mvn, "stochastic_volatility": sv, "gp_hyperparameters": gp,
            "zip_regression": zip_, "measurement_error_marginal": measurement_marginal}  # fmt: skip


def conditional_x(h: dict, data: dict) -> tuple[np.ndarray, np.ndarray]:
    """Mean and precision of x given the hyperparameters `h` in the measurement-error model."""
    xm, y, tau = np.asarray(data["x_meas"]), np.asarray(data["y"]), data["tau"]
    prec = 1 / h["sigma_x"] ** 2 + 1 / tau**2 + h["beta"] ** 2 / h["sigma"] ** 2
    mean = (h["mu_x"] / h["sigma_x"] ** 2 + xm / tau**2
            + h["beta"] * (y - h["alpha"]) / h["sigma"] ** 2) / prec  # fmt: skip
    return mean, prec


def measurement_x(draws: dict, data: dict, rng: np.random.Generator) -> dict:
    """Each draw of the hyperparameters completed with an exact draw of x from its conditional
    normal (the same posterior as sampling x), in model.stan's declaration order."""
    mean, prec = conditional_x({k: v[:, None] for k, v in draws.items()}, data)
    x = mean + rng.standard_normal(mean.shape) / np.sqrt(prec)
    order = ("mu_x", "sigma_x", "alpha", "beta", "sigma")
    return {"x": x, **{k: draws[k] for k in order}}


def marginal_check(points: int = 6, seed: int = 1) -> float:
    """The marginal measurement-error model is the full one with x integrated out: at random
    (x, theta), log p(x, theta) - log p(x | theta) - log p_marginal(theta) is one constant."""
    from numpyro.infer.util import log_density

    raw = read_data("measurement_error")
    data = as_jax(raw)
    models, rng, out = numpyro_models(), np.random.default_rng(seed), []
    for _ in range(points):
        theta = {"mu_x": rng.normal(), "sigma_x": rng.uniform(0.5, 3), "alpha": rng.normal(),
                 "beta": rng.normal(1, 0.5), "sigma": rng.uniform(0.3, 2)}  # fmt: skip
        x = rng.normal(1, 2, raw["N"])
        full, _ = log_density(models["measurement_error"], (), data, {**theta, "x": x})
        marg, _ = log_density(models["measurement_error_marginal"], (), data, theta)
        mean, prec = conditional_x(theta, raw)
        log_cond = stats.norm.logpdf(x, mean, 1 / np.sqrt(prec)).sum()
        out.append(float(full) - log_cond - float(marg))
    spread = float(np.ptp(out))
    print(f"measurement_error: full - conditional - marginal log density: spread {spread:.2e}")
    return spread


# ---------------------------------------------------------------- the problems
@dataclass
class Problem:
    data: Callable[[], dict]
    why: str
    exact: Callable[[dict], tuple[dict, str]] | None = None
    nuts: dict = field(default_factory=dict)  # warmup, draws, target_accept, sampled_by
    #: parameters-block elements that are fixed by the constraint (a Cholesky factor's upper
    #: triangle and first diagonal element), left out of the reference
    fixed: tuple[str, ...] = ()


NUTS = {"warmup": 1500, "draws": 2500, "target_accept": 0.9}
PROBLEMS: dict[str, Problem] = {
    "eight_schools_centered": Problem(
        data_eight_schools,
        "a funnel between tau and theta",
        nuts={
            **NUTS,
            "draws": 5000,
            "target_accept": 0.99,
            "sampled_by": "eight_schools_noncentered",
        },
    ),  # fmt: skip
    "eight_schools_noncentered": Problem(
        data_eight_schools,
        "tau's posterior piles up near 0 with a long right tail",
        nuts={**NUTS, "draws": 5000, "target_accept": 0.99},
    ),
    "neal_funnel_10d": Problem(no_data, "the scale of x spans exp(+-4.5) with v", exact_funnel),
    "truncated_normal": Problem(
        data_truncated_normal,
        "only the upper tail is observed: (mu, sigma) correlated, curved",
        nuts={"warmup": 2000, "draws": 6000, "target_accept": 0.95},
    ),
    "measurement_error": Problem(
        data_measurement_error,
        "density unbounded as sigma -> 0; 60 latent true values",
        nuts={**NUTS, "numpyro": "measurement_error_marginal", "complete": measurement_x},
    ),
    "lkj_varying_slopes": Problem(
        data_lkj_varying_slopes,
        "group scales, a Cholesky correlation factor, 24 offsets",
        nuts=NUTS,
        fixed=("L[1,1]", "L[1,2]"),
    ),
    "mvn_lkj": Problem(
        data_mvn_lkj,
        "scales and an LKJ correlation of a 3-variate normal",
        nuts=NUTS,
        fixed=("L[1,1]", "L[1,2]", "L[1,3]", "L[2,3]"),
    ),
    "stochastic_volatility": Problem(
        data_stochastic_volatility,
        "100 latent volatilities, phi near 1, heavy-tailed priors",
        nuts=NUTS,
    ),
    "gp_hyperparameters": Problem(
        data_gp_hyperparameters, "kernel hyperparameters: skewed, correlated", nuts=NUTS
    ),
    "mixture_two_modes": Problem(no_data, "two modes 20 sd apart", exact_mixture),
    "zip_regression": Problem(
        data_zip_regression, "q is essentially exact: a false-alarm check", nuts=NUTS
    ),
    "normal_known_sigma": Problem(
        data_normal_known_sigma, "conjugate: a false-alarm check", exact_normal_known_sigma
    ),
    "beta_binomial": Problem(
        data_beta_binomial, "conjugate: a false-alarm check", exact_beta_binomial
    ),
    "gamma_poisson": Problem(
        data_gamma_poisson, "conjugate: a false-alarm check", exact_gamma_poisson
    ),
    "uncentred_regression": Problem(
        data_uncentred_regression,
        "posterior correlation about -0.9: mean-field too narrow",
        exact_uncentred_regression,
    ),
    "gamma_tiny_shape": Problem(
        no_data, "mass piled at 0 with sd 10x the mean; no data", exact_gamma_tiny
    ),
}


def write_data(name: str) -> dict:
    data = PROBLEMS[name].data()
    (HARD / name / "data.json").write_text(json.dumps(data, indent=1) + "\n")
    return data


def read_data(name: str) -> dict:
    return json.loads((HARD / name / "data.json").read_text())


# ---------------------------------------------------------------- the log-density check
def as_jax(data: dict) -> dict:
    """Arrays as jax arrays; integer sizes stay Python ints (shapes must be static)."""
    import jax.numpy as jnp

    return {k: v if isinstance(v, int) else jnp.asarray(v) for k, v in data.items()}


def log_density_check(name: str, points: int = 6, seed: int = 0) -> float:
    """The spread of ppl's minus NumPyro's log density (no Jacobians) over random points."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer.util import log_density

    from ppl.data.build import build

    jax.config.update("jax_enable_x64", True)
    folder = HARD / name
    model = build(str(folder / "model.stan"), [str(folder / "data.json")])
    rng = np.random.default_rng(seed)
    zeta = rng.normal(0.0, 0.7, (points, model.dim))
    drawn = model.constrained_draws(zeta, rng)
    latents = [lat.name for lat in model.latents]
    data = as_jax(read_data(name))
    npmodel = numpyro_models()[name]
    diffs = []
    for s in range(points):
        _, target, _ = model._evaluate(zeta[s : s + 1])
        ppl_lp = float(np.sum(np.asarray(target)))
        params = {k: jnp.asarray(drawn[k][s]) for k in latents}
        np_lp, _ = log_density(npmodel, (), data, params)
        diffs.append(ppl_lp - float(np_lp))
    spread = float(np.ptp(diffs))
    print(f"{name}: ppl - numpyro log density over {points} points: {np.round(diffs, 6)}, "
          f"spread {spread:.2e}")  # fmt: skip
    return spread


# ---------------------------------------------------------------- references
def stan_parameters(name: str) -> list[str]:
    """The parameters block's names in declaration order, as ppl reads model.stan."""
    from ppl.language.frontend import load_model

    return load_model(str(HARD / name / "model.stan")).names_in("parameters")


def summarise(names: list[str], matrix: np.ndarray) -> dict:
    q = np.quantile(matrix, PROBS, axis=0)
    return {n: {"mean": float(matrix[:, j].mean()), "sd": float(matrix[:, j].std(ddof=1)),
                "q05": float(q[0, j]), "q50": float(q[1, j]), "q95": float(q[2, j])}
            for j, n in enumerate(names)}  # fmt: skip


def run_nuts(name: str, seed: int) -> tuple[dict, dict]:
    """NUTS draws of the program `sampled_by` names, as the constrained parameters of `name`."""
    import jax
    import numpyro
    from numpyro.infer import MCMC, NUTS
    from pima_nuts import diagnostics

    jax.config.update("jax_enable_x64", True)
    p = PROBLEMS[name].nuts
    source = p.get("sampled_by", name)
    data = as_jax(read_data(source))
    sampler = p.get("numpyro", source)
    C, S = 4, p["draws"]
    t0 = time.perf_counter()
    mcmc = MCMC(NUTS(numpyro_models()[sampler], target_accept_prob=p["target_accept"]),
                num_warmup=p["warmup"], num_samples=S, num_chains=C,
                chain_method="sequential", progress_bar=False)  # fmt: skip
    mcmc.run(jax.random.PRNGKey(seed), **data)
    wall = time.perf_counter() - t0
    draws = {k: np.asarray(v).reshape((C * S,) + v.shape[2:])
             for k, v in mcmc.get_samples(group_by_chain=True).items()}  # fmt: skip
    divergences = int(np.asarray(mcmc.get_extra_fields()["diverging"]).sum())
    if source != name:  # the centred eight schools from the non-centred draws
        tt = draws.pop("theta_tilde")
        draws["theta"] = draws["mu"][:, None] + draws["tau"][:, None] * tt
    if "complete" in p:
        draws = p["complete"](draws, read_data(name), np.random.default_rng(seed))
    draws = {k: draws[k] for k in stan_parameters(name)}  # NumPyro's order is alphabetical
    names, matrix = flatten_draws(draws)
    keep = [j for j, n in enumerate(names) if n not in PROBLEMS[name].fixed]
    names, matrix = [names[j] for j in keep], matrix[:, keep]
    params = summarise(names, matrix)
    diag = {n: diagnostics(matrix[:, j].reshape(C, S)) for j, n in enumerate(names)}
    for n in names:
        params[n]["rhat"] = round(diag[n]["rhat"], 5)
        params[n]["ess_bulk"] = round(diag[n]["ess_bulk"], 1)
    info = {
        "reference_method": "NUTS",
        "sampler": f"numpyro {numpyro.__version__} NUTS",
        "sampler_version": {"numpyro": numpyro.__version__, "jax": jax.__version__,
                            "python": platform.python_version()},  # fmt: skip
        "settings": {"seed": seed, "chains": C, "warmup": p["warmup"], "draws": S,
                     "target_accept_prob": p["target_accept"], "mass_matrix": "diagonal",
                     "precision": "float64", "sampled_program": f"models/hard/{source}"},
        "diagnostics": {"max_rhat": max(d["rhat"] for d in diag.values()),
                        "rhat_max_required": RHAT_MAX,
                        "min_ess_bulk": min(d["ess_bulk"] for d in diag.values()),
                        "ess_min_required": ESS_MIN, "divergences": divergences,
                        "wall_seconds": round(wall, 2)},
    }  # fmt: skip
    print(f"{name}: {C} chains x ({p['warmup']} + {S}), target_accept {p['target_accept']}, "
          f"{wall:.1f} s, {divergences} divergences, max rhat "
          f"{info['diagnostics']['max_rhat']:.4f}, min bulk ESS "
          f"{info['diagnostics']['min_ess_bulk']:.0f}")  # fmt: skip
    return params, info


MARGINAL_NOTE = (
    "; NUTS samples the hyperparameters of the model with x integrated out (each row's "
    "(x_meas, y) bivariate normal: NUTS on the full model is stuck in the funnel as sigma -> 0) "
    "and every draw is completed by an exact draw of x from its conditional normal: the same "
    "posterior (checked: full minus conditional minus marginal log density is constant)"
)


def reference(name: str, seed: int) -> int:
    """Write models/hard/<name>/reference.json; 1 (and no file) when a check fails."""
    problem = PROBLEMS[name]
    data = read_data(name)
    command = f"OPENBLAS_NUM_THREADS=1 python {SCRIPT} {name}"
    if problem.exact is not None:
        params, how = problem.exact(data)
        params = {n: {k: float(v) for k, v in s.items()} for n, s in params.items()}
        info = {"reference_method": "exact", "source": how}
    else:
        spread = log_density_check(problem.nuts.get("sampled_by", name))
        if name != problem.nuts.get("sampled_by", name):
            spread = max(spread, log_density_check(name))
        if problem.nuts.get("numpyro"):
            spread = max(spread, marginal_check())
        if spread > 1e-6:
            print(f"FAILED: {name}: NumPyro's model does not match model.stan", file=sys.stderr)
            return 1
        params, info = run_nuts(name, seed)
        d = info["diagnostics"]
        d["log_density_check_spread"] = spread
        if d["max_rhat"] > RHAT_MAX or d["min_ess_bulk"] < ESS_MIN:
            print(f"FAILED: {name}: need R-hat <= {RHAT_MAX} and bulk ESS >= {ESS_MIN:.0f}",
                  file=sys.stderr)  # fmt: skip
            return 1
        sampled = info["settings"]["sampled_program"]
        info["source"] = (
            f"NUTS draws of the NumPyro restatement of {sampled}/model.stan (log density "
            "checked against ppl's to a constant at random points)"
            + ("; theta = mu + tau * theta_tilde: the same posterior" if sampled != "models/hard/"
               + name else "")
            + (MARGINAL_NOTE if problem.nuts.get("numpyro") else ""))  # fmt: skip
    out = {"posterior": name, "model": f"models/hard/{name}/model.stan",
           "data": f"models/hard/{name}/data.json", "n_params": len(params), **info,
           "command": command, "why_hard": problem.why,
           "statistics": "mean, sd (ddof=1 for draws), q05/q50/q95 (numpy default quantiles "
                         "for draws)", "parameters": params}  # fmt: skip
    (HARD / name / "reference.json").write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote models/hard/{name}/reference.json ({len(params)} parameters)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="problems to make references for")
    ap.add_argument("--all", action="store_true", help="every problem, one at a time")
    ap.add_argument("--data", action="store_true", help="(re)write every data.json and stop")
    ap.add_argument("--check", action="store_true", help="only the log-density checks")
    ap.add_argument("--seed", type=int, default=31)
    args = ap.parse_args(argv)
    if args.data:
        for name in PROBLEMS:
            write_data(name)
        return 0
    names = list(PROBLEMS) if args.all or not args.names else args.names
    if args.check:
        nuts = [n for n in names if PROBLEMS[n].exact is None]
        return int(any(log_density_check(n) > 1e-6 for n in nuts))
    return max(reference(n, args.seed) for n in names)


if __name__ == "__main__":
    sys.exit(main())
