"""Eight schools, non-centred (models/eight_schools/noncentered.model), in PyMC and NumPyro.

mu ~ normal(0, 5), tau ~ half-Cauchy(0, 5) (Stan's cauchy(0, 5) on a <lower=0> parameter),
theta_trans ~ normal(0, 1), y ~ normal(mu + tau * theta_trans, sigma); theta is a
deterministic, as the model's transformed parameter. No reference posterior is stored, so
peers.py does not list it; benchmarks/end_to_end.py times it.
"""

from __future__ import annotations

import numpy as np

from .base import ROOT, Problem, load_json

FOLDER = ROOT / "models" / "eight_schools"
DATA = FOLDER / "eight_schools.json"


def load() -> tuple[np.ndarray, np.ndarray]:
    d = load_json(DATA)
    return np.asarray(d["y"], dtype=np.float64), np.asarray(d["sigma"], dtype=np.float64)


def pymc_model():
    import pymc as pm

    y, sigma = load()
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", beta=5.0)
        theta_trans = pm.Normal("theta_trans", 0.0, 1.0, shape=len(y))
        theta = pm.Deterministic("theta", mu + tau * theta_trans)
        pm.Normal("y", mu=theta, sigma=sigma, observed=y)
    return model


def numpyro_model():
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(y, sigma):
        mu = numpyro.sample("mu", dist.Normal(0.0, 5.0))
        tau = numpyro.sample("tau", dist.HalfCauchy(5.0))
        theta_trans = numpyro.sample(
            "theta_trans", dist.Normal(0.0, 1.0).expand([y.shape[0]]).to_event(1)
        )
        theta = numpyro.deterministic("theta", mu + tau * theta_trans)
        numpyro.sample("y", dist.Normal(theta, sigma).to_event(1), obs=y)

    y, sigma = load()
    return model, {"y": jnp.asarray(y), "sigma": jnp.asarray(sigma)}


def problem() -> Problem:
    return Problem(
        name="eight-schools-noncentered",
        model=FOLDER / "noncentered.model",
        data=[DATA],
        reference={},
        reference_source="none stored",
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
    )
