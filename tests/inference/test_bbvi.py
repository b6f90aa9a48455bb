"""BBVI: unbiased score-function gradients, Markov blankets from the IR, binary latents."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from autograd.scipy.special import digamma, gammaln
from scipy.stats import norm

from ppl.families.composite import Block, MixedFamily
from ppl.inference.bbvi import setup_bbvi
from ppl.inference.estimators import score_gradient
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel


def _model(text: str, data: dict) -> CompiledModel:
    return CompiledModel(
        check(parse(text, "test.model")), {k: np.asarray(v) for k, v in data.items()}
    )


# one latent of each family, each coupled to data; its ELBO has a closed form
COUPLED = """
data { real y; int k; }
parameters { int<lower=0, upper=1> z; real mu; real<lower=0> lambda; }
model {
  z ~ bernoulli(0.3);
  mu ~ normal(0, 2);
  lambda ~ gamma(2, 1);
  y ~ normal(z * mu, 1);
  k ~ poisson(lambda);
}
"""
COUPLED_DATA = {"y": 1.7, "k": 3}


def _exact_elbo(theta):
    """ELBO of q = Bernoulli(z) N(mu) Gamma(lambda) for COUPLED, in the composite's layout."""
    y, k = COUPLED_DATA["y"], COUPLED_DATA["k"]
    p = 1 / (1 + anp.exp(-theta[0]))
    m, s = theta[1], anp.exp(theta[2])
    a, b = anp.logaddexp(0, theta[3]), anp.logaddexp(0, theta[4])
    e_log_lam, e_lam = digamma(a) - anp.log(b), a / b
    return (
        p * anp.log(0.3) + (1 - p) * anp.log(0.7) - p * anp.log(p) - (1 - p) * anp.log(1 - p)
        - 0.5 * anp.log(8 * anp.pi) - (m**2 + s**2) / 8 + 0.5 * anp.log(2 * anp.pi * anp.e * s**2)
        + e_log_lam - e_lam + a - anp.log(b) + gammaln(a) + (1 - a) * digamma(a)
        - 0.5 * anp.log(2 * anp.pi) - 0.5 * (y**2 - 2 * y * p * m + p * (m**2 + s**2))
        + k * e_log_lam - e_lam - gammaln(k + 1.0)
    )  # fmt: skip


def _coupled_setup():
    model = _model(COUPLED, COUPLED_DATA)
    families = {"z": "bernoulli", "mu": "gaussian", "lambda": "gamma"}
    rng = np.random.default_rng(0)
    family, terms, _ = setup_bbvi(model, families, model.random_init(rng), rng)
    theta = np.array([0.4, 0.8, np.log(0.7), 1.5, 0.9])
    return model, family, terms, theta


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["naive", "rb", "rb+cv"])
def test_gradient_estimators_are_unbiased(estimator):
    _, family, terms, theta = _coupled_setup()
    exact = grad(_exact_elbo)(theta)
    rng = np.random.default_rng(11)
    reps = np.array(
        [
            score_gradient(family, theta, zeta, *terms(zeta), estimator)
            for zeta in (family.rvs(theta, rng, 20) for _ in range(1500))
        ]
    )
    mean = reps.mean(axis=0)
    se = reps.std(axis=0, ddof=1) / np.sqrt(len(reps))
    # 4.5 standard errors: a false alarm once in ~10^5 components
    assert np.all(np.abs(mean - exact) < 4.5 * se + 1e-9), (mean, exact, se)


def test_rao_blackwellisation_and_control_variates_lower_the_variance():
    _, family, terms, theta = _coupled_setup()
    rng = np.random.default_rng(5)
    draws = [family.rvs(theta, rng, 20) for _ in range(400)]
    variance = {
        est: np.array([score_gradient(family, theta, z, *terms(z), est) for z in draws]).var(0)
        for est in ("naive", "rb", "rb+cv")
    }
    assert np.all(variance["rb"] < variance["naive"])
    assert np.median(variance["rb+cv"] / variance["rb"]) < 1


def test_blankets_follow_the_ir_and_the_elements():
    model, _, terms, _ = _coupled_setup()
    blankets = terms.blankets
    assert blankets is not None and not blankets.residual
    # terms: lambda's log-Jacobian, then the five statements in order
    dense = blankets.matrix.toarray().astype(int)
    z, mu, lam = 0, 1, 2
    assert dense[:, z].tolist() == [0, 1, 0, 0, 1, 0]
    assert dense[:, mu].tolist() == [0, 0, 1, 0, 1, 0]
    assert dense[:, lam].tolist() == [1, 0, 0, 1, 0, 1]


MIXTURE = """
data { int N; vector[N] y; real mu; real sigma; real<lower=0, upper=1> w; }
parameters { array[N] int<lower=0, upper=1> z; }
model {
  for (n in 1:N) {
    z[n] ~ bernoulli(w);
    y[n] ~ normal(z[n] * mu, sigma);
  }
}
"""


