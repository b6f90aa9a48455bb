"""ADVI against exact posteriors (conjugate models) and posteriordb reference posteriors.

Tolerances: the reference means carry Monte Carlo error of about sd/100; the fitted summaries come
from 4000 independent draws of q, whose mean has Monte Carlo error sd_q/63. A Gaussian family on a
Gaussian posterior has zero approximation error, so conjugate checks use a few Monte Carlo standard
errors; posteriordb checks use the issue's bar of 0.3 reference sd.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ppl.data.build import build
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.outputs.summary import flatten_draws
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

ROOT = Path(__file__).resolve().parents[2]
POSTERIORDB = ROOT / "models" / "posteriordb"
DRAWS = 4000


def _model(text: str, data: dict) -> CompiledModel:
    return CompiledModel(
        check(parse(text, "test.model")), {k: np.asarray(v) for k, v in data.items()}
    )


def test_conjugate_normal_mean_recovered_by_both_families():
    rng = np.random.default_rng(3)
    y = rng.normal(1.5, 2.0, size=20)
    text = """
    data { int N; vector[N] y; }
    parameters { real mu; }
    model { mu ~ normal(0, 10); y ~ normal(mu, 2); }
    """
    prec = 1 / 10**2 + len(y) / 2**2
    exact_mean, exact_sd = (y.sum() / 4) / prec, prec**-0.5
    for method in ("advi", "fullrank"):
        result = fit(_model(text, {"N": len(y), "y": y}), method, seed=2, draws=DRAWS)
        draws = result.draws["mu"]
        # 5 Monte Carlo standard errors of a mean of 4000 draws
        assert abs(draws.mean() - exact_mean) < 5 * exact_sd / np.sqrt(DRAWS)
        # sd of 4000 draws has relative Monte Carlo error ~ 1/sqrt(2 * 4000) = 1.1%; allow 5%
        assert abs(draws.std() / exact_sd - 1) < 0.05


def test_fullrank_recovers_mean_and_covariance_of_bayesian_linear_regression():
    rng = np.random.default_rng(4)
    N, K, noise, prior_sd = 30, 3, 0.7, 5.0
    X = rng.normal(size=(N, K))
    X[:, 1] = X[:, 0] + 0.3 * X[:, 1]  # correlated predictors: a strongly correlated posterior
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.normal(0, noise, N)
    text = f"""
    data {{ int N; int K; matrix[N, K] X; vector[N] y; }}
    parameters {{ vector[K] beta; }}
    model {{ beta ~ normal(0, {prior_sd}); y ~ normal(X * beta, {noise}); }}
    """
    precision = np.eye(K) / prior_sd**2 + X.T @ X / noise**2
    cov = np.linalg.inv(precision)
    mean = cov @ X.T @ y / noise**2
    result = fit(_model(text, {"N": N, "K": K, "X": X, "y": y}), "fullrank", seed=5, draws=DRAWS)
    draws = result.draws["beta"]
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(draws.mean(axis=0) - mean) < 5 * sd / np.sqrt(DRAWS))
    # covariance entries of 4000 draws: standard error ~ sd_i sd_j sqrt(2 / 4000) = 0.022 sd_i sd_j
    err = np.abs(np.cov(draws.T) - cov) / np.outer(sd, sd)
    assert err.max() < 0.1
    # the mean-field optimum for a Gaussian target: exact means, variances 1 / diag(precision)
    mf = fit(_model(text, {"N": N, "K": K, "X": X, "y": y}), "advi", seed=5, draws=DRAWS)
    mf_draws = mf.draws["beta"]
    mf_sd = 1 / np.sqrt(np.diag(precision))
    assert np.all(np.abs(mf_draws.mean(axis=0) - mean) < 5 * mf_sd / np.sqrt(DRAWS) + 0.02 * sd)
    assert np.all(np.abs(mf_draws.std(axis=0) / mf_sd - 1) < 0.05)


# every posteriordb posterior in the repository, with a family that fits it within 0.3 reference
# sd (docs/accuracy.md): gp_pois_regr needs the full-rank family; full-rank is also the quicker
# fit for kilpisjarvi and garch. The four added with the wider library run the default road
# (auto): 0.03 (arma11), 0.04 (diamonds), 0.02 (gp_regr), 0.06 (low_dim_gauss_mix) reference sd;
# so do hmm_example (the forward algorithm, loops over time and states) and lotka_volterra (an
# ODE: ppl.library.dopri5 on a tape of its right-hand side, the mode's Hessian from differences of
# gradients): 0.05 reference sd in 8 s.
# Not listed: accel_gp runs (user functions) but the default fit (210 s) is 7.7 reference sd off
# on sdgp_1 (PSIS k-hat 1.6).
PASSING = {
    "arK-arK": "advi",
    "arma-arma11": "auto",
    "diamonds-diamonds": "auto",
    "gp_pois_regr-gp_regr": "auto",
    "low_dim_gauss_mix-low_dim_gauss_mix": "auto",
    "garch-garch11": "fullrank",
    "earnings-earn_height": "advi",
    "earnings-log10earn_height": "advi",
    "gp_pois_regr-gp_pois_regr": "fullrank",
    "hmm_example-hmm_example": "auto",
    "hudson_lynx_hare-lotka_volterra": "auto",
    "kidiq-kidscore_interaction": "advi",
    "kidiq-kidscore_momiq": "advi",
    "kilpisjarvi_mod-kilpisjarvi": "fullrank",
    "mesquite-logmesquite_logvolume": "advi",
    "nes2000-nes": "advi",
    "sblrc-blr": "advi",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(PASSING))
def test_posteriordb_means_within_0_3_reference_sd(name):
    folder = POSTERIORDB / name
    reference = json.loads((folder / "reference.json").read_text())["parameters"]
    model = build(str(folder / "model.stan"), [str(folder / "data.json")], seed=1)
    result = fit(model, PASSING[name], seed=1, draws=DRAWS)
    names, matrix = flatten_draws(result.draws)
    column = {n: i for i, n in enumerate(names)}
    errors = {
        p: abs(matrix[:, column[p]].mean() - r["mean"]) / r["sd"] for p, r in reference.items()
    }
    worst = max(errors, key=errors.get)
    assert errors[worst] < 0.3, f"{name}: {worst} is {errors[worst]:.2f} reference sd off"
