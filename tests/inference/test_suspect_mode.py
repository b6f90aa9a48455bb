"""The default road's mode as a suspect (issue 31): an unbounded density, a second mode, a
correlation mean-field hides at a good k-hat, a non-finite first fit, an improper posterior,
and the gradient budget. Each against an exact posterior or a stored reference."""

from __future__ import annotations

import numpy as np
import pytest

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel


def _model(text: str, data: dict | None = None) -> CompiledModel:
    return CompiledModel(check(parse(text)), data or {})


def _faults(result) -> list[dict]:
    return (getattr(result.vi, "polish", None) or {}).get("faults", [])


def test_a_second_mode_of_comparable_density_is_a_fault_naming_the_parameter():
    """An equal mixture with modes at -10 and 10 (sd 10.05): q covers one (sd 0.99) and PSIS
    cannot see the other (k-hat 0.00); the antithetic mode search finds it. With the family
    named (--family), as here, the fault stands; by default a mixture then covers both modes
    (tests/inference/test_mixture_fit.py)."""
    model = _model("parameters { real x; } model { target += log_mix(0.5, "
                   "normal_lpdf(x | -10, 1), normal_lpdf(x | 10, 1)); }")  # fmt: skip
    result = fit(model, "auto", seed=1, families={"x": "normal"})
    assert result.diagnostics["verdict"] == "not reliable"
    faults = [f for f in _faults(result) if f["how"] == "second mode"]
    assert faults and faults[0]["parameters"] == ["x"]
    assert result.vi.grad_evals < 500


def _normal_sample():
    """A normal with unknown mean and scale and 40 observations: a regular posterior."""
    y = np.random.default_rng(3).normal(1.0, 2.0, 40)
    return _model("data { int N; vector[N] y; } parameters { real mu; real<lower=0> s; } "
                  "model { y ~ normal(mu, s); }", {"N": 40, "y": y})  # fmt: skip


def test_a_regular_posterior_has_no_second_mode_fault():
    """A unimodal posterior: the antithetic search ends at the same mode, no fault."""
    model = _normal_sample()
    result = fit(model, "auto", seed=1)
    assert not _faults(result)


def test_a_correlation_hidden_at_a_good_khat_sends_the_road_on():
    """y ~ normal(a + b x, 1), flat priors, x ~ N(2, 1), N = 50: the posterior is exactly
    N((X'X)^-1 X'y, (X'X)^-1), correlation about -0.9; mean-field's sds were 2.4x too narrow
    at k-hat 0.48, and the road stopped there."""
    rng = np.random.default_rng(1)
    x = rng.normal(2.0, 1.0, 50)
    y = 1.0 + 0.5 * x + rng.normal(0.0, 1.0, 50)
    model = _model("data { int N; vector[N] x; vector[N] y; } parameters { real a; real b; } "
                   "model { y ~ normal(a + b * x, 1); }", {"N": 50, "x": x, "y": y})  # fmt: skip
    result = fit(model, "auto", seed=1, draws=4000)
    X = np.c_[np.ones(50), x]
    cov = np.linalg.inv(X.T @ X)
    exact_mean, exact_sd = cov @ X.T @ y, np.sqrt(np.diag(cov))
    for k, name in enumerate(["a", "b"]):
        draws = np.asarray(result.draws[name]).ravel()
        assert abs(draws.mean() - exact_mean[k]) < 0.1 * exact_sd[k]
        assert 0.9 < draws.std() / exact_sd[k] < 1.1


def test_a_non_finite_first_fit_does_not_hand_the_win_to_a_far_worse_candidate():
    """lambda ~ gamma(0.01, 1.01) (exact mean 0.0099, sd 0.099): the gamma family is exact but
    some of its output draws underflow, so its ELBO estimate was non-finite and a full-rank
    Gaussian 29,237 nats worse was kept (mean 2.9e4). q's own parameters are checked: the
    gamma's shape within 5% of the exact one, its mean a / b within a factor 3 (the fixed-draw
    fit leaves the rate loose at so small a shape: 1.96 for 1.01, not fixed yet)."""
    model = _model("parameters { real<lower=0> lambda; } model { lambda ~ gamma(0.01, 1.01); }")
    result = fit(model, "auto", seed=1)
    assert result.method == "auto" and hasattr(result.vi, "family")
    q = result.vi.family.describe(result.vi.theta)["lambda"]
    shape, rate = q["shape"][0], q["rate"][0]
    assert abs(shape - 0.01) < 0.05 * 0.01
    assert 0.0099 / 3 < shape / rate < 3 * 0.0099


