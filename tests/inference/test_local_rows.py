"""After a local/global fit every row's local latents are the Gibbs conditional given the globals
(ppl.inference.local_rows), not the state a row was left in (its initial coin flips when no
minibatch visited it); and large local latents are kept as per-row means, said so by the fit."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import expit, logsumexp

import ppl
from ppl.errors import PplError
from ppl.inference.local_global import fit_local_global
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

# two indicators per row sharing the row's likelihood term: their conditional is dependent
TWO = """
data { int<lower=1> N; vector[N] y; }
parameters {
  real a;
  real b;
  array[N, 2] int<lower=0, upper=1> z;
  real<lower=0, upper=1> pi;
}
model {
  matrix[N, 2] Zm = to_matrix(z);
  a ~ normal(0, 3);
  b ~ normal(0, 3);
  for (k in 1:2) z[:, k] ~ bernoulli(pi);
  y ~ normal(Zm[:, 1] * a + Zm[:, 2] * b, 1);
}
"""


def _data(N: int, seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    z = rng.uniform(size=(N, 2)) < 0.4
    y = 3.0 * z[:, 0] + 1.5 * z[:, 1] + rng.standard_normal(N)
    return {"N": N, "y": y}


def _exact(y: np.ndarray, a: float, b: float, pi: float) -> np.ndarray:
    """(N, 2) P(z_nk = 1 | a, b, pi, y_n) by enumerating the 4 states of a row."""
    states = np.array(list(itertools.product((0, 1), repeat=2)), dtype=float)
    mu = states @ np.array([a, b])  # (4,)
    prior = states.sum(1) * np.log(pi) + (2 - states.sum(1)) * np.log1p(-pi)
    lp = prior[None] - 0.5 * (y[:, None] - mu[None]) ** 2  # (N, 4)
    w = np.exp(lp - logsumexp(lp, axis=1, keepdims=True))
    return w @ states


def test_unvisited_rows_get_the_conditional_given_the_globals():
    # 5 batches of 10 of 400 rows: about 88 % of the rows are never visited; each row's per-row
    # mean of z must still be its exact conditional at q's mean globals (enumeration)
    data = _data(400)
    values = {k: np.asarray(v) for k, v in data.items()}
    model = CompiledModel(check(parse(TWO, "two.model")), values)
    rng = np.random.default_rng(1)
    init = model.random_init(rng)
    vi = fit_local_global(model, init, rng, batch=10, max_iter=5, min_iter=10**9, samples=200)
    at = {lat.name: lat for lat in model.latents}
    mean = dict(zip(vi.q_columns.tolist(), vi.mean, strict=True))
    a, b = mean[at["a"].offset], mean[at["b"].offset]
    pi = expit(mean[at["pi"].offset])  # logit-transformed on the unconstrained scale
    exact = _exact(np.asarray(data["y"]), a, b, pi)
    got = vi.local_means["z"]
    assert got.shape == (400, 2)
    assert np.mean(np.abs(got - exact)) < 0.05
    # and the draws: each row's z across draws follows the same conditional (draws' globals
    # vary around q's mean, so a looser bound)
    draws = vi.sample(np.random.default_rng(2), 30)
    z = draws[:, at["z"].offset : at["z"].offset + at["z"].size].reshape(30, 400, 2)
    assert np.mean(np.abs(z.mean(axis=0) - exact)) < 0.12


def test_summarised_locals_say_so():
    data = _data(60)
    model = ppl.Model(TWO)
    fit = model.fit(data, method="svi", batch=10, iterations=5, seed=1, draws=20, quiet=True,
                    local_draws="means")  # fmt: skip
    with pytest.raises(PplError, match="local-draws all"):
        fit.draws("z")
    assert fit.local_means("z").shape == (60, 2)
    assert fit.draws("a").shape == (20,)
    assert "z" not in fit.result.draws
    diag = fit.result.diagnostics
    assert "PSIS k-hat was not computed" in diag["psis_skipped"]
    assert any("PSIS k-hat was not computed" in w for w in fit.warnings)
    assert any(w.startswith("z: local latents kept as per-row means") for w in fit.warnings)
    assert diag["verdict"] in ("usable", "not reliable")
    # kept as draws by default at this size
    fit = model.fit(data, method="svi", batch=10, iterations=5, seed=1, draws=20, quiet=True)
    assert np.asarray(fit.draws("z")).shape == (20, 60, 2)
