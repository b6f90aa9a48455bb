"""Truncation T[L, U], T[L, ], T[, U]: the renormalised density against scipy's truncated
distributions and by normalisation (quadrature, sums over the support), inside whole models
(vectorised and in loops, bounds that are data or parameters), with gradients."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from scipy import integrate, stats

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.library.distributions import DISTRIBUTIONS
from ppl.library.distributions.truncated import Truncated
from ppl.runtime.compiler import CompiledModel


def _truncnorm(lo, hi, mu, sigma):
    return stats.truncnorm((lo - mu) / sigma, (hi - mu) / sigma, loc=mu, scale=sigma)


@pytest.mark.parametrize("lo, hi", [(-0.5, 2.0), (1.0, np.inf), (-np.inf, 0.3), (4.0, 9.0)])
def test_truncated_normal_matches_scipy(lo, hi):
    d = Truncated(DISTRIBUTIONS["normal"], np.isfinite(lo), np.isfinite(hi))
    bounds = [b for b in (lo, hi) if np.isfinite(b)]
    y = np.linspace(max(lo, -3.0) + 1e-3, min(hi, 12.0) - 1e-3, 7)
    got = d.log_prob(y, 0.4, 1.3, *bounds)
    np.testing.assert_allclose(got, _truncnorm(lo, hi, 0.4, 1.3).logpdf(y), rtol=1e-9)
    outside = d.log_prob(np.array([lo - 1.0, hi + 1.0]), 0.4, 1.3, *bounds)
    assert np.all(outside[np.isfinite([lo - 1.0, hi + 1.0])] == -np.inf)


@pytest.mark.parametrize(
    "name, params, lo, hi",
    [
        ("gamma", (2.5, 1.3), 0.5, 3.0),
        ("student_t", (3.0, 0.0, 1.0), -1.0, None),
        ("lognormal", (0.2, 0.8), None, 2.0),
        ("exponential", (1.5,), 0.2, 1.0),
    ],
)
def test_truncated_continuous_densities_integrate_to_one(name, params, lo, hi):
    d = Truncated(DISTRIBUTIONS[name], lo is not None, hi is not None)
    bounds = [b for b in (lo, hi) if b is not None]

    def density(y):
        return float(np.exp(d.log_prob(y, *params, *bounds)))

    a = lo if lo is not None else (-np.inf if name == "student_t" else 0.0)
    total, _ = integrate.quad(density, a, hi if hi is not None else np.inf)
    np.testing.assert_allclose(total, 1.0, rtol=1e-8)


@pytest.mark.parametrize(
    "name, params, lo, hi",
    [
        ("poisson", (3.5,), 2, 8),
        ("poisson", (3.5,), 2, None),  # Stan: Pr[y >= 2] = 1 - F(1)
        ("binomial", (10, 0.3), None, 4),
        ("neg_binomial_2", (3.0, 2.5), 1, 6),
    ],
)
def test_truncated_discrete_pmfs_sum_to_one_and_keep_the_bounds(name, params, lo, hi):
    d = Truncated(DISTRIBUTIONS[name], lo is not None, hi is not None)
    bounds = [b for b in (lo, hi) if b is not None]
    k = np.arange(0, 200)
    p = np.exp(d.log_prob(k, *params, *bounds))
    np.testing.assert_allclose(p.sum(), 1.0, rtol=1e-10)
    if lo is not None:
        assert p[lo] > 0 and np.all(p[:lo] == 0)
    if hi is not None:
        assert p[hi] > 0 and np.all(p[hi + 1 :] == 0)


def _model(src: str, data: dict) -> CompiledModel:
    data = {k: np.asarray(v) for k, v in data.items()}
    return CompiledModel(check(parse(src, "m.stan")), data, seed=0)


def test_truncation_in_a_model_vectorised_and_in_a_loop():
    rng = np.random.default_rng(0)
    y = _truncnorm(0.0, 4.0, 1.0, 2.0).rvs(20, random_state=rng)
    data = {"N": 20, "y": y, "L": 0.0, "U": 4.0}
    head = "data { int N; vector[N] y; real L; real U; } parameters { real mu; real<lower=0> s; }"
    vectorised = _model(head + " model { y ~ normal(mu, s) T[L, U]; }", data)
    looped = _model(head + " model { for (n in 1:N) y[n] ~ normal(mu, s) T[L, U]; }", data)
    zeta = rng.normal(size=(4, 2)) * 0.5
    mu, s = zeta[:, 0], np.exp(zeta[:, 1])
    expected = np.array(
        [_truncnorm(0.0, 4.0, m, sd).logpdf(y).sum() for m, sd in zip(mu, s, strict=True)]
    )
    expected += zeta[:, 1]  # log-Jacobian of s = exp(u)
    np.testing.assert_allclose(vectorised.log_joint(zeta), expected, rtol=1e-9)
    np.testing.assert_allclose(looped.log_joint(zeta), expected, rtol=1e-9)


def test_bounds_that_are_parameters_get_gradients():
    data = {"y": np.array([0.4, 1.1, 2.0])}
    model = _model(
        "data { vector[3] y; } parameters { real<upper=0.4> lo; } "
        "model { lo ~ normal(0, 1); y ~ normal(1, 1) T[lo, ]; }",
        data,
    )
    zeta = np.array([[0.3], [-1.0]])

    def f(z):
        return anp.sum(model.log_joint(z))

    g = grad(f)(zeta)
    h = 1e-6
    fd = np.array([(f(zeta + h * e) - f(zeta - h * e)) / (2 * h) for e in np.eye(2)[:, :, None]])
    np.testing.assert_allclose(g.ravel(), fd.ravel(), rtol=1e-6)
    lo = 0.4 - np.exp(zeta[:, 0])
    expected = [
        stats.norm.logpdf(a) + _truncnorm(a, np.inf, 1.0, 1.0).logpdf(data["y"]).sum() + z
        for a, z in zip(lo, zeta[:, 0], strict=True)
    ]
    np.testing.assert_allclose(model.log_joint(zeta), expected, rtol=1e-9)
