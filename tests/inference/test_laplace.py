"""The Laplace collapse (ppl.inference.laplace, laplace_fit): exact where the conditional is
Gaussian (a normal likelihood: the closed-form marginal), close to quadrature where it is a
Poisson one (one outer coordinate, four latents whose integrals are one-dimensional), and
on the default road for posteriordb's gp_pois_regr."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import gammaln

from ppl.data.build import build
from ppl.diagnostics.psis import psis
from ppl.inference.auto import CandidateFailed
from ppl.inference.laplace import Laplace, laplace_split
from ppl.inference.laplace_fit import fit_laplace
from ppl.inference.result import VIResult

MODEL = """
data {
  int<lower=1> N;
  array[N] int k;
}
parameters {
  real<lower=0> sigma;
  vector[N] x;
}
model {
  sigma ~ lognormal(0, 1);
  x ~ normal(0, sigma);
  LIKELIHOOD;
}
"""
COUNTS = np.array([8, 15, 30, 12])
GS = np.linspace(0.0, 2.0, 9)  # log sigma: the posterior's mean 0.96, sd 0.33


def _model(tmp_path: Path, likelihood: str):
    (tmp_path / "m.stan").write_text(MODEL.replace("LIKELIHOOD", likelihood))
    (tmp_path / "d.json").write_text(json.dumps({"N": len(COUNTS), "k": COUNTS.tolist()}))
    return build(str(tmp_path / "m.stan"), [str(tmp_path / "d.json")], seed=1)


def _laplace(model) -> Laplace:
    points = np.column_stack([np.full(4, 0.5), np.tile(np.log(COUNTS), (4, 1))])
    split = laplace_split(model, points)
    assert split.names == ["x"] and list(split.outer) == [0]
    lap = Laplace(model.log_joint, split, model.dim)
    lap.seed(np.array([0.5]), np.log(COUNTS))
    return lap


def _centred(v: np.ndarray) -> np.ndarray:
    return v - v.mean()  # the log joint drops constants


#: The quadrature's nodes in x: the integrands (each count's likelihood times the prior) are
#: negligible outside, and the trapezoid rule on a smooth one is exact to round-off here.
X = np.linspace(-4.0, 6.0, 4001)


def _log_integrands(gs: np.ndarray) -> np.ndarray:
    """log of N(x; 0, sigma) Poisson(k | e^x) at (g, count, x), sigma = e^g."""
    s = np.exp(np.asarray(gs, dtype=float))[:, None, None]
    k = COUNTS[None, :, None]
    return stats.norm.logpdf(X, 0, s) + k * X - np.exp(X) - gammaln(k + 1)


def _poisson_log_marginal(gs: np.ndarray) -> np.ndarray:
    """log p(log sigma) by quadrature: the prior, the Jacobian, one integral per count."""
    lf = _log_integrands(gs)
    top = lf.max(axis=2, keepdims=True)
    logs = np.log(integrate.trapezoid(np.exp(lf - top), X, axis=2)) + top[:, :, 0]
    return stats.lognorm.logpdf(np.exp(gs), 1) + gs + logs.sum(axis=1)


def _exact_means_of_x(gs: np.ndarray, w: np.ndarray) -> np.ndarray:
    """E[x_i] under the exact posterior: E[x_i | g] by quadrature, averaged over w(g)."""
    f = np.exp(_log_integrands(gs) - _log_integrands(gs).max(axis=2, keepdims=True))
    conditional = integrate.trapezoid(f * X, X, axis=2) / integrate.trapezoid(f, X, axis=2)
    return w @ conditional


def test_exact_where_the_conditional_is_gaussian(tmp_path):
    """y_i ~ normal(x_i, 1), x_i ~ normal(0, sigma): y_i ~ normal(0, sqrt(sigma^2 + 1))."""
    model = _model(tmp_path, "to_vector(k) ~ normal(x, 1)")
    lap = _laplace(model)
    x, _, J, value, ok = lap.solve(GS[:, None], np.eye(1))
    s2 = np.exp(2 * GS)
    exact = stats.lognorm.logpdf(np.exp(GS), 1) + GS
    exact += stats.norm.logpdf(COUNTS[None, :], 0, np.sqrt(s2 + 1)[:, None]).sum(axis=1)
    assert ok.all()
    np.testing.assert_allclose(_centred(value), _centred(exact), atol=1e-6)
    np.testing.assert_allclose(x, COUNTS * (s2 / (s2 + 1))[:, None], rtol=1e-6)
    # dx*/dg = y 2 s^2 / (s^2 + 1)^2 (g = log sigma), from H_xg at the last iterate but one
    # (within sqrt(DECREMENT) of x*, relatively)
    np.testing.assert_allclose(J[:, :, 0], COUNTS * (2 * s2 / (s2 + 1) ** 2)[:, None], rtol=1e-2)


def test_close_to_quadrature_where_the_conditional_is_poisson(tmp_path):
    model = _model(tmp_path, "k ~ poisson_log(x)")
    lap = _laplace(model)
    value = lap.solve(GS[:, None], np.eye(1))[3]
    exact = _poisson_log_marginal(GS)
    # Laplace's error in each integral is O(1/k): within 0.02 nats here, and smooth in g
    np.testing.assert_allclose(_centred(value), _centred(exact), atol=0.02)
    assert np.mean(lap.iterations) < 3  # warm starts: one or two Newton iterations a point


def test_the_grid_q_has_the_quadrature_posterior(tmp_path):
    model = _model(tmp_path, "k ~ poisson_log(x)")
    lap = _laplace(model)
    start = VIResult("fullrank", np.r_[0.5, np.log(COUNTS)], 0.3 * np.eye(5), [], 0.0, 0, 0,
                     True, 0.0, 0.0)  # fmt: skip
    q = fit_laplace(model.log_joint, model.dim, lap.split, start, seed=0)
    assert q.grad_evals < 2000 and q.polish["integrated"] == ["x"]
    z = q.sample(np.random.default_rng(1), 20_000)
    log_ratio = np.asarray(model.log_joint(z)) - q.log_q(z)
    assert psis(log_ratio[:4000])[1] < 0.7
    grid = np.linspace(-2.0, 3.5, 500)
    lg = _poisson_log_marginal(grid)
    w = np.exp(lg - lg.max())
    w /= w.sum()
    mean = w @ grid
    sd = np.sqrt(w @ (grid - mean) ** 2)
    assert abs(z[:, 0].mean() - mean) < 0.03 * sd
    assert abs(z[:, 0].std() / sd - 1) < 0.03
    # log q is the sampler's own density: importance weights correct the conditional's
    # Gaussian to the exact posterior of x (whose mean is below the mode by ~1/(2k))
    weights = np.exp(log_ratio - log_ratio.max())
    for i, exact_mean in enumerate(_exact_means_of_x(grid, w)):
        sd_x = z[:, 1 + i].std()
        assert abs(z[:, 1 + i].mean() - exact_mean) < 0.25 * sd_x  # Laplace's own error
        assert abs(weights @ z[:, 1 + i] / weights.sum() - exact_mean) < 0.05 * sd_x


def test_no_split_where_the_conditional_is_not_concave(tmp_path):
    # log p = -log1p(x^2) per x is convex beyond |x| = 1, by more than the prior's 1 / sigma^2
    # is concave at sigma = e^3
    model = _model(tmp_path, "target += -sum(log1p(square(x))) + 0 * sum(k)")
    points = np.column_stack([np.full(4, 3.0), np.full((4, 4), 2.0)])
    assert laplace_split(model, points) is None


def test_the_budget_ends_the_grid_as_a_failed_candidate(tmp_path):
    model = _model(tmp_path, "k ~ poisson_log(x)")
    split = _laplace(model).split
    start = VIResult("fullrank", np.r_[0.5, np.log(COUNTS)], 0.3 * np.eye(5), [], 0.0, 0, 0,
                     True, 0.0, 0.0)  # fmt: skip
    with pytest.raises(CandidateFailed) as failed:
        fit_laplace(model.log_joint, model.dim, split, start, seed=0, budget=300)
    assert 0 < failed.value.grad_evals <= 300


@pytest.mark.slow
def test_the_default_road_fits_gp_pois_regr_through_the_laplace_collapse():
    from ppl.outputs.summary import flatten_draws
    from ppl.pipeline import fit

    folder = (
        Path(__file__).resolve().parents[2] / "models" / "posteriordb" / "gp_pois_regr-gp_pois_regr"
    )
    model = build(str(folder / "model.stan"), [str(folder / "data.json")], seed=1)
    result = fit(model, "auto", seed=1, draws=4000)
    assert "Laplace" in result.description
    assert result.vi.grad_evals < 50_000
    assert result.diagnostics["verdict"] != "not reliable"
    ref = json.loads((folder / "reference.json").read_text())["parameters"]
    names, matrix = flatten_draws(result.draws)
    col = {n: i for i, n in enumerate(names)}
    for param, r in ref.items():
        x = matrix[:, col[param]]
        assert abs(x.mean() - r["mean"]) < 0.1 * r["sd"], param
        assert 0.8 <= x.std(ddof=1) / r["sd"] <= 1.25, param
