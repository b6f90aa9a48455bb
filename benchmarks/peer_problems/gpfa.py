"""Gamma process factor analysis (Knowles 2015, eqs. 15-19) on the bundled synthetic data.

Model: gpfa/gpfa.model with example.json (N = 200, D = 10, K = 3): y_n ~ N(0, W W' + sigma^2 I),
W[d, k] ~ gamma(g r_k, g), r_k ~ gamma(g0 / K, c0), g, g0, c0 ~ gamma(1, 1),
tau = 1 / sigma^2 ~ gamma(0.1, 0.1). The K factors are exchangeable (label switching), so W and r
are not compared element by element: the compared quantities are permutation invariant
(`derived`): g, g0, c0, tau, the upper triangle of W W' (`WWt[i,j]`, i <= j) and r sorted in
decreasing order (`r_sorted[k]`). Reference: the stored NUTS run of
benchmarks/reference/gpfa_nuts.py, which computes the same quantities from its draws.
"""

from __future__ import annotations

import numpy as np

from .base import ROOT, Draws, Problem, load_json, nuts_reference

FOLDER = ROOT / "models" / "gpfa"
DATA = FOLDER / "example.json"
REFERENCE = FOLDER / "gpfa_nuts_reference.json"


def load() -> tuple[np.ndarray, int]:
    """Y (N, D) and the truncation level K."""
    d = load_json(DATA)
    return np.asarray(d["y"], dtype=np.float64), int(d["K"])


def derived(draws: Draws) -> dict[str, np.ndarray]:
    """Permutation-invariant summaries of (n_draws, ...) constrained draws."""
    W = np.asarray(draws["W"], dtype=np.float64)  # (S, D, K)
    out = {k: np.asarray(draws[k], dtype=np.float64).reshape(-1) for k in ("g", "g0", "c0", "tau")}
    wwt = np.einsum("sdk,sek->sde", W, W)
    rows, cols = np.triu_indices(W.shape[1])
    for i, j, col in zip(rows, cols, wwt[:, rows, cols].T, strict=True):
        out[f"WWt[{i + 1},{j + 1}]"] = col
    r_sorted = -np.sort(-np.asarray(draws["r"], dtype=np.float64), axis=1)
    for k in range(r_sorted.shape[1]):
        out[f"r_sorted[{k + 1}]"] = r_sorted[:, k]
    return out


def pymc_model():
    """The model in PyMC (Sigma = W W' + sigma2 I, the factors integrated out)."""
    import pymc as pm
    import pytensor.tensor as pt

    Y, K = load()
    D = Y.shape[1]
    with pm.Model() as model:
        g = pm.Gamma("g", alpha=1.0, beta=1.0)
        g0 = pm.Gamma("g0", alpha=1.0, beta=1.0)
        c0 = pm.Gamma("c0", alpha=1.0, beta=1.0)
        r = pm.Gamma("r", alpha=g0 / K, beta=c0, shape=K)
        W = pm.Gamma("W", alpha=g * r[None, :], beta=g, shape=(D, K))
        tau = pm.Gamma("tau", alpha=0.1, beta=0.1)
        sigma2 = pm.Deterministic("sigma2", 1.0 / tau)
        Sigma = W @ W.T + sigma2 * pt.eye(D)
        pm.MvNormal("y", mu=np.zeros(D), cov=Sigma, observed=Y)
    return model


def numpyro_model():
    """The model in NumPyro, and its arguments."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(Y, K):
        D = Y.shape[1]
        g = numpyro.sample("g", dist.Gamma(1.0, 1.0))
        g0 = numpyro.sample("g0", dist.Gamma(1.0, 1.0))
        c0 = numpyro.sample("c0", dist.Gamma(1.0, 1.0))
        r = numpyro.sample("r", dist.Gamma(g0 / K, c0).expand([K]).to_event(1))
        W = numpyro.sample("W", dist.Gamma(g * jnp.broadcast_to(r, (D, K)), g).to_event(2))
        tau = numpyro.sample("tau", dist.Gamma(0.1, 0.1))
        sigma2 = numpyro.deterministic("sigma2", 1.0 / tau)
        Sigma = W @ W.T + sigma2 * jnp.eye(D)
        numpyro.sample(
            "y", dist.MultivariateNormal(jnp.zeros(D), covariance_matrix=Sigma).expand(
                [Y.shape[0]]).to_event(1), obs=Y,
        )  # fmt: skip

    Y, K = load()
    return model, {"Y": jnp.asarray(Y), "K": K}


def problem() -> Problem:
    return Problem(
        name="gpfa-synthetic",
        model=FOLDER / "gpfa.model",
        data=[DATA],
        reference=nuts_reference(REFERENCE) if REFERENCE.exists() else {},
        reference_source="NUTS, benchmarks/reference/gpfa_nuts.py (permutation-invariant "
        "quantities)",
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
        derived=derived,
        notes=["W and r compared through permutation-invariant quantities (label switching)"],
    )


PROBLEMS = [problem()]
