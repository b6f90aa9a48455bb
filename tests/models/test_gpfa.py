"""Gamma process factor analysis (models/gpfa): the model checks, its log joint equals a direct
scipy computation, and a short gamma-SGVB fit finds a sparse loading pattern."""

from __future__ import annotations

import itertools
import json
import os

import numpy as np
import pytest
from scipy import stats

from ppl.data.build import build
from ppl.language.frontend import load_model
from ppl.pipeline import fit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "gpfa", "gpfa.model")
SUFFSTAT = os.path.join(ROOT, "models", "gpfa", "gpfa_suffstat.model")


def _write(tmp_path, Y, K, name="d.json"):
    N, D = Y.shape
    path = tmp_path / name
    path.write_text(json.dumps({"N": N, "D": D, "K": K, "y": Y.tolist()}))
    return str(path)


def _direct_log_joint(z, Y, D, K):
    """log p(y, W, r, g, g0, c0, tau) + log-Jacobian of exp, from scipy (paper eqs. 16, 19)."""
    W = np.exp(z[: D * K]).reshape(D, K)  # ppl lays a matrix out row by row
    r = np.exp(z[D * K : D * K + K])
    g, g0, c0, tau = np.exp(z[D * K + K :])
    Sigma = W @ W.T + np.eye(D) / tau
    lp = stats.multivariate_normal(np.zeros(D), Sigma).logpdf(Y).sum()
    lp += sum(stats.gamma(1.0).logpdf(v) for v in (g, g0, c0))
    lp += stats.gamma(g0 / K, scale=1 / c0).logpdf(r).sum()
    lp += stats.gamma(g * r[None, :], scale=1 / g).logpdf(W).sum()
    lp += stats.gamma(0.1, scale=10.0).logpdf(tau)
    return lp + np.sum(z)  # every latent is exp(z): log-Jacobian sum(z)


@pytest.mark.parametrize("path", [MODEL, SUFFSTAT])
def test_model_checks_and_latents_are_positive(path, tmp_path):
    load_model(path)
    Y = np.random.default_rng(0).standard_normal((7, 3))
    model = build(path, [_write(tmp_path, Y, 2)])
    assert [lat.name for lat in model.latents] == ["W", "r", "g", "g0", "c0", "tau"]
    assert all(lat.kind == "lower" and lat.support == "positive" for lat in model.latents)
    assert model.dim == 3 * 2 + 2 + 4


@pytest.mark.parametrize("path", [MODEL, SUFFSTAT])
def test_log_joint_matches_scipy(path, tmp_path):
    rng = np.random.default_rng(1)
    N, D, K = 9, 4, 2
    Y = rng.standard_normal((N, D))
    model = build(path, [_write(tmp_path, Y, K)])
    Z = rng.normal(-0.5, 0.7, size=(3, model.dim))
    expected = [_direct_log_joint(z, Y, D, K) for z in Z]
    np.testing.assert_allclose(model.log_joint(Z), expected, rtol=1e-9)
    # one draw at a time gives the same values as the batch of draws
    single = [float(model.log_joint(Z[i : i + 1])[0]) for i in range(len(Z))]
    np.testing.assert_allclose(single, expected, rtol=1e-9)


def _auc(scores, labels):
    """Probability that a random positive outranks a random negative (ties count 1/2)."""
    pos, neg = scores[labels], scores[~labels]
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return greater + 0.5 * ties


@pytest.mark.slow
def test_quick_fit_recovers_sparse_pattern(tmp_path):
    """Block-sparse truth: each factor loads on its own 3 of D = 6 dimensions.

    Criterion (invariant to the order of the factors): after the best matching of fitted to true
    columns, the posterior-mean loadings rank the 6 true non-zeros above the 6 zeros with AUC
    >= 0.85 (chance is 0.5).
    """
    rng = np.random.default_rng(3)
    D, K, N = 6, 2, 400
    W = np.zeros((D, K))
    W[:3, 0] = [0.9, 0.8, 1.0]
    W[3:, 1] = [1.0, 0.7, 0.9]
    Y = rng.standard_normal((N, K)) @ W.T + np.sqrt(0.1) * rng.standard_normal((N, D))
    model = build(MODEL, [_write(tmp_path, Y, K)])
    res = fit(model, "auto", iterations=100, seed=2, draws=200, refine_draws=0)
    W_hat = res.draws["W"].mean(axis=0)
    assert np.all(np.isfinite(W_hat))
    labels = (W != 0).ravel()
    best = max(
        _auc(np.abs(W_hat[:, list(p)]).ravel(), labels) for p in itertools.permutations(range(K))
    )
    assert best >= 0.85, (best, W_hat)
