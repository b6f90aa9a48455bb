"""benchmarks/bpfa_gibbs.py, the hand-written BPFA reference: its Gibbs conditionals against
enumeration and closed forms, and its SVI on a small problem from the prior."""

from __future__ import annotations

import itertools
import runpy
from pathlib import Path

import numpy as np
from scipy.stats import multivariate_normal

ROOT = Path(__file__).resolve().parent.parent.parent
ref = runpy.run_path(str(ROOT / "benchmarks" / "bpfa_gibbs.py"), run_name="bpfa_gibbs")


def exact_local(y, m, g):
    """p(z | y, globals) over all 2^K states with w integrated out, and E[z .* w | y]."""
    K = len(g.pi)
    Phi = g.Phi[:, m]
    yo = y[m]
    states = np.array(list(itertools.product([0, 1], repeat=K)))
    logp, means = [], []
    for z in states:
        S = np.flatnonzero(z)
        cov = Phi[S].T @ Phi[S] / g.gamma_w + np.eye(len(yo)) / g.gamma_obs
        lp = multivariate_normal(np.zeros(len(yo)), cov).logpdf(yo)
        lp += np.sum(np.where(z, np.log(g.pi), np.log1p(-g.pi)))
        logp.append(lp)
        mean = np.zeros(K)
        if len(S):
            prec = g.gamma_w * np.eye(len(S)) + g.gamma_obs * Phi[S] @ Phi[S].T
            mean[S] = np.linalg.solve(prec, g.gamma_obs * Phi[S] @ yo)
        means.append(mean)
    p = np.exp(np.array(logp) - np.max(logp))
    p /= p.sum()
    return states, p, p @ np.array(means)


def test_local_gibbs_sweeps_reach_the_enumerated_conditional():
    rng = np.random.default_rng(3)
    K, P, chains = 3, 5, 20000
    g = ref["Globals"](rng.normal(0, 0.7, (K, P)), np.array([0.3, 0.5, 0.2]), 1.5, 4.0)
    y = g.Phi[0] * 1.2 + g.Phi[1] * -0.8 + rng.normal(0, 0.5, P)
    m = np.array([True, True, False, True, True])  # one pixel unobserved: ignored
    Y, M = np.tile(y, (chains, 1)), np.tile(m, (chains, 1))
    Y[:, 2] = 99.0
    Z, W = np.zeros((chains, K), bool), rng.normal(size=(chains, K))
    R = ref["residual"](Y, M, Z * W, g.Phi)
    for _ in range(25):
        ref["gibbs_local"](R, M, Z, W, g, rng)
    np.testing.assert_allclose(R, ref["residual"](Y, M, Z * W, g.Phi), atol=1e-10)
    states, p, mean_l = exact_local(y, m, g)
    code = Z.astype(int) @ (2 ** np.arange(K)[::-1])
    freq = np.bincount(code, minlength=2**K) / chains
    assert np.max(np.abs(freq - p)) < 0.015, (freq, p)  # sd <= 0.0036
    assert np.max(np.abs((Z * W).mean(0) - mean_l)) < 0.03, ((Z * W).mean(0), mean_l)


def test_phi_draw_matches_its_gaussian_conditional():
    rng = np.random.default_rng(4)
    N, K, P = 30, 2, 3
    M = rng.uniform(size=(N, P)) < 0.7
    L = rng.normal(size=(N, K)) * (rng.uniform(size=(N, K)) < 0.6)
    Y = rng.normal(size=(N, P))
    Phi0 = rng.normal(size=(K, P))
    g0 = ref["Globals"](Phi0, np.full(K, 0.5), 1.0, 3.0)
    # atom 0 is drawn first, given atom 1 as it is: N(mean, 1 / prec) per pixel
    r0 = np.where(M, Y - np.outer(L[:, 1], Phi0[1]), 0.0)
    prec = P + 3.0 * (L[:, 0] ** 2 @ M)
    mean = 3.0 * (L[:, 0] @ r0) / prec
    draws = []
    for _ in range(4000):
        g = ref["Globals"](Phi0.copy(), g0.pi, 1.0, 3.0)
        R = ref["residual"](Y, M, L, g.Phi)
        ref["sample_phi"](R, M, L, g, rng)
        np.testing.assert_allclose(R, ref["residual"](Y, M, L, g.Phi), atol=1e-10)
        draws.append(g.Phi[0])
    draws = np.array(draws)
    se = 1 / np.sqrt(prec * 4000)
    assert np.all(np.abs(draws.mean(0) - mean) < 4.5 * se)
    np.testing.assert_allclose(draws.var(0), 1 / prec, rtol=0.1)


