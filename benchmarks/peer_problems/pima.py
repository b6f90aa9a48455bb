"""Logistic regression on real data: Pima Indian women (MASS Pima.tr), 200 rows, 7 predictors.

Model: logistic_regression/pima.model. The predictors are standardised with the mean and the
N-1 sd, as the model's transformed data does; alpha ~ normal(0, 5), beta ~ normal(0, 2.5),
y ~ bernoulli_logit(alpha + Z beta). Reference: the stored NUTS run of
benchmarks/reference/pima_nuts.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import ROOT, Problem, nuts_reference

FOLDER = ROOT / "models" / "logistic_regression"
DATA = FOLDER / "pima_train.csv"
REFERENCE = FOLDER / "pima_nuts_reference.json"


def load(path: Path = DATA) -> tuple[np.ndarray, np.ndarray]:
    """Standardised predictors Z (N-1 sd, as pima.model) and the 0/1 outcome y of a table with
    columns y, X.1..X.K (also the breast-cancer table of benchmarks/end_to_end.py)."""
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)
    y = table[:, 0].astype(np.int64)
    X = table[:, 1:]
    return (X - X.mean(axis=0)) / X.std(axis=0, ddof=1), y


def logistic_pymc(Z: np.ndarray, y: np.ndarray):
    """y ~ bernoulli_logit(alpha + Z beta), alpha ~ normal(0, 5), beta ~ normal(0, 2.5), in
    PyMC (also the breast-cancer model of benchmarks/end_to_end.py)."""
    import pymc as pm

    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 5.0)
        beta = pm.Normal("beta", 0.0, 2.5, shape=Z.shape[1])
        pm.Bernoulli("y", logit_p=alpha + Z @ beta, observed=y)
    return model


def logistic_numpyro(Z: np.ndarray, y: np.ndarray):
    """The same model in NumPyro, and its arguments."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(Z, y):
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 5.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 2.5).expand([Z.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=alpha + Z @ beta), obs=y)

    return model, {"Z": jnp.asarray(Z), "y": jnp.asarray(y)}


def pymc_model():
    """The model in PyMC."""
    return logistic_pymc(*load())


def numpyro_model():
    """The model in NumPyro, and its arguments."""
    return logistic_numpyro(*load())


def problem() -> Problem:
    return Problem(
        name="pima-logistic",
        model=FOLDER / "pima.model",
        data=[DATA],
        reference=nuts_reference(REFERENCE),
        reference_source="NUTS, benchmarks/reference/pima_nuts.py (4 x 5000 draws)",
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
    )


PROBLEMS = [problem()]
