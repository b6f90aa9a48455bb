"""The collapse (ppl.inference.collapse): latents the log joint is quadratic in, integrated out
exactly. Checked against the closed-form marginal of eight schools, finite differences, the
dense Hessian, and the posteriors of the hard suite."""

from __future__ import annotations

import json
from pathlib import Path

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from scipy import stats

from ppl.data.build import build
from ppl.inference.collapse import Collapsed, colour, find_split
from ppl.inference.collapse_grid import fit_grid
from ppl.inference.hessian import hessian_by_hvp
from ppl.outputs.summary import flatten_draws
from ppl.pipeline import fit

HARD = Path(__file__).resolve().parents[2] / "models" / "hard"


def _model(name: str):
    return build(str(HARD / name / "model.stan"), [str(HARD / name / "data.json")], seed=1)


def _points(model, n: int = 8, seed: int = 0) -> np.ndarray:
    return 0.5 * np.random.default_rng(seed).standard_normal((n, model.dim))


def _collapsed(name: str) -> tuple:
    model = _model(name)
    points = _points(model)
    split = find_split(model, points, np.random.default_rng(1))
    return model, split, Collapsed(model.log_joint, split, points[:, split.inner].mean(0),
                                   model.dim)  # fmt: skip


def test_eight_schools_marginal_in_tau_is_the_closed_form():
    """Integrating mu and theta_tilde out of the non-centred eight schools leaves
    y ~ N(0, 25 11' + diag(sigma^2 + tau^2)) times tau's prior and the log transform's Jacobian:
    differences between values of log tau must match to round-off (constants may differ)."""
    model, split, collapsed = _collapsed("eight_schools_noncentered")
    assert split.names == ["theta_tilde", "mu"] or set(split.names) == {"theta_tilde", "mu"}
    d = json.loads((HARD / "eight_schools_noncentered" / "data.json").read_text())
    y, sigma = np.array(d["y"]), np.array(d["sigma"])
    u = np.linspace(-3.0, 3.0, 13)
    exact = []
    for t in np.exp(u):
        cov = 25.0 * np.ones((8, 8)) + np.diag(sigma**2 + t**2)
        exact.append(stats.multivariate_normal(np.zeros(8), cov).logpdf(y)
                     + stats.cauchy(0, 5).logpdf(t) + np.log(t))  # fmt: skip
    ours = np.asarray(collapsed(u[:, None]))
    np.testing.assert_allclose(ours - ours[6], np.array(exact) - exact[6], atol=1e-8)


@pytest.mark.parametrize("name", ["eight_schools_noncentered", "measurement_error"])
def test_gradient_matches_finite_differences(name):
    model, split, collapsed = _collapsed(name)
    g = _points(model, 4, seed=2)[:, split.outer]
    ours = grad(lambda G: anp.sum(collapsed(G)))(g)
    h = 1e-5
    for k in range(g.shape[1]):
        e = np.zeros_like(g)
        e[:, k] = h
        fd = (np.asarray(collapsed(g + e)) - np.asarray(collapsed(g - e))) / (2 * h)
        np.testing.assert_allclose(ours[:, k], fd, rtol=1e-5, atol=1e-6)


def test_measurement_error_integrates_the_true_values_intercept_and_their_mean():
    model, split, collapsed = _collapsed("measurement_error")
    assert set(split.names) == {"x", "mu_x", "alpha"}
    assert len(split.colours) == 3  # x in one product, alpha and mu_x (dense rows) in one each
    g = _points(model, 2, seed=3)[:, split.outer]
    P = collapsed.precision(g)
    for row in range(2):
        z = collapsed.full(g[row : row + 1], collapsed.x0[None, :])[0]
        dense = -hessian_by_hvp(model.log_joint, z)[np.ix_(split.inner, split.inner)]
        np.testing.assert_allclose(P[row], dense, rtol=1e-9, atol=1e-9)


def test_the_integral_does_not_depend_on_the_expansion_point():
    model, split, collapsed = _collapsed("measurement_error")
    other = Collapsed(model.log_joint, split, collapsed.x0 + 1.5, model.dim)
    g = _points(model, 3, seed=4)[:, split.outer]
    np.testing.assert_allclose(np.asarray(other(g)), np.asarray(collapsed(g)), atol=1e-8)


def test_colours_read_every_entry_of_an_arrowhead_once():
    n = 12
    pattern = np.eye(n, dtype=bool)
    pattern[0, :] = pattern[:, 0] = True  # a shared intercept
    colours, dense = colour(pattern)
    assert list(dense) == [0] and len(colours) == 2


def test_no_split_where_nothing_is_quadratic():
    model = _model("gamma_poisson")
    assert find_split(model, _points(model), np.random.default_rng(0)) is None


def test_grid_on_a_skewed_density_has_its_exact_moments():
    """log lambda with lambda ~ gamma(2, 1): density exp(2u - e^u) / Gamma(2)."""
    q = fit_grid(lambda u: 2 * u[:, 0] - np.exp(u[:, 0]), np.array([0.5]), np.array([[1.0]]))
    u = q.sample(np.random.default_rng(0), 200_000)[:, 0]
    from scipy.special import digamma, polygamma

    assert abs(u.mean() - digamma(2)) < 0.01
    assert abs(u.std() / np.sqrt(polygamma(1, 2)) - 1) < 0.01
    assert abs(q.elbo - 0.0) < 0.01  # log of the normaliser Gamma(2) = 1
    np.testing.assert_allclose(q.log_q(u[:5, None]), 2 * u[:5] - np.exp(u[:5]), atol=0.2)


@pytest.mark.parametrize("name", ["eight_schools_noncentered", "eight_schools_centered"])
def test_the_default_road_fits_eight_schools_through_the_collapse(name):
    model = _model(name)
    result = fit(model, "auto", seed=1, draws=4000)
    assert "collapsed" in (result.description or "")
    ref = json.loads((HARD / name / "reference.json").read_text())["parameters"]
    names, matrix = flatten_draws(result.draws)
    col = {n: i for i, n in enumerate(names)}
    for param, r in ref.items():
        x = matrix[:, col[param]]
        assert abs(x.mean() - r["mean"]) < 0.1 * r["sd"], param
        assert 0.8 <= x.std(ddof=1) / r["sd"] <= 1.25, param
    assert result.diagnostics["verdict"] != "not reliable"


@pytest.mark.slow
def test_a_collapse_the_budget_cut_is_a_fault_naming_what_q_was_still_fitting():
    from ppl.inference.collapse_fit import split_of
    from ppl.methods.collapse import collapsed

    model = _model("measurement_error")
    first = fit(model, "meanfield", seed=1, iterations=3000)
    split = split_of(model, first.vi, 1)
    q = collapsed(model, first, split, seed=1, budget=6000, max_iter=None)
    assert not q.converged
    (fault,) = q.polish["faults"]
    assert fault["how"] == "not converged" and set(fault["parameters"]) == {"beta", "sigma",
                                                                            "sigma_x"}
