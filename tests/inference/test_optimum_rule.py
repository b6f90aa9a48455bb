"""The default end of the stochastic fits (ppl.inference.stopping.OptimumRule): the stationarity
test on synthetic sequences, and fits of a conjugate model with an exact posterior."""

from __future__ import annotations

import numpy as np
import pytest

from ppl.inference.stopping import OptimumRule, stationary, trend_threshold
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel


def test_stationary_sequences_pass_at_the_designed_rate():
    # i.i.d. and AR(1) (autocorrelation 0.5: sub-window means are nearly so) sequences of 20
    # coordinates; the family-wise false-alarm rate is 5% by construction (Bonferroni over t_8)
    rng = np.random.default_rng(0)
    passed = 0
    for _ in range(100):
        e = rng.standard_normal((120, 20))
        x = np.empty_like(e)
        x[0] = e[0]
        for i in range(1, len(e)):
            x[i] = 0.5 * x[i - 1] + e[i]
        passed += stationary(x)
    assert passed >= 88  # 95 expected; binomial(100, 0.95) is below 88 with prob. < 0.3%


@pytest.mark.parametrize("drift", [3.0, 10.0])
def test_trending_sequences_do_not_pass(drift):
    # one coordinate of 20 drifts by `drift` noise sds over the window: a slope t of about
    # drift * sqrt(82.5) / 9 / (1 / sqrt(n / 10)) >> the bound (4.3 for 20 coordinates)
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = rng.standard_normal((120, 20))
        x[:, 3] += np.linspace(0.0, drift, 120)
        assert not stationary(x)
    assert 4.0 < trend_threshold(20) < 4.7


def test_a_pure_trend_never_passes_and_a_constant_does():
    assert not stationary(np.outer(np.arange(100.0), np.ones(3)))
    assert stationary(np.ones((100, 3)))


def test_rule_halves_then_converges_on_a_noisy_stationary_sequence():
    rng = np.random.default_rng(2)
    rule = OptimumRule(2)
    moments = lambda th: (th[:1], np.exp(th[1:]))  # noqa: E731
    verdicts = []
    for k in range(1, 3001):
        rule.observe(np.array([0.05 * rng.standard_normal(), 0.0]), k, moments)
        if k % 100 == 0:
            verdicts.append(rule.decide(None, k, moments))
    assert "decrease" in verdicts and verdicts[-1] in ("converged", None)
    assert "converged" in verdicts
    assert abs(rule.average[0]) < 0.05


CONJUGATE = """
data { int N; vector[N] y; }
parameters { real mu; }
model { mu ~ normal(0, 10); y ~ normal(mu, 2); }
"""


@pytest.fixture(scope="module")
def conjugate():
    y = np.random.default_rng(3).normal(1.5, 2.0, 40)
    model = CompiledModel(check(parse(CONJUGATE, "test.model")), {"N": np.asarray(40), "y": y})
    precision = 1 / 10.0**2 + len(y) / 2.0**2
    return model, float(y.sum() / 4.0 / precision), float(precision**-0.5)


# The rule stops when two phase averages agree within tol (0.1 sd) plus twice their noise, with
# each average's MCSE at most 0.07 sd: the mean is within about tol + 3 MCSE = 0.31 sd of the
# optimum in the worst case; the sd (log scale) likewise within ~0.3 (a factor 1.35).
@pytest.mark.parametrize("method", ["advi", "fullrank", "dsvi", "bbvi"])
def test_stochastic_fit_ends_at_the_exact_posterior(conjugate, method):
    model, mean, sd = conjugate
    for seed in (1, 2):
        result = fit(model, method=method, seed=seed, draws=200, refine_draws=0)
        vi = result.vi
        assert vi.converged and getattr(vi, "stopped_by", "optimum") == "optimum"
        if method == "bbvi":
            q_mean, q_sd = vi.family.family.moments(vi.theta)
        else:
            q_mean, q_sd = vi.mean, vi.sd
        assert abs(q_mean[0] - mean) / sd < 0.31
        assert abs(np.log(q_sd[0] / sd)) < 0.3