def test_per_element_blankets_of_a_vectorised_loop():
    model = _model(MIXTURE, {"N": 5, "y": [0.0] * 5, "mu": 2.0, "sigma": 1.0, "w": 0.3})
    rng = np.random.default_rng(1)
    _, terms, _ = setup_bbvi(model, {"z": "bernoulli"}, model.random_init(rng), rng)[0:3]
    dense = terms.blankets.matrix.toarray().astype(int)
    # 5 prior elements, then 5 likelihood elements: z[n] reaches exactly its own two
    assert dense.shape == (10, 5)
    assert np.array_equal(dense, np.vstack([np.eye(5), np.eye(5)]).astype(int))


def test_binary_posterior_matches_enumeration():
    # the indicators are independent given the data, so mean-field is exact and the fitted
    # probabilities must match p(z_n = 1 | y_n) = w N(y_n; mu, s) / (w N(y_n; mu, s) + ...)
    y = np.array([-0.8, 0.3, 0.9, 1.2, 1.6, 2.5, 3.1])
    data = {"N": len(y), "y": y, "mu": 2.0, "sigma": 0.8, "w": 0.4}
    model = _model(MIXTURE, data)
    result = fit(model, "bbvi", seed=2, draws=10)
    p_fit = np.array(result.vi.family.describe(result.vi.theta)["z"]["p"])
    on, off = 0.4 * norm.pdf(y, 2.0, 0.8), 0.6 * norm.pdf(y, 0.0, 0.8)
    exact = on / (on + off)
    assert np.max(np.abs(p_fit - exact)) < 0.05, (p_fit, exact)


def test_bbvi_agrees_with_advi_on_a_gaussian_model():
    text = """
    data { int N; vector[N] x; vector[N] y; }
    parameters { real alpha; real beta; real<lower=0> sigma; }
    model {
      alpha ~ normal(0, 10); beta ~ normal(0, 10); sigma ~ normal(0, 5);
      y ~ normal(alpha + beta * x, sigma);
    }
    """
    rng = np.random.default_rng(4)
    x = rng.normal(size=30)
    data = {"N": 30, "x": x, "y": 1.0 + 2.0 * x + rng.normal(0, 0.5, 30)}
    advi = fit(_model(text, data), "advi", seed=1, draws=4000)
    bbvi = fit(_model(text, data), "bbvi", seed=1, draws=4000, families={"sigma": "lognormal"})
    assert bbvi.method == "bbvi" and bbvi.vi.converged
    for name in ("alpha", "beta", "sigma"):
        sd = advi.draws[name].std()
        # 4000 draws: the means' Monte Carlo error is ~0.02 sd; seeds 1-3 gave at most 0.07 sd
        assert abs(bbvi.draws[name].mean() - advi.draws[name].mean()) < 0.1 * sd, name
        assert abs(bbvi.draws[name].std() / sd - 1) < 0.1, name