def test_samplers_predict_held_out_entries_from_prior_data():
    """Data from the prior (K = 6, well specified): the Gibbs sampler and Gibbs-SSVI predict
    held-out entries far better than the zero predictor, and near the noise floor."""
    rng = np.random.default_rng(5)
    Y, *_ = ref["prior_draw"](600, 12, 6, rng, a=3.0, b=1.0, gamma_obs=100.0)
    held = rng.uniform(size=Y.shape) < 0.1
    M = ~held
    baseline = np.mean(Y[held] ** 2)
    recon = ref["gibbs_sampler"](Y, M, 10, iterations=60, burnin=30, rng=rng)
    mse_gibbs = np.mean((recon - Y)[held] ** 2)
    q = ref["svi"](Y, M, 10, local="gibbs", batch=60, iterations=300, rng=rng)
    pred = ref["predict_rows"](Y, M, q, np.zeros((600, 10), bool), np.zeros((600, 10)),
                               local="gibbs", rng=rng, burnin=10, samples=10)  # fmt: skip
    mse_ssvi = np.mean((pred - Y)[held] ** 2)
    assert mse_gibbs < 0.3 * baseline, (mse_gibbs, baseline)
    assert mse_ssvi < 0.3 * baseline, (mse_ssvi, baseline)


def test_gibbs_start_is_the_q_of_a_subset_gibbs_run():
    """gibbs_start (the paper's Table 1 start): its q predicts held-out entries of the whole
    data from a Gibbs run on a fifth of the rows, and its natural parameters are scaled to N."""
    rng = np.random.default_rng(6)
    N, P, K = 1000, 12, 10
    Y, *_ = ref["prior_draw"](N, P, 6, rng, a=3.0, b=1.0, gamma_obs=100.0)
    held = rng.uniform(size=Y.shape) < 0.1
    M = ~held
    q = ref["gibbs_start"](Y, M, K, rows=200, sweeps=40, rng=rng)
    assert abs(np.sum(q.e - 1.0) - N * K / 2) < 1e-6  # gamma_w's shape: e0 + N K / 2
    assert abs(q.c - 1.0 - M.sum() / 2) < 0.15 * M.sum() / 2  # scaled from 200 rows to N
    zeros = np.zeros((N, K))
    pred = ref["predict_rows"](Y, M, q, zeros.astype(bool), zeros, local="gibbs", rng=rng,
                               burnin=10, samples=10)  # fmt: skip
    mse, baseline = np.mean((pred - Y)[held] ** 2), np.mean(Y[held] ** 2)
    assert mse < 0.3 * baseline, (mse, baseline)
    random_start = ref["prior_q"](K, P, 1.0, 1.0, rng)[1]
    pred0 = ref["predict_rows"](Y, M, random_start, zeros.astype(bool), zeros, local="gibbs",
                                rng=rng, burnin=10, samples=10)  # fmt: skip
    assert mse < 0.5 * np.mean((pred0 - Y)[held] ** 2)


def test_svi_monitors_at_the_requested_training_seconds():
    rng = np.random.default_rng(7)
    Y, *_ = ref["prior_draw"](200, 8, 3, rng)
    seen = []
    ref["svi"](Y, np.ones(Y.shape, bool), 4, local="gibbs", batch=20, iterations=10**6, rng=rng,
               monitor=lambda label, s, t, pred: seen.append(s), every=10**9,
               predict=lambda q, Z, W: None, time_budget=0.6, at_seconds=(0.2, 0.4))  # fmt: skip
    assert len(seen) == 3 and seen[0] >= 0.2 and seen[1] >= 0.4 and seen[2] > 0.6, seen