def test_an_improper_posterior_is_not_converged_and_names_the_parameter():
    """y ~ cauchy(mu, s), flat priors, 2 observations: improper in s (the marginal of log s is
    flat as s grows); s = 1.3e14 was reported usable and converged."""
    model = _model("data { vector[2] y; } parameters { real mu; real<lower=0> s; } "
                   "model { y ~ cauchy(mu, s); }", {"y": np.array([0.3, 1.7])})  # fmt: skip
    result = fit(model, "auto", seed=1)
    assert not result.vi.converged
    assert any("s" in f["parameters"] and f["how"] == "improper posterior"
               for f in _faults(result))  # fmt: skip


def test_iter_bounds_the_default_road():
    """--iter N caps every L-BFGS run of the road: the fit is cut short and says so."""
    model = _normal_sample()
    full = fit(model, "auto", seed=1)
    capped = fit(model, "auto", seed=1, iterations=2)
    assert capped.vi.grad_evals < full.vi.grad_evals
    assert capped.vi.polish["mode_iterations"] <= 2


ME = """
data { int<lower=0> N; vector[N] x_obs; vector[N] y; real<lower=0> tau; }
parameters { vector[N] x; real mu_x; real<lower=0> sigma_x; real alpha; real beta;
             real<lower=0> sigma; }
model {
  x ~ normal(mu_x, sigma_x);
  x_obs ~ normal(x, tau);
  y ~ normal(alpha + beta * x, sigma);
  alpha ~ normal(0, 10); beta ~ normal(0, 10); mu_x ~ normal(0, 10);
  sigma_x ~ cauchy(0, 5); sigma ~ cauchy(0, 5);
}
"""


def _measurement_error():
    rng = np.random.default_rng(0)
    x = rng.normal(1.0, 2.0, 60)
    return _model(ME, {"N": 60, "x_obs": x + rng.normal(0.0, 1.0, 60), "tau": 1.0,
                       "y": 0.5 + 1.5 * x + rng.normal(0.0, 0.5, 60)})  # fmt: skip


def test_an_unbounded_density_is_named_and_the_plain_start_is_solved_too():
    """The measurement-error model of Stan's User's Guide: the density grows without bound as
    sigma -> 0; the mode search climbs that spike and the road now names it and solves Stan's
    plain start too, keeping the higher ELBO."""
    result = fit(_measurement_error(), "auto", seed=5)
    polish = result.vi.polish if "suspect" in (result.vi.polish or {}) else {}
    notes = " ".join(result.notes)
    assert "grows without bound" in notes or (polish.get("suspect") or {}).get("how")
    assert "plain start" in notes


#: Reference for _measurement_error()'s data: x integrated out analytically, 180,000 draws of
#: adaptive random-walk Metropolis on (mu_x, log sigma_x, alpha, beta, log sigma), two chains
#: agreeing to 0.02 sd (and a Gibbs sampler on the full model); mean, sd.
ME_REFERENCE = {"mu_x": (1.240, 0.257), "sigma_x": (1.725, 0.215), "alpha": (0.227, 0.294),
                "beta": (1.588, 0.153), "sigma": (0.573, 0.331)}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_measurement_error_model_never_ends_on_the_spike(seed):
    """On every seed the road ends off the spike (ELBO within 5 nats of the best; on the
    mode's spike it was 90-190 nats lower) with mu_x, sigma_x and alpha within 0.3 reference sd.
    (beta and sigma: the Gaussian family's own error here is 0.3 and 0.7 sd; not asserted.)"""
    result = fit(_measurement_error(), "auto", seed=seed)
    assert result.diagnostics["elbo"] > -259.0
    for name in ("mu_x", "sigma_x", "alpha"):
        mean, sd = ME_REFERENCE[name]
        assert abs(np.mean(result.draws[name]) - mean) < 0.3 * sd