def test_score_family_scores_are_gradients_of_log_q():
    blocks = [
        Block("g", "gaussian", 0, 2),
        Block("m", "gamma", 2, 2),
        Block("b", "bernoulli", 4, 1),
    ]
    family = MixedFamily(blocks, 5)
    rng = np.random.default_rng(0)
    theta = rng.normal(size=family.size)
    zeta = family.rvs(theta, rng, 3)
    h = 1e-6
    numeric = np.empty((3, family.size))
    for p in range(family.size):
        up, down = theta.copy(), theta.copy()
        up[p] += h
        down[p] -= h
        diff = family.log_q_terms(up, zeta).sum(1) - family.log_q_terms(down, zeta).sum(1)
        numeric[:, p] = diff / (2 * h)
    assert np.allclose(family.score(theta, zeta), numeric, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("method", ["bbvi", "auto"])
def test_fit_reaches_the_closed_form_mean_field_optimum(method):
    # the best q in the family maximises _exact_elbo; BFGS finds it to 1e-8. bbvi (score function
    # everywhere) and auto (score function for z only) must both get there; measured errors at
    # seeds 1-2: p 0.005, mu's mean 0.01 sd, sd 2%, gamma shape and rate 6-7% (both high, the
    # ratio, lambda's mean, 1%), so the bounds below leave about 2x room
    from scipy.optimize import minimize

    negative = lambda t: -_exact_elbo(t)  # noqa: E731
    t = minimize(negative, np.zeros(5), jac=grad(negative), method="BFGS", tol=1e-10).x
    p, m, s = 1 / (1 + np.exp(-t[0])), t[1], np.exp(t[2])
    shape, rate = np.logaddexp(0, t[3]), np.logaddexp(0, t[4])
    result = fit(_model(COUPLED, COUPLED_DATA), method, seed=1, draws=10)
    q = result.vi.family.describe(result.vi.theta)
    assert abs(q["z"]["p"][0] - p) < 0.03
    assert abs(q["mu"]["mean"][0] - m) < 0.1 * s
    assert abs(q["mu"]["sd"][0] / s - 1) < 0.05
    assert abs(q["lambda"]["shape"][0] / shape - 1) < 0.15
    assert abs(q["lambda"]["rate"][0] / rate - 1) < 0.15
    assert abs(q["lambda"]["shape"][0] / q["lambda"]["rate"][0] / (shape / rate) - 1) < 0.03


def test_bpfa_indicator_blankets_are_its_patch_observed_pixels():
    # z_ik enters mu = (Z .* W) Phi through a matrix product: its blanket must be its own prior
    # term and the observed pixels of patch i, nothing else (found by the probe, not by hand)
    from pathlib import Path

    from ppl.inference.bbvi import log_joint_terms
    from ppl.language.frontend import load_model

    root = Path(__file__).resolve().parents[2]
    rng = np.random.default_rng(0)
    N, P, K = 5, 4, 3
    obs = np.sort(rng.choice(N * P, 12, replace=False))
    data = {"N": N, "P": P, "K": K, "M": len(obs), "obs": obs + 1, "y": rng.normal(size=12),
            "a": 1.0, "b": 1.0}  # fmt: skip
    checked = load_model(str(root / "models" / "bpfa" / "bpfa.model"))
    model = CompiledModel(checked, {k: np.asarray(v) for k, v in data.items()})
    z = next(lat for lat in model.latents if lat.name == "Z")
    columns = np.arange(z.offset, z.offset + z.size)
    draws = model.random_init(rng)[None].repeat(2, axis=0)
    draws[:, columns] = rng.integers(0, 2, size=(2, z.size))
    blankets = log_joint_terms(model, draws, rng, columns).blankets
    dense = blankets.matrix.toarray()[:, columns]
    term_sizes = np.array(blankets.sizes)[np.array(blankets.sampled)]
    like = dense[-len(obs) :]  # the likelihood statement's elements come last
    prior = dense[: -len(obs)]
    patch_of_obs = obs % N  # column-major position p N + n
    for j in range(z.size):  # Z[j] is patch j % N, atom j // N
        assert np.array_equal(np.flatnonzero(like[:, j]), np.flatnonzero(patch_of_obs == j % N))
        assert prior[:, j].sum() == 1  # its own bernoulli term
    assert term_sizes[-1] == len(obs)


ROWS = """
data { int N; vector[N] y; }
parameters { real mu; vector[N] x; }
model { mu ~ normal(0, 1); x ~ normal(0, 1); y ~ normal(mu + x, 1); }
"""


@pytest.mark.slow
def test_subsampled_gradient_is_unbiased():
    # q: mu ~ N(m0, s0^2), x[n] ~ N(m_n, s_n^2); the ELBO is closed-form. A batch of B rows
    # scales the row terms by N / B: the global gradient is unbiased for the full-data one, each
    # local gradient (computed for batch rows only, unscaled) is B / N times its full-data value
    from ppl.inference.subsample import Batches, SubsampledScoreObjective

    N, B = 6, 2
    y = np.array([0.5, -1.0, 2.0, 0.3, 1.1, -0.4])
    model = _model(ROWS, {"N": N, "y": y})
    family = MixedFamily([Block("mu", "gaussian", 0, 1), Block("x", "gaussian", 1, N)], 1 + N)
    rng = np.random.default_rng(3)
    # the composite family's layout: per block, its means then its log sds
    theta = np.array([0.3, np.log(0.8), *rng.normal(size=N), *np.log(rng.uniform(0.5, 1, N))])

    def elbo(t):
        m0, ls0, m, ls = t[0], t[1], t[2 : N + 2], t[N + 2 :]
        s0, s = anp.exp(ls0), anp.exp(ls)
        return (
            -0.5 * (m0**2 + s0**2) - 0.5 * anp.sum(m**2 + s**2)
            - 0.5 * anp.sum((y - m0 - m) ** 2 + s0**2 + s**2) + ls0 + anp.sum(ls)
        )  # fmt: skip

    exact = grad(elbo)(theta)
    objective = SubsampledScoreObjective(family, Batches(model, B, rng), 20, theta)
    reps = np.array([objective.gradient(theta, rng)[0] for _ in range(4000)])
    expected = exact * np.where(family.param_column == 0, 1.0, B / N)
    mean, se = reps.mean(axis=0), reps.std(axis=0, ddof=1) / np.sqrt(len(reps))
    assert np.all(np.abs(mean - expected) < 4.5 * se + 1e-9), (mean, expected, se)
