"""The shortcuts of ppl.inference.gibbs_probe on small BPFA batches: each equals the exact K-point
coefficients when it applies, and the road falls back to them when its check fails."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _pairs(bpfa, fitter_at_start, N=12, P=3, K=40, seen_rate=0.7, seed=0):
    """The incremental pairs of a batch of 5 rows, prepared (probes on), and the batch state."""
    model = bpfa(N=N, P=P, K=K, seed=seed, seen_rate=seen_rate)
    rng = np.random.default_rng(seed)
    fitter, state = fitter_at_start(model, rng)
    assert len(fitter.fast) == 1
    pairs = fitter.fast[0]
    X = state[:, fitter.rows.columns].copy()
    X[:, fitter.q_batch] += rng.normal(size=len(fitter.q_batch))  # other globals
    pairs.prepare(X[0])
    return pairs, X


def _exact(pairs, x):
    """G and A the K-point way at x."""
    pairs.probe = False
    pairs.prepare(x)
    pairs.probe = True
    return pairs.G.copy(), pairs.A.copy()


def test_low_rank_curvature_and_elementwise_prior_equal_the_exact_ones(bpfa, fitter_at_start):
    # P = 3 pixels: each row's G has rank <= 3 while K = 40
    pairs, X = _pairs(bpfa, fitter_at_start)
    assert pairs.factors is not None and 1 <= pairs.rank <= 3
    assert pairs.exact_curvatures == 0 and pairs.exact_priors == 0
    G, A, diag = pairs.G.copy(), pairs.A.copy(), pairs.diag.copy()
    G_exact, A_exact = _exact(pairs, X[0])
    scale = np.max(np.abs(G_exact))
    assert np.allclose(G, G_exact, rtol=0, atol=1e-8 * scale)
    assert np.allclose(diag, np.einsum("ikk->ik", G_exact), rtol=0, atol=1e-8 * scale)
    assert np.allclose(A, A_exact, rtol=1e-10, atol=1e-10)
    # the sweeps (Gibbs and mean-field) on the factors do what they do on G (same random numbers)
    pairs.prepare(X[0])
    assert pairs.factors is not None
    Xa, Xb = X.copy(), X.copy()
    pa = [p.copy() for p in pairs.sweeps(Xa, 2, np.random.default_rng(5))]
    ma = [t.copy() for t in pairs.meanfield_sweeps(X.copy(), 2, np.random.default_rng(7))]
    pairs.G = pairs.G  # formed from the factors, then the sweeps use it
    pairs.factors = None
    pb = [p.copy() for p in pairs.sweeps(Xb, 2, np.random.default_rng(5))]
    assert np.allclose(pa, pb, atol=1e-9) and np.allclose(Xa, Xb, atol=1e-9)
    mb = [t.copy() for t in pairs.meanfield_sweeps(X.copy(), 2, np.random.default_rng(7))]
    assert np.allclose(ma, mb, atol=1e-9)
    pairs.prepare(X[0])
    assert pairs.agrees(X, list(range(pairs.K)), np.random.default_rng(6))


def test_full_rank_curvature_falls_back_to_the_exact_one(bpfa, fitter_at_start):
    # every pixel seen and P > K: G has full rank, the probe's check fails, the exact G is used
    pairs, X = _pairs(bpfa, fitter_at_start, P=40, K=40, seen_rate=1.1)
    assert pairs.factors is None and pairs.exact_curvatures >= 1
    G, _ = pairs.G.copy(), pairs.A
    G_exact, _ = _exact(pairs, X[0])
    assert np.array_equal(G, G_exact)
    assert pairs.agrees(X, [0, 20, 39], np.random.default_rng(1))


def test_a_wrong_element_map_falls_back_to_the_exact_prior(bpfa, fitter_at_start):
    pairs, X = _pairs(bpfa, fitter_at_start, seed=3)
    owned = np.flatnonzero(pairs.owner >= 0)
    pairs.owner[owned] = np.roll(pairs.owner[owned], 1)  # each element to its neighbour's z
    before = pairs.exact_priors
    pairs.prepare(X[0])
    assert pairs.exact_priors == before + 1 and pairs.owner is None
    A = pairs.A.copy()
    _, A_exact = _exact(pairs, X[0])
    assert np.array_equal(A, A_exact)
    pairs.prepare(X[0])  # the map is found again and agrees
    assert pairs.owner is not None and np.allclose(pairs.A, A_exact, rtol=1e-10, atol=1e-10)
