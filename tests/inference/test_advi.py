"""ADVI against targets whose ADVI optimum is known in closed form.

Tolerances come from running the same settings over 40 seeds (see the comment on each test); the
fixed seeds here are not hand-picked, and each bound is ~2x the worst error seen over those seeds.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest

from ppl.errors import FitError
from ppl.inference.advi import DEFAULT_GRAD_SAMPLES, fit_advi

# A correlated 3-D Gaussian, e.g. the posterior of a conjugate normal model. The constant -7 keeps
# the ELBO away from 0 like a real (unnormalised) log joint.
M = np.array([1.0, -2.0, 0.5])
_A = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [-0.3, 0.4, 0.5]])
SIGMA = _A @ _A.T
PREC = np.linalg.inv(SIGMA)
SD = np.sqrt(np.diag(SIGMA))


def gauss_lj(z):
    d = z - M
    return -0.5 * anp.sum(anp.dot(d, PREC) * d, axis=1) - 7.0


def nan_tails_lj(z):
    """The Gaussian, but NaN (as from a failed evaluation) beyond 2.5 sd in any coordinate."""
    bad = anp.max(anp.abs(z - M) / SD, axis=1) > 2.5
    return anp.where(bad, np.nan, gauss_lj(z))


# Gamma(a, b) on x > 0 through x = exp(zeta): log p(zeta) = a zeta - b exp(zeta) (+ const), the
# log-Jacobian zeta included. For q = N(mu, s^2) the ELBO is a mu - b exp(mu + s^2/2) + log s, whose
# maximiser is exactly s = 1/sqrt(a), mu = log(a/b) - 1/(2a).
GA, GB = 3.0, 2.0


def gamma_lj(z):
    return GA * z[:, 0] - GB * anp.exp(z[:, 0])


def test_fullrank_recovers_gaussian_mean_and_covariance():
    # Over 40 seeds at tol_rel_obj=1e-3: max |mean error| 0.03 sd, max relative covariance error
    # 0.05; the bounds below are about twice that (the stopping rule, not MC error, dominates).
    r = fit_advi(gauss_lj, 3, method="fullrank", tol_rel_obj=1e-3, seed=1)
    assert r.converged and r.method == "fullrank"
    assert np.all(np.abs(r.mean - M) / SD < 0.07)
    assert np.allclose(r.cov, SIGMA, atol=0.1 * np.outer(SD, SD).max())
    assert np.all(np.abs(np.diag(r.cov) / np.diag(SIGMA) - 1) < 0.1)
    assert np.allclose(r.scale_tril, np.tril(r.scale_tril)) and np.all(np.diag(r.scale_tril) > 0)
    # The ELBO of the exact fit is log Z = -7 + (D/2) log 2 pi + log|Sigma|/2. Its 100-draw estimate
    # has sd sqrt(Var(chi2_3)/4/100) ~ 0.12 at q = p, so allow ~3 sd.
    log_z = -7.0 + 1.5 * np.log(2 * np.pi) + 0.5 * np.linalg.slogdet(SIGMA)[1]
    assert abs(r.elbo - log_z) < 0.4
    assert np.all(np.isfinite(r.sample(np.random.default_rng(0), 5)))


def test_meanfield_recovers_mean_and_precision_matched_variances():
    # The mean-field optimum for a Gaussian target is N(m, diag(1 / diag(Sigma^-1))): it matches
    # the conditional, not the marginal, variances. 40 seeds: max mean error 0.04 sd, max relative
    # variance error 0.12 (mean 0.035); bounds ~2x.
    r = fit_advi(gauss_lj, 3, method="meanfield", tol_rel_obj=1e-3, seed=2)
    assert r.converged
    assert np.all(np.abs(r.mean - M) / SD < 0.08)
    var = np.diag(r.cov)
    assert np.all(np.abs(var * np.diag(PREC) - 1) < 0.2)
    assert np.count_nonzero(r.scale_tril - np.diag(np.diag(r.scale_tril))) == 0


def test_non_gaussian_gamma_target_converges_to_known_optimum():
    r = fit_advi(gamma_lj, 1, method="meanfield", tol_rel_obj=1e-3, seed=3)
    assert r.converged and not any("maximum number" in w for w in r.warnings)
    mu_opt, s_opt = np.log(GA / GB) - 0.5 / GA, 1.0 / np.sqrt(GA)
    # The posterior sd of zeta is ~0.6; 0.05 on mu and 10% on s is well above the seed spread.
    assert abs(r.mean[0] - mu_opt) < 0.05
    assert abs(r.sd[0] / s_opt - 1) < 0.1


def test_nan_in_some_draws_is_dropped_and_fit_still_works():
    r = fit_advi(nan_tails_lj, 3, method="fullrank", tol_rel_obj=1e-3, seed=4)
    assert r.converged and np.all(np.isfinite(r.mean)) and np.isfinite(r.elbo)
    assert r.dropped_draws > 0
    assert any("dropped" in w for w in r.warnings)
    # Truncating the tails at 2.5 sd barely moves the mean (symmetric) and shrinks the variance.
    assert np.all(np.abs(r.mean - M) / SD < 0.1)


def test_all_draws_nan_after_an_overshoot_recovers_by_halving_eta():
    # eta=100 throws the first iterate far into the region where the log density is NaN.
    def lj(z):
        return anp.where(anp.abs(z[:, 0]) > 10.0, np.nan, -0.5 * z[:, 0] ** 2 - 3.0)

    r = fit_advi(lj, 1, eta=100.0, tol_rel_obj=1e-3, seed=5)
    assert r.eta == 100.0 and r.eta_final < 1.0 and any("halved" in w for w in r.warnings)
    assert abs(r.mean[0]) < 0.1 and abs(r.sd[0] - 1.0) < 0.1


def test_nan_everywhere_raises_clear_fit_error():
    with pytest.raises(FitError, match="non-finite at all 100 draws from the initial"):
        fit_advi(lambda z: z[:, 0] * np.nan, 2, seed=0)


def test_nan_from_some_iteration_on_raises_fit_error_naming_the_iteration():
    calls = []

    def lj(z):  # fine for the initial ELBO and a few gradients, then NaN for ever
        calls.append(1)
        return gauss_lj(z) * (np.nan if len(calls) > 5 else 1.0)

    with pytest.raises(FitError, match=r"ADVI failed at iteration \d+: .*non-finite at all"):
        fit_advi(lj, 3, eta=1.0, seed=0)


def test_same_seed_gives_identical_result():
    a = fit_advi(gauss_lj, 3, method="fullrank", max_iter=600, seed=7)
    b = fit_advi(gauss_lj, 3, method="fullrank", max_iter=600, seed=7)
    assert np.array_equal(a.mean, b.mean) and np.array_equal(a.scale_tril, b.scale_tril)
    assert a.elbo_trace == b.elbo_trace and a.eta == b.eta and a.grad_evals == b.grad_evals
    c = fit_advi(gauss_lj, 3, method="fullrank", max_iter=600, seed=8)
    assert not np.array_equal(a.mean, c.mean)


def test_explicit_eta_skips_adaptation_and_counters_are_consistent():
    seen: list[tuple[int, float | None]] = []
    r = fit_advi(
        gauss_lj,
        3,
        eta=0.5,
        eval_elbo=50,
        tol_rel_obj=1e-3,
        seed=9,
        progress=lambda k, e: seen.append((k, e)),
    )
    S = DEFAULT_GRAD_SAMPLES
    assert r.eta_trials == [] and r.adapt_iterations == 0 and r.eta == 0.5
    assert r.grad_evals == S * r.iterations
    assert [k for k, _ in seen] == list(range(1, r.iterations + 1))
    trace_its = [k for k, _ in r.elbo_trace]
    assert trace_its == list(range(0, r.iterations + 1, 50))
    assert [(k, e) for k, e in seen if e is not None] == r.elbo_trace[1:]
    assert r.elbo == r.elbo_trace[-1][1]  # converged: the result is the last traced approximation
    assert r.seconds > 0 and r.lp_evals == 100 * len(r.elbo_trace)


def test_adaptation_counts_its_gradient_evaluations():
    r = fit_advi(gauss_lj, 3, seed=10)
    assert r.eta in [eta for eta, _ in r.eta_trials]
    assert r.adapt_iterations == 50 * len(r.eta_trials)
    assert r.grad_evals == r.grad_samples * (r.iterations + r.adapt_iterations)
    # Same seed with the adapted eta given explicitly reproduces the main run exactly.
    r2 = fit_advi(gauss_lj, 3, eta=r.eta, seed=10)
    assert np.array_equal(r.mean, r2.mean) and r.elbo_trace == r2.elbo_trace


def test_not_converged_by_max_iter_warns_and_suggests_iter():
    r = fit_advi(gauss_lj, 3, max_iter=150, tol_rel_obj=1e-9, eta=0.1, seed=11)
    assert not r.converged and r.iterations == 150 and np.isfinite(r.elbo)
    assert any("maximum number of iterations" in w and "--iter" in w for w in r.warnings)
    assert [k for k, _ in r.elbo_trace] == [0, 100]


def test_bad_options_and_bad_log_joint_shape_are_reported():
    with pytest.raises(FitError, match="grad_samples"):
        fit_advi(gauss_lj, 3, grad_samples=0)
    with pytest.raises(FitError, match="method"):
        fit_advi(gauss_lj, 3, method="lowrank")
    with pytest.raises(ValueError, match="shape"):
        fit_advi(lambda z: anp.sum(z), 3, seed=0)


def test_starting_at_the_optimum_is_not_an_adaptation_failure():
    # No step size can improve on an exact start; Stan's strict rule would call that a failure.
    r = fit_advi(lambda z: -0.5 * anp.sum(z**2, axis=1), 2, method="fullrank", seed=12)
    assert np.isfinite(r.elbo) and np.all(np.abs(r.mean) < 0.1)


def test_all_step_sizes_failing_raises_with_advice():
    calls = []

    def lj(z):  # finite for the initial ELBO only, NaN for every adaptation run
        calls.append(1)
        return gauss_lj(z) * (np.nan if len(calls) > 1 else 1.0)

    with pytest.raises(FitError, match="All proposed step-sizes failed.*eta=100.*prior"):
        fit_advi(lj, 3, seed=0)
