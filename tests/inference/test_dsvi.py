"""DSVI (Titsias & Lázaro-Gredilla 2014): Algorithm 1's gradients, families and minibatches."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from scipy import stats

from ppl.errors import FitError, ModelError
from ppl.families.studentt import DiagonalScale, FullScale, StandardDistribution
from ppl.inference.dsvi import fit_dsvi
from ppl.inference.estimators import Pathwise
from ppl.inference.subsample import Batches, SubsampledLogJoint
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

M = np.array([1.0, -2.0, 0.5])
COV = np.array([[1.0, 0.8, 0.3], [0.8, 2.0, -0.5], [0.3, -0.5, 1.5]])
PREC = np.linalg.inv(COV)


def gaussian_log_joint(zeta):
    d = zeta - M
    return -0.5 * anp.sum(anp.dot(d, PREC) * d, axis=1)


def exact_gaussian_elbo(family, theta):
    """E_q[log g] + H[q] in closed form for q = N(mu, C C^T) and the Gaussian target."""
    mean, C = family.mean_scale(theta)
    sigma, d = C @ C.T, mean - M
    return -0.5 * (np.trace(PREC @ sigma) + d @ PREC @ d) + family.entropy(theta)


@pytest.mark.parametrize("family_cls", [FullScale, DiagonalScale])
def test_algorithm_1_gradient_is_unbiased(family_cls):
    """The average of Algorithm 1's update direction over many z equals the exact ELBO gradient
    (central finite differences of the closed form); 4.5 standard errors per component."""
    family = family_cls(3, StandardDistribution())
    rng = np.random.default_rng(0)
    theta = family.initial(np.array([0.3, 0.1, -0.4]))
    theta[3:] += 0.3 * rng.standard_normal(theta.size - 3)
    if family_cls is FullScale:
        theta[3:] = np.tril(theta[3:].reshape(3, 3)).ravel() + np.eye(3).ravel()
    ev = Pathwise(gaussian_log_joint, family, family.noise(rng, 10))
    reps = np.array([ev.grad(theta, family.noise(rng, 20)) for _ in range(2000)])
    exact = np.zeros(theta.size)
    for i in range(theta.size):
        step = np.zeros(theta.size)
        step[i] = 1e-6
        exact[i] = (
            exact_gaussian_elbo(family, theta + step) - exact_gaussian_elbo(family, theta - step)
        ) / 2e-6
    if family_cls is FullScale:  # only the lower triangle of C is a parameter
        keep = np.concatenate([np.ones(3, bool), np.tril(np.ones((3, 3), bool)).ravel()])
    else:
        keep = np.ones(theta.size, bool)
    se = reps.std(axis=0, ddof=1) / np.sqrt(len(reps)) + 1e-12
    assert np.all(np.abs(reps.mean(axis=0) - exact)[keep] < 4.5 * se[keep])


def test_full_rank_dsvi_recovers_a_correlated_gaussian():
    """A Gaussian target's ELBO optimum over full-rank q is the target itself."""
    fitted = fit_dsvi(gaussian_log_joint, 3, rank="full", seed=1, tol_rel_obj=1e-3)
    sd = np.sqrt(np.diag(COV))
    assert np.all(np.abs(fitted.mean - M) / sd < 0.1)
    assert np.all(np.abs(fitted.sd / sd - 1) < 0.1)
    corr = fitted.cov / np.outer(fitted.sd, fitted.sd)
    assert np.all(np.abs(corr - COV / np.outer(sd, sd)) < 0.1)


@pytest.mark.parametrize("schedule", ["adaptive", "decay", "robbins-monro"])
def test_diagonal_dsvi_finds_the_mean_field_optimum(schedule):
    """Over diagonal q the optimum has the target's mean and variances 1 / precision_dd."""
    fitted = fit_dsvi(
        gaussian_log_joint, 3, rank="diag", schedule=schedule, seed=1, tol_rel_obj=1e-3
    )
    sd = 1 / np.sqrt(np.diag(PREC))
    assert np.all(np.abs(fitted.mean - M) / sd < 0.15)
    assert np.all(np.abs(fitted.sd / sd - 1) < 0.1)
    assert np.allclose(fitted.cov, np.diag(np.diag(fitted.cov)))


def test_student_t_standard_distribution_matches_scipy():
    t = StandardDistribution(5.0)
    reference = stats.multivariate_t(np.zeros(3), np.eye(3), df=5.0)
    assert t.entropy(3) == pytest.approx(reference.entropy(), rel=1e-12)
    z = t.sample(np.random.default_rng(0), 2000, 3)
    assert np.allclose(t.log_density(z), reference.logpdf(z))
    # the draws follow it: the radial distribution's KS test against scipy's own sampler
    ks = stats.ks_2samp(np.sum(z**2, axis=1), np.sum(reference.rvs(2000, random_state=1) ** 2, 1))
    assert ks.pvalue > 1e-3
    normal = StandardDistribution()
    assert normal.entropy(3) == pytest.approx(stats.multivariate_normal(np.zeros(3)).entropy())
    with pytest.raises(FitError, match="degrees of freedom"):
        StandardDistribution(0.0)


def test_student_t_fit_has_a_lower_elbo_than_the_exact_gaussian():
    """With a Gaussian target the best Student-t q is worse than the Gaussian (= log Z)."""
    fitted = fit_dsvi(gaussian_log_joint, 3, dof=5.0, seed=1, tol_rel_obj=1e-3)
    rng = np.random.default_rng(5)
    draws = fitted.sample(rng, 200000)
    elbo = np.mean(gaussian_log_joint(draws) - fitted.log_density(draws))
    log_z = 0.5 * np.log(np.linalg.det(2 * np.pi * COV))
    assert log_z - 0.5 < elbo < log_z
    assert np.all(np.abs(fitted.mean - M) / np.sqrt(np.diag(COV)) < 0.15)


