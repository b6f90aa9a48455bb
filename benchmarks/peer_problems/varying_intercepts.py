"""Hierarchical logistic regression with 100 varying intercepts (simulated data).

Model: varying_intercepts/varying_intercepts.model with varying_intercepts.json: mu ~ normal(0,
2.5), tau ~ half-normal(0, 1), beta ~ normal(0, 2.5), alpha_raw ~ normal(0, 1),
alpha = mu + tau * alpha_raw, y ~ bernoulli_logit(alpha[group] + X beta); J = 100 groups of
10-30 rows. Reference: the stored NUTS run of benchmarks/reference/varying_intercepts_nuts.py
(parameters and the transformed parameters alpha[1..100]).
"""

from __future__ import annotations

import numpy as np

from .base import ROOT, Problem, load_json, nuts_reference

FOLDER = ROOT / "models" / "varying_intercepts"
MODEL = FOLDER / "varying_intercepts.model"
DATA = FOLDER / "varying_intercepts.json"
REFERENCE = FOLDER / "nuts_reference.json"


def load() -> dict[str, np.ndarray | int]:
    """varying_intercepts.json as arrays; `group` made 0-based."""
    d = load_json(DATA)
    return {
        "J": int(d["J"]),
        "group": np.asarray(d["group"], dtype=np.int64) - 1,
        "X": np.asarray(d["X"], dtype=np.float64),
        "y": np.asarray(d["y"], dtype=np.int64),
    }


def pymc_model():
    """The model in PyMC."""
    import pymc as pm

    d = load()
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 2.5)
        tau = pm.HalfNormal("tau", 1.0)
        beta = pm.Normal("beta", 0.0, 2.5, shape=d["X"].shape[1])
        alpha_raw = pm.Normal("alpha_raw", 0.0, 1.0, shape=d["J"])
        alpha = pm.Deterministic("alpha", mu + tau * alpha_raw)
        pm.Bernoulli("y", logit_p=alpha[d["group"]] + d["X"] @ beta, observed=d["y"])
    return model


def numpyro_model():
    """The model in NumPyro (alpha kept as a deterministic site), and its arguments."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(J, group, X, y):
        mu = numpyro.sample("mu", dist.Normal(0.0, 2.5))
        tau = numpyro.sample("tau", dist.HalfNormal(1.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 2.5).expand([X.shape[1]]).to_event(1))
        alpha_raw = numpyro.sample("alpha_raw", dist.Normal(0.0, 1.0).expand([J]).to_event(1))
        alpha = numpyro.deterministic("alpha", mu + tau * alpha_raw)
        numpyro.sample("y", dist.Bernoulli(logits=alpha[group] + X @ beta).to_event(1), obs=y)

    d = load()
    data = {k: (v if isinstance(v, int) else jnp.asarray(v)) for k, v in d.items()}
    return model, data


def problem() -> Problem:
    return Problem(
        name="varying-intercepts-logistic",
        model=MODEL,
        data=[DATA],
        reference=nuts_reference(REFERENCE) if REFERENCE.exists() else {},
        reference_source="NUTS, benchmarks/reference/varying_intercepts_nuts.py",
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
    )


PROBLEMS = [problem()]
