"""PSIS diagnostics (ppl.diagnostics.psis): the generalized Pareto fit, k-hat on known tails, and
the
verdict after every fit (Yao, Vehtari, Simpson & Gelman 2018)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from ppl.diagnostics.psis import check_fit, fit_generalized_pareto, psis
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.outputs.summary import summarise
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel
from tests.cli.test_cli import run_main

CORRELATED = """
data { int D; matrix[D, D] Sigma; }
parameters { vector[D] x; }
model { x ~ multi_normal(rep_vector(0, D), Sigma); }
"""
SCHOOLS = ["models/eight_schools/noncentered.model", "models/eight_schools/eight_schools.json"]


@pytest.mark.parametrize("k", [0.1, 0.5, 0.8, 1.2])
def test_generalized_pareto_fit_recovers_the_shape(k):
    """20 samples of 1000 exceedances: the mean estimate is within 0.05 of the true shape (its
    standard error is ~0.01; the prior's pull towards 0.5 is 10 / 1010 of the distance)."""
    rng = np.random.default_rng(0)
    fits = [
        fit_generalized_pareto(stats.genpareto.rvs(k, scale=2.0, size=1000, random_state=rng))
        for _ in range(20)
    ]
    assert abs(np.mean([f[0] for f in fits]) - k) < 0.05
    assert abs(np.mean([f[1] for f in fits]) - 2.0) < 0.15


def test_khat_separates_heavy_and_light_ratio_tails():
    """q = N(0, 0.16^2) for p = N(0, 7^2): ratios with tail shape 1 - (0.16/7)^2 ~ 1; the other
    way round the ratios are bounded (k < 0)."""
    rng = np.random.default_rng(1)
    narrow = rng.normal(0.0, 0.16, 10000)
    lr = stats.norm.logpdf(narrow, scale=7) - stats.norm.logpdf(narrow, scale=0.16)
    assert psis(lr)[1] > 0.7
    wide = rng.normal(0.0, 7.0, 10000)
    lr = stats.norm.logpdf(wide, scale=0.16) - stats.norm.logpdf(wide, scale=7)
    assert psis(lr)[1] < 0.5


@pytest.mark.parametrize(
    "log_ratios",
    [
        # a few exceedances in the subnormals: no candidate has a finite profile likelihood
        np.concatenate([np.full(990, -1e5), np.linspace(-744.5, -700, 9), [0.0]]),
        # exceedances spread over the whole double range, ties, an infinite ratio
        np.concatenate([np.linspace(-745, 0, 95), np.full(905, -1e4)]),
        np.concatenate([np.zeros(900), np.full(100, 1e-300)]),
        np.concatenate([np.zeros(999), [np.inf]]),
        # the 100 largest ratios equal, the cutoff among them: every exceedance exactly zero
        np.concatenate([np.linspace(-60.0, -50.0, 900), np.zeros(100)]),
        np.zeros(1000),  # constant ratios (psis alone; check_fit's exact-q rule is tested below)
        np.full(1000, -3.5),
        np.concatenate([np.full(999, -np.inf), [0.0]]),  # one draw with a finite ratio
        np.full(1000, -np.inf),
        np.concatenate([np.full(990, np.nan), np.zeros(10)]),  # 10 defined ratios, all equal
        np.full(1000, np.nan),
        np.zeros(3),  # too few draws for a tail
    ],
    ids=str.split(
        "subnormal spread ties infinite zero-exceedances constant-0 constant minus-inf "
        "all-minus-inf nan all-nan three-draws"
    ),
)
def test_psis_never_raises_on_a_degenerate_tail(log_ratios):
    """A q far too narrow for its target (GPFA with 10,000 draws) gives ratios whose tail no
    generalized Pareto fits (there: every exceedance zero but one in the subnormals, which
    ended in `ValueError: zero-size array to reduction operation maximum`); the verdict is then
    'not reliable', not an internal error, and the weights are still weights (no nan, sum 1)."""
    with np.errstate(all="ignore"):
        weights, k = psis(log_ratios)
    assert k > 0.7
    assert weights.shape == log_ratios.shape
    assert not np.isnan(weights).any()
    assert np.sum(np.exp(weights)) == pytest.approx(1.0)


def test_generalized_pareto_fit_of_no_exceedance_is_no_shape():
    """Nothing to fit (every exceedance zero, or none): k = inf rather than an IndexError."""
    assert fit_generalized_pareto(np.zeros(20))[0] == np.inf
    assert fit_generalized_pareto(np.zeros(0))[0] == np.inf
    weights, k = psis(np.zeros(0))
    assert weights.shape == (0,) and k == np.inf


def test_psis_weighs_nan_ratios_as_minus_inf():
    """An undefined ratio (nan) weighs nothing, as a -inf one (what check_fit passes): the same
    weights and k-hat as with -inf, on a regular tail."""
    lr = stats.norm.logpdf(np.random.default_rng(4).normal(0.0, 1.0, 2000), scale=1.3)
    lr[::10] = np.nan
    weights, k = psis(lr)
    reference = psis(np.where(np.isnan(lr), -np.inf, lr))
    np.testing.assert_array_equal(weights, reference[0])
    assert k == reference[1] and np.isfinite(k)
    assert np.all(np.exp(weights[::10]) == 0.0)
    # most draws outside the target's support: the tail (95 of 1000 draws) is cut to the 49
    # above the cutoff among the 50 finite ratios, and no -inf draw gets a smoothed weight
    sparse = np.full(1000, -np.inf)
    sparse[:50] = stats.norm.logpdf(np.random.default_rng(5).normal(0.0, 1.0, 50), scale=1.3)
    weights, k = psis(sparse)
    assert np.all(np.exp(weights[50:]) == 0.0) and np.isfinite(k)
    assert np.sum(np.exp(weights)) == pytest.approx(1.0)
    # a +inf ratio: all the weight on its draws, k = inf
    lr[::10] = -np.inf
    lr[7] = np.inf
    weights, k = psis(lr)
    assert k == np.inf and np.exp(weights[7]) == pytest.approx(1.0)


def test_smoothed_weights_recover_the_target_mean():
    """Importance sampling N(1, 1) from N(0, 2^2): the weighted mean of 4000 draws is 1 within
    4.5 of its standard errors (estimated over 50 replicates)."""
    rng = np.random.default_rng(2)
    means = []
    for _ in range(50):
        z = rng.normal(0.0, 2.0, 4000)
        lw, k = psis(stats.norm.logpdf(z, loc=1.0) - stats.norm.logpdf(z, scale=2.0))
        assert k < 0.5
        means.append(np.sum(np.exp(lw) * z))
    se = np.std(means, ddof=1) / np.sqrt(len(means))
    assert abs(np.mean(means) - 1.0) < 4.5 * se + 1e-3


def _correlated(D=5, rho=0.9):
    Sigma = np.full((D, D), rho) + (1 - rho) * np.eye(D)
    return CompiledModel(check(parse(CORRELATED, "t.model")), {"D": np.array(D), "Sigma": Sigma})


def test_khat_flags_mean_field_on_a_correlated_posterior_and_passes_full_rank():
    """Equicorrelated Gaussian, rho = 0.9, D = 5. Over seeds 0-3, k-hat was 0.76-0.87 for
    mean-field ADVI (q too narrow along the common direction), -0.08-0.20 for full rank."""
    model = _correlated()
    bad = fit(model, "advi", seed=1)
    assert bad.diagnostics["khat"] > 0.7 and bad.diagnostics["verdict"] == "not reliable"
    assert any("PSIS k-hat" in w for w in bad.warnings)
    good = fit(model, "fullrank", seed=1)
    assert good.diagnostics["khat"] < 0.5 and good.diagnostics["verdict"] == "good"
    assert not any("PSIS k-hat" in w for w in good.warnings)
    # full rank is exact here: its ELBO from the draws is log Z = 0 with a tiny Monte Carlo error
    assert abs(good.diagnostics["elbo"]) < 5 * good.diagnostics["elbo_mcse"] + 0.01


def test_khat_flags_a_tiny_iteration_cap():
    """Five ADVI steps without the polish (k-hat 0.77-1.04 over seeds 0-3)."""
    result = fit(_correlated(), "advi", seed=0, iterations=5, refine_draws=0)
    assert result.diagnostics["khat"] > 0.7
    from ppl.outputs.record import ended_by

    assert ended_by(result) == "the iteration cap (--iter 5)"  # the record's, as the console's


def test_weighted_summary_with_equal_weights_is_the_plain_one():
    rng = np.random.default_rng(3)
    draws = {"a": rng.standard_normal(2001), "b": rng.gamma(2.0, size=(2001, 2))}
    plain = summarise(draws)
    weighted = summarise(draws, np.zeros(2001))
    for p, w in zip(plain, weighted, strict=True):
        assert p[0] == w[0]
        np.testing.assert_allclose(p[1], w[1], rtol=1e-12)
        np.testing.assert_allclose(p[2], w[2], rtol=1e-3)  # ddof 1 vs weights
        np.testing.assert_allclose(p[3:], w[3:], rtol=0.02, atol=1e-3)


def test_cli_reports_khat_and_psis_reweights(tmp_path):
    rc, out, err = run_main(["fit", *SCHOOLS, "--psis", "--quiet", "--output", str(tmp_path)])
    assert rc == 0, err
    assert "PSIS k-hat:" in out
    assert "ended by: the fixed-draw optimum, reached by L-BFGS, settled" in out
    info = json.loads((tmp_path / "fit.json").read_text())
    assert info["psis"]["khat"] <= 0.7 and info["psis_weighted_summaries"] is True
    header = [x for x in (tmp_path / "draws.csv").read_text().splitlines() if x[:1] != "#"][0]
    assert header.endswith(",psis_log_weight__")
    rc, out, err = run_main(["fit", *SCHOOLS, "--quiet", "--iter", "3", "--no-polish", "--psis"])
    assert rc == 0
    assert "ended by: the iteration cap (--iter 3)" in out


def test_auto_turns_to_full_rank_when_khat_flags_mean_field():
    """`auto` on the correlated Gaussian: its mean-field fit is flagged, so it fits a full-rank
    Gaussian too (exact here: ELBO 0) and keeps it, on the deterministic road and on the
    stochastic one (an optimiser named)."""
    result = fit(_correlated(), "auto", seed=1)
    assert result.method == "fullrank"
    assert result.diagnostics["khat"] < 0.5
    assert result.notes and "a full-rank Gaussian" in result.notes[0]
    assert "was kept" in result.notes[0]
    stochastic = fit(_correlated(), "auto", seed=1, optimizer="adam")
    assert stochastic.method == "fullrank" and stochastic.diagnostics["khat"] < 0.5
    assert "full-rank Gaussian was fitted too and kept" in stochastic.notes[0]
    uncorrelated = fit(_correlated(rho=0.0), "auto", seed=1)
    assert uncorrelated.method == "auto"  # mean-field is exact: k-hat good, nothing more tried
    assert uncorrelated.diagnostics["khat"] <= 0.5 and not uncorrelated.notes


def test_constant_ratios_are_exact_only_where_the_draws_spread():
    """q = p up to a constant (log p varies, the ratios only by rounding): k-hat 0, good. A q
    collapsed to a point gives constant ratios too, but constant log p: no verdict from that."""
    zeta = np.random.default_rng(0).standard_normal((1000, 2))
    log_p = lambda z: -0.5 * np.sum(z**2, axis=1)  # noqa: E731
    exact = check_fit(log_p, lambda z: log_p(z) - 3.0 + 1e-15 * z[:, 0], zeta)
    assert exact["khat"] == 0.0 and exact["verdict"] == "good"
    point = np.zeros((1000, 2)) + 1e-14 * zeta
    collapsed = check_fit(log_p, lambda z: np.full(len(z), 30.0), point)
    assert collapsed["khat"] > 0.7