REGRESSION = """
data { int N; vector[N] x; vector[N] y; }
parameters { real a; real b; }
model { a ~ normal(0, 1); b ~ normal(0, 1); y ~ normal(a + b * x, 1); }
"""


def _model(text, data):
    return CompiledModel(
        check(parse(text, "test.model")), {k: np.asarray(v) for k, v in data.items()}
    )


def _regression(n=40):
    rng = np.random.default_rng(3)
    x = rng.standard_normal(n)
    return _model(REGRESSION, {"N": n, "x": x, "y": 0.5 + 1.5 * x + rng.standard_normal(n)})


def test_minibatch_log_joint_is_unbiased():
    """Per-row statements weighted N / B: the average over batches is the full log joint."""
    model = _regression()
    estimate = SubsampledLogJoint(Batches(model, 8, np.random.default_rng(0)))
    zeta = np.array([[0.2, 1.1], [-0.5, 2.0]])
    values = np.array([estimate(zeta) for _ in range(4000)])
    se = values.std(axis=0, ddof=1) / np.sqrt(len(values))
    assert np.all(np.abs(values.mean(axis=0) - model.log_joint(zeta)) < 4.5 * se)


def test_minibatch_dsvi_matches_the_exact_posterior():
    """Conjugate regression (known noise): the posterior is Gaussian in closed form."""
    model = _regression()
    x, y = model.data["x"], model.data["y"]
    X = np.column_stack([np.ones_like(x), x])
    cov = np.linalg.inv(np.eye(2) + X.T @ X)
    mean = cov @ X.T @ y
    result = fit(model, "dsvi", batch=10, seed=2, tol_rel_obj=1e-3, draws=20000)
    sd = np.sqrt(np.diag(cov))
    got = np.array([result.draws["a"].mean(), result.draws["b"].mean()])
    assert np.all(np.abs(got - mean) / sd < 0.25)
    got_sd = np.array([result.draws["a"].std(), result.draws["b"].std()])
    assert np.all(np.abs(got_sd / sd - 1) < 0.2)


def test_dsvi_options_need_dsvi_and_local_parameters_are_refused():
    model = _regression()
    with pytest.raises(ModelError, match="--rank: DSVI"):
        fit(model, "advi", rank="diag")
    local = _model(
        "data { int N; vector[N] y; } parameters { vector[N] u; } "
        "model { u ~ normal(0, 1); y ~ normal(u, 1); }",
        {"N": 10, "y": np.zeros(10)},
    )
    with pytest.raises(ModelError, match="one value per row"):
        fit(local, "dsvi", batch=5)


HYPER_PRIOR_SD = """
data { int N; vector[N] y; }
hyperparameters { real<lower=0> ell; }
parameters { real w; }
model { w ~ normal(0, ell); y ~ normal(w, 1); }
"""

HYPER_NOISE = """
data { int N; vector[N] y; }
hyperparameters { real<lower=0> s; }
parameters { real w; }
model { w ~ normal(0, 3); y ~ normal(w, s); }
"""


@pytest.mark.parametrize("schedule", ["adaptive", "decay"])
def test_prior_variance_hyperparameter_has_the_type_ii_ml_value(schedule):
    """y_i ~ N(w, 1), w ~ N(0, ell^2): the marginal likelihood peaks at ell^2 = ybar^2 - 1/N,
    and with q exact (Gaussian) the ELBO's optimum over ell is the same point (closed form)."""
    from ppl.inference.dsvi import closed_forms

    y = np.random.default_rng(1).normal(1.2, 1, size=20)
    model = _model(HYPER_PRIOR_SD, {"N": 20, "y": y})
    assert len(closed_forms(model)) == 1
    result = fit(model, "dsvi", seed=1, tol_rel_obj=1e-4, draws=4000, schedule=schedule)
    ell = np.sqrt(y.mean() ** 2 - 1 / 20)
    assert np.ptp(result.draws["ell"]) == 0  # a point estimate
    assert result.draws["ell"][0] == pytest.approx(ell, rel=0.02)
    post_sd = 1 / np.sqrt(1 / ell**2 + 20)
    assert result.draws["w"].std() == pytest.approx(post_sd, rel=0.1)
    assert result.families["ell"] == "point estimate (type-II ML)"


def test_noise_hyperparameter_maximises_the_marginal_likelihood():
    """No closed form here: s moves by gradient ascent on the ELBO, whose optimum with an exact
    Gaussian q is the maximiser of the exact log marginal likelihood (found by scipy)."""
    from scipy.optimize import minimize_scalar

    from ppl.inference.dsvi import closed_forms

    y = np.random.default_rng(2).normal(0.5, 0.7, size=30)
    model = _model(HYPER_NOISE, {"N": 30, "y": y})
    assert closed_forms(model) == []

    def negative_log_marginal(log_s):
        cov = np.exp(2 * log_s) * np.eye(30) + 9.0
        return -stats.multivariate_normal(np.zeros(30), cov).logpdf(y)

    s_ml = np.exp(minimize_scalar(negative_log_marginal, bounds=(-5, 3), method="bounded").x)
    result = fit(model, "dsvi", seed=1, tol_rel_obj=1e-4, draws=1000)
    assert result.draws["s"][0] == pytest.approx(s_ml, rel=0.03)


def test_hyperparameters_need_dsvi():
    model = _model(HYPER_NOISE, {"N": 3, "y": np.zeros(3)})
    with pytest.raises(ModelError, match="type-II ML"):
        fit(model, "advi")
