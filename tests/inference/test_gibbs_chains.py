"""Global spike-and-slab pairs updated incrementally, chains in parallel
(ppl.inference.gibbs_chains), and the batch-means check of the Gibbs road's draws' sds
(ppl.diagnostics.mcse_tail.summary_batch_faults)."""

from __future__ import annotations

import itertools

import numpy as np
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from ppl.diagnostics.mcse_tail import sd_relative_mcse, summary_batch_faults, summary_tail_faults
from ppl.inference.local_global import LocalGlobal, _initial_state, rows_of
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

SLAB = """
data { int N; matrix[N, 3] X; vector[N] y; }
parameters { array[3] int<lower=0, upper=1> z; vector[3] w; real<lower=0> sigma;
             real<lower=0, upper=1> pi; }
model {
  pi ~ beta(2, 2);
  z ~ bernoulli(pi);
  w ~ normal(0.3, 1.5);
  sigma ~ normal(0, 1);
  y ~ normal(X * (to_vector(z) .* w), sigma);
}
"""
# z also moves the noise scale: the log joint is not quadratic in z .* w with fixed coefficients
NOT_QUADRATIC = SLAB.replace("sigma);\n}", "sigma * (1 + 0.5 * sum(z)));\n}")


def _model(text: str, seed: int = 0, N: int = 12) -> CompiledModel:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 3))
    X[:, 1] = 0.8 * X[:, 0] + 0.6 * X[:, 1]  # correlated inputs: the pairs depend on each other
    y = X @ np.array([0.9, 0.0, -0.6]) + 0.7 * rng.normal(size=N)
    data = {"N": N, "X": X, "y": y}
    return CompiledModel(check(parse(text, "t.model")), {k: np.asarray(v) for k, v in data.items()})