def test_tol_rel_obj_keeps_stans_rule(conjugate):
    model, _, _ = conjugate
    result = fit(model, method="advi", seed=1, draws=200, refine_draws=0, tol_rel_obj=0.01)
    assert result.vi.stopped_by == "relative ELBO"


GAMMA_POISSON = """
data { int N; array[N] int y; }
parameters { real<lower=0> lambda; }
model { lambda ~ gamma(2, 1); y ~ poisson(lambda); }
"""


def test_sgvb_ends_at_the_exact_gamma_posterior():
    # a gamma q (SGVB, Adam steps halved by the rule) on a conjugate gamma-Poisson model: the
    # posterior is gamma(2 + sum y, 1 + N), so q can be exact; log lambda's mean and sd
    from scipy.special import digamma, polygamma

    y = np.random.default_rng(4).poisson(3.0, 30)
    model = CompiledModel(check(parse(GAMMA_POISSON, "test.model")), {"N": np.asarray(30), "y": y})
    shape, rate = 2.0 + y.sum(), 1.0 + len(y)
    mean, sd = digamma(shape) - np.log(rate), float(np.sqrt(polygamma(1, shape)))
    result = fit(model, method="advi", families={"lambda": "gamma"}, seed=1, draws=200,
                 refine_draws=0)  # fmt: skip
    vi = result.vi
    q_mean, q_sd = vi.family.moments(vi.theta)
    assert vi.converged
    assert abs(q_mean[0] - mean) / sd < 0.31
    assert abs(np.log(q_sd[0] / sd)) < 0.3


def test_the_docs_table_is_the_stored_runs():
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    bench = runpy.run_path(str(root / "benchmarks" / "dsvi_optimum.py"), run_name="bench")
    doc = (root / "docs" / "dsvi.md").read_text()
    assert bench["rendered"](doc, bench["load_runs"]()) == doc, (
        "python benchmarks/dsvi_optimum.py --render rewrites it"
    )


def _run_rule(rule, draw, moments, iterations):
    verdicts = []
    for k in range(1, iterations + 1):
        rule.observe(draw(k), k, moments)
        if k % 100 == 0:
            verdicts.append(rule.decide(None, k, moments))
            if verdicts[-1] == "converged":
                break
    return verdicts


def test_heavy_tailed_noise_on_many_coordinates_converges():
    # 30 coordinates (15 means in units of q's sd 1, 15 log sds) of i.i.d. Student-t(3) noise
    # around a fixed optimum: every phase average agrees with the last within its noise, so the
    # rule must stop (after a few halvings at most: each phase's test is at 2 standard errors
    # per coordinate, so 30 coordinates that agree all pass about one time in four).
    rng = np.random.default_rng(5)
    moments = lambda th: (th[:15], np.exp(th[15:]))  # noqa: E731
    stops = 0
    for _ in range(10):
        rule = OptimumRule(30)
        verdicts = _run_rule(rule, lambda k: 0.3 * rng.standard_t(3, 30), moments, 4000)
        stops += verdicts[-1] == "converged"
        if verdicts[-1] == "converged":
            assert np.max(np.abs(rule.average)) < 0.25  # 30 coordinates, MCSE up to 0.07
    assert stops >= 9


def test_a_slow_trend_on_one_coordinate_of_many_does_not_converge():
    # the same noise, and one mean creeping by 1 sd per 1000 iterations: never stationary
    rng = np.random.default_rng(6)
    moments = lambda th: (th[:15], np.exp(th[15:]))  # noqa: E731

    def draw(k):
        x = 0.3 * rng.standard_t(3, 30)
        x[4] += k / 1000.0
        return x

    assert "converged" not in _run_rule(OptimumRule(30), draw, moments, 4000)
