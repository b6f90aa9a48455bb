"""Incremental pair updates (ppl.inference.gibbs_quadratic) on BPFA with per-row shapes: taken
by the road, and equal to the exact six-point conditionals for every atom."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy.special import expit

ROOT = Path(__file__).resolve().parents[2]


def test_incremental_pairs_equal_the_exact_update(bpfa, fitter_at_start):
    model = bpfa()
    rng = np.random.default_rng(1)
    fitter, state = fitter_at_start(model, rng)
    assert len(fitter.fast) == 1 and fitter.plan.local == []
    pairs = fitter.fast[0]
    X = state[:, fitter.rows.columns].copy()
    X[:, fitter.q_batch] += rng.normal(size=len(fitter.q_batch))  # other globals
    pairs.prepare(X[0])
    assert pairs.agrees(X, list(range(pairs.K)), rng)
    # after sweeps (a new state) they still agree
    list(pairs.sweeps(X, 2, rng))
    pairs.prepare(X[0])
    assert pairs.agrees(X, list(range(pairs.K)), rng)


def _local_elbo(pairs, theta, nu, kappa):
    """The MF local ELBO of every row (up to constants), from the quadratic coefficients."""
    ubar = theta * nu
    G = pairs.G
    diag = np.einsum("ikk->ik", G)
    cross = np.einsum("ij,ijk,ik->i", ubar, G, ubar) - np.sum(diag * ubar**2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.nan_to_num(theta * np.log(theta)) - np.nan_to_num((1 - theta) * np.log1p(-theta))
    return (np.sum(pairs.b * ubar, axis=1) - 0.5 * cross
            - 0.5 * np.sum(diag * theta * (nu**2 + 1 / kappa), axis=1)
            + np.sum(pairs.A * theta, axis=1)
            - 0.5 * np.sum(pairs.p * ((nu - pairs.m) ** 2 + 1 / kappa), axis=1)
            + np.sum(ent, axis=1) - 0.5 * np.sum(np.log(kappa), axis=1))  # fmt: skip


def test_meanfield_local_step_ascends_the_local_elbo(bpfa, fitter_at_start):
    # the module's passes are coordinate ascent: replayed update by update, the MF local ELBO of
    # every row never falls, and the replay's theta is the module's after every pass
    model = bpfa(seed=2)
    rng = np.random.default_rng(3)
    fitter, state = fitter_at_start(model, rng, gibbs_step=False)
    pairs = fitter.fast[0]
    X = state[:, fitter.rows.columns].copy()
    pairs.prepare(X[0])
    theta, nu = X[0, pairs.zc].copy(), X[0, pairs.wc].copy()
    kappa = pairs.p.copy()
    thetas = [t.copy() for t in pairs.meanfield_sweeps(X.copy(), 4, rng)]
    ubar = theta * nu
    r = pairs.b - np.einsum("ijk,ik->ij", pairs.G, ubar)
    previous = None
    for sweep in range(4):
        for k in range(pairs.K):
            Gkk, pk, mk = pairs.G[:, k, k], pairs.p[:, k], pairs.m[:, k]
            rest = r[:, k] + Gkk * ubar[:, k]
            kappa[:, k] = theta[:, k] * Gkk + pk
            nu[:, k] = (theta[:, k] * rest + pk * mk) / kappa[:, k]
            second = nu[:, k] ** 2 + 1 / kappa[:, k]
            theta[:, k] = expit(pairs.A[:, k] + nu[:, k] * rest - 0.5 * Gkk * second)
            r -= pairs.G[:, :, k] * (theta[:, k] * nu[:, k] - ubar[:, k])[:, None]
            ubar[:, k] = theta[:, k] * nu[:, k]
            now = _local_elbo(pairs, theta, nu, kappa)
            if previous is not None:
                assert np.all(now >= previous - 1e-9), (now, previous)
            previous = now
        assert np.allclose(thetas[sweep], theta.T.ravel())