def _fitter(model, chains: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    fitter = LocalGlobal(model, rows_of(model, None, rng), chains, rng, True)
    state = _initial_state(model, model.random_init(rng), chains, rng)
    fitter.setup(state)
    return fitter, state, rng


def _globals(model, X, rng):
    """Each chain its own sigma and pi (unconstrained: log, logit), so their coefficients differ."""
    for lat in model.latents:
        if lat.name in ("sigma", "pi"):
            X[:, lat.offset] = rng.normal(-0.3, 0.5, len(X))
    return X


def test_chain_pairs_equal_the_exact_update_in_every_chain():
    model = _model(SLAB)
    fitter, state, rng = _fitter(model, chains=5)
    assert fitter.fast_chains and not fitter.plan.globals_  # taken: the form holds
    pairs = fitter.fast_chains[0]
    X = _globals(model, state.astype(float), rng)
    X[:, pairs.zc] = rng.integers(0, 2, size=(5, 3))
    X[:, pairs.wc] = rng.normal(size=(5, 3))
    pairs.prepare(X)
    assert pairs.usable() and pairs.agrees(X, [0, 1, 2], rng)  # to 1e-6, every chain


def test_a_log_joint_not_quadratic_in_the_pairs_keeps_the_exact_update():
    model = _model(NOT_QUADRATIC)
    fitter, state, rng = _fitter(model, chains=3)
    assert not fitter.fast_chains and len(fitter.plan.globals_) == 3
    X = state.astype(float)
    probs = next(fitter.sweeps(X, 1, rng))  # the six-point updates still run
    assert probs.shape == (3, 3) and np.all((probs >= 0) & (probs <= 1))


def test_chain_pair_sweeps_reach_p_z_given_sigma():
    # 3000 chains at one (sigma, pi), 25 sweeps: the frequencies of the 8 subsets match p(z | y,
    # sigma, pi) with the slabs integrated out in closed form
    model = _model(SLAB, seed=3)
    S = 3000
    fitter, state, rng = _fitter(model, chains=S)
    pairs = fitter.fast_chains[0]
    sigma, pi = 0.8, 0.4
    X = state.astype(float)
    for lat in model.latents:
        if lat.name == "sigma":
            X[:, lat.offset] = np.log(sigma)
        if lat.name == "pi":
            X[:, lat.offset] = np.log(pi / (1 - pi))
    for _ in fitter.sweeps(X, 25, rng):
        pass
    data_X, y = np.asarray(model.data["X"]), np.asarray(model.data["y"])
    subsets = list(itertools.product([0, 1], repeat=3))
    lp = []
    for z in subsets:
        Xz = data_X * np.array(z)
        cov = sigma**2 * np.eye(len(y)) + 1.5**2 * Xz @ Xz.T
        prior = np.sum(np.where(np.array(z) == 1, np.log(pi), np.log(1 - pi)))
        lp.append(prior + multivariate_normal(0.3 * Xz.sum(axis=1), cov).logpdf(y))
    post = np.exp(np.array(lp) - logsumexp(lp))
    freq = np.array([np.mean(np.all(X[:, pairs.zc] == z, axis=1)) for z in subsets])
    se = np.sqrt(post * (1 - post) / S)
    assert np.all(np.abs(freq - post) < 4.5 * se + 1e-3), (freq, post)


def test_batch_means_ess_of_iid_and_of_autocorrelated_draws():
    rng = np.random.default_rng(0)
    S, chains = 8000, 8
    groups = np.arange(S) % chains
    iid = rng.normal(size=(S, 1))
    rel, ess = sd_relative_mcse(iid, groups)
    assert 0.7 * S < ess[0] < 1.4 * S
    assert abs(rel[0] - np.sqrt(2 / (4 * S))) < 0.3 * np.sqrt(2 / (4 * S))  # kurtosis 3
    # AR(1) chains, rho 0.9: their squares have autocorrelation rho^2, so ESS = S (1 - rho^2) /
    # (1 + rho^2) = 0.105 S
    rho, n = 0.9, S // chains
    ar = np.zeros((n, chains))
    ar[0] = rng.normal(size=chains)
    for t in range(1, n):
        ar[t] = rho * ar[t - 1] + np.sqrt(1 - rho**2) * rng.normal(size=chains)
    draws = ar.reshape(-1, 1)  # draw j = (t, chain j % chains): chains interleaved, as the road's
    _, ess = sd_relative_mcse(draws, groups)
    expected = S * (1 - rho**2) / (1 + rho**2)
    assert 0.6 * expected < ess[0] < 1.5 * expected


def test_a_slab_switched_on_and_off_is_no_heavy_tail_for_gibbs_draws():
    # the marginal of a slab that is in the model in 97% of draws (Boston's nox): a narrow normal
    # beside a few N(0, 1) draws of its prior. Every moment is finite; the iid tail rule calls
    # its sd unreliable (k-hat 2.4-3.1 over five seeds), the batch means of independent Gibbs
    # draws do not. Chains that barely move (a few effective draws) are named.
    rng = np.random.default_rng(2)
    S = 1000
    on = rng.uniform(size=S) < 0.97
    w = np.where(on, rng.normal(0.13, 0.03, S), rng.normal(0, 1, S))
    groups = np.arange(S) % 8
    tail, _ = summary_tail_faults({"w": w[:, None]})
    assert tail and tail[0]["parameters"] == ["w"]  # the false alarm this replaces
    faults, info = summary_batch_faults({"w": w[:, None]}, groups)
    assert faults == [] and info["min_ess_sd"] > 300
    ar = np.zeros((S // 8, 8))  # 8 chains that barely move: AR(1), rho 0.995
    ar[0] = rng.normal(size=8)
    for t in range(1, S // 8):
        ar[t] = 0.995 * ar[t - 1] + 0.1 * rng.normal(size=8)
    faults, _ = summary_batch_faults({"v": ar.reshape(-1, 1)}, groups)
    assert faults and faults[0]["parameters"] == ["v"]


def test_chain_pairs_that_are_not_usable_at_a_draw_fall_back_to_the_exact_update(monkeypatch):
    model = _model(SLAB)
    fitter, state, rng = _fitter(model, chains=4)
    pairs = fitter.fast_chains[0]
    monkeypatch.setattr(pairs, "usable", lambda: False)  # as if a slab had no proper Gaussian
    X = _globals(model, state.astype(float), rng)
    called = []
    monkeypatch.setattr(pairs, "sweeps", lambda *a: called.append(a))
    probs = [p.copy() for p in fitter.sweeps(X, 2, rng)]
    assert not called and probs[-1].shape == (4, 3) and np.all((probs[-1] >= 0) & (probs[-1] <= 1))
