"""Gaussian linear regression on simulated rows (models/linear_regression/simulate.py; 20,000
rows, 4 predictors, 6 parameters), as models/linear_regression/vectorised.model states it:
standardised predictors (N-1 sd), alpha ~ normal(0, 10), beta ~ normal(0, 10),
sigma ~ exponential(1), y ~ normal(alpha + Z beta, sigma). The table is made on demand, so the
problem takes its path. No reference posterior; benchmarks/end_to_end.py times it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import ROOT, Problem

MODEL = ROOT / "models" / "linear_regression" / "vectorised.model"


def load(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Standardised predictors Z and the outcome y of a table with columns y, X.1..X.K."""
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
    y, X = table[:, 0], table[:, 1:]
    return (X - X.mean(axis=0)) / X.std(axis=0, ddof=1), y


def pymc_model(path: Path):
    import pymc as pm

    Z, y = load(path)
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 10.0)
        beta = pm.Normal("beta", 0.0, 10.0, shape=Z.shape[1])
        sigma = pm.Exponential("sigma", 1.0)
        pm.Normal("y", mu=alpha + Z @ beta, sigma=sigma, observed=y)
    return model


def numpyro_model(path: Path):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(Z, y):
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 10.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 10.0).expand([Z.shape[1]]).to_event(1))
        sigma = numpyro.sample("sigma", dist.Exponential(1.0))
        with numpyro.plate("N", y.shape[0]):
            numpyro.sample("y", dist.Normal(alpha + Z @ beta, sigma), obs=y)

    Z, y = load(path)
    return model, {"Z": jnp.asarray(Z), "y": jnp.asarray(y)}


def problem(path: Path) -> Problem:
    return Problem(
        name="linear-regression-20k",
        model=MODEL,
        data=[Path(path)],
        reference={},
        reference_source="none stored",
        pymc_model=lambda: pymc_model(path),
        numpyro_model=lambda: numpyro_model(path),
    )
