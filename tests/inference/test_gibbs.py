"""Gibbs sweeps (ppl.inference.gibbs): exact conditionals against enumeration, pair updates with
the slab integrated out, rows updated in parallel."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit, logsumexp
from scipy.stats import multivariate_normal

from ppl.inference import gibbs
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel


def _model(text: str, data: dict) -> CompiledModel:
    return CompiledModel(
        check(parse(text, "test.model")), {k: np.asarray(v) for k, v in data.items()}
    )


# three coupled indicators: z1 z3 interact, so the conditionals depend on the other values
THREE = """
data { real y; }
parameters { array[3] int<lower=0, upper=1> z; }
model {
  z ~ bernoulli(0.3);
  y ~ normal(z[1] + 2 * z[2] - z[3] + 1.5 * z[1] * z[3], 1);
}
"""


def _plan(model, local=frozenset(), rows=0):
    plan = gibbs.plan_gibbs(model, set(local), rows)
    rng = np.random.default_rng(0)  # a generic point: at zeros z * mu would hide z
    gibbs.map_rows(plan, _point(model, rng), rng)
    return plan


def _point(model, rng):
    x = rng.uniform(-2, 2, model.dim)
    for lat in model.latents:
        if lat.binary:
            x[lat.offset : lat.offset + lat.size] = rng.integers(0, 2, lat.size)
    return x


def _enumerated(model) -> tuple[np.ndarray, np.ndarray]:
    states = np.array(list(itertools.product([0.0, 1.0], repeat=model.dim)))
    lp = model.log_joint(states, binary=True)
    return states, np.exp(lp - logsumexp(lp))


def test_conditional_equals_enumeration():
    model = _model(THREE, {"y": 1.2})
    plan = _plan(model)
    states, post = _enumerated(model)
    for state in states:
        for k, unit in enumerate(plan.globals_):
            X = state[None].copy()
            p = gibbs._update(plan, X, unit, np.random.default_rng(1), per_row=False)
            on, off = state.copy(), state.copy()
            on[k], off[k] = 1.0, 0.0
            p_on = post[np.all(states == on, axis=1)][0]
            p_off = post[np.all(states == off, axis=1)][0]
            assert p[0, 0] == pytest.approx(p_on / (p_on + p_off), abs=1e-12)


def test_sweeps_reach_the_enumerated_joint():
    # 4000 chains, 20 sweeps each from a random start: the states' frequencies are the posterior
    model = _model(THREE, {"y": 1.2})
    plan = _plan(model)
    states, post = _enumerated(model)
    rng = np.random.default_rng(2)
    X = (rng.uniform(size=(4000, 3)) < 0.5).astype(float)
    for _ in range(20):
        gibbs.sweep(plan, X, rng)
    freq = np.array([np.mean(np.all(X == s, axis=1)) for s in states])
    se = np.sqrt(post * (1 - post) / len(X))
    assert np.all(np.abs(freq - post) < 4.5 * se + 1e-3), (freq, post)


SLAB = """
data { int N; matrix[N, 2] X; vector[N] y; }
parameters { array[2] int<lower=0, upper=1> z; vector[2] w; }
model {
  z ~ bernoulli(0.5);
  w ~ normal(0, 1);
  y ~ normal(X * (to_vector(z) .* w), 1);
}
"""


def test_pair_update_integrates_the_slab():
    # (z, w) drawn jointly: z's frequencies match p(z | y) with w integrated out in closed form
    rng = np.random.default_rng(3)
    N = 6
    X = rng.normal(size=(N, 2))
    X[:, 1] = 0.8 * X[:, 0] + 0.6 * X[:, 1]  # correlated inputs
    y = X @ np.array([0.7, 0.0]) + rng.normal(size=N)
    model = _model(SLAB, {"N": N, "X": X, "y": y})
    plan = _plan(model)
    assert all(u.cont is not None for u in plan.globals_)
    assert gibbs.check_quadratic(plan, np.zeros((1, model.dim))) == []
    subsets = list(itertools.product([0, 1], repeat=2))
    lp = []
    for z in subsets:
        Xz = X * np.array(z)
        lp.append(multivariate_normal(np.zeros(N), np.eye(N) + Xz @ Xz.T).logpdf(y))
    post = np.exp(np.array(lp) - logsumexp(lp))
    S = 4000
    state = np.zeros((S, model.dim))
    state[:, :2] = rng.uniform(size=(S, 2)) < 0.5
    for _ in range(30):
        gibbs.sweep(plan, state, rng)
    freq = np.array([np.mean(np.all(state[:, :2] == z, axis=1)) for z in subsets])
    se = np.sqrt(post * (1 - post) / S)
    assert np.all(np.abs(freq - post) < 4.5 * se + 1e-3), (freq, post)


MIXTURE = """
data { int<lower=1> N; vector[N] y; }
parameters { array[N] int<lower=0, upper=1> z; real mu; real<lower=0, upper=1> pi; }
model { mu ~ normal(0, 10); z ~ bernoulli(pi); y ~ normal(to_vector(z) * mu, 1); }
"""
MIX_DATA = {"N": 8, "y": [-0.3, 0.4, 0.1, -0.8, 5.2, 4.6, 5.9, 4.9]}


def test_rows_in_parallel_give_each_rows_conditional():
    # one evaluation per point updates z[n] of every row; each equals its closed form
    model = _model(MIXTURE, MIX_DATA)
    plan = _plan(model, {"z"}, 8)
    assert len(plan.local) == 1 and plan.local[0].size == 8
    y = np.array(MIX_DATA["y"])
    mu, logit_pi = 3.0, 0.4
    x = np.zeros(model.dim)
    x[8], x[9] = mu, logit_pi
    X = x[None].copy()
    p = gibbs._update(plan, X, plan.local[0], np.random.default_rng(0), per_row=True)
    exact = expit(logit_pi - 0.5 * (y - mu) ** 2 + 0.5 * y**2)
    assert np.allclose(p[0], exact, atol=1e-10)


COUPLED_ROWS = """
data { int<lower=1> N; vector[N] y; }
parameters { array[N] int<lower=0, upper=1> z; }
model { z ~ bernoulli(0.5); y ~ normal(to_vector(z) + sum(z), 1); }
"""


def test_rows_that_are_not_separate_are_refused():
    model = _model(COUPLED_ROWS, {"N": 4, "y": [0.1, 1.0, 2.0, 0.5]})
    plan = gibbs.plan_gibbs(model, {"z"}, 4)
    with pytest.raises(gibbs.GibbsStructureError, match="not independent across rows"):
        gibbs.map_rows(plan, _point(model, np.random.default_rng(0)), np.random.default_rng(0))
