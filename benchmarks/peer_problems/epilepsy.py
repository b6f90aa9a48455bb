"""The Poisson-gamma (gamma-frailty) regression of the epilepsy trial (Thall & Vail 1990).

Model: epilepsy/poisson_gamma.model with epil.json: 6 regression coefficients, the frailty
variance kappa ~ exponential(1) and 59 frailties u[j] ~ gamma(1/kappa, 1/kappa),
y ~ poisson(u[subject] exp(eta)). Reference: the stored NUTS run of
benchmarks/reference/epilepsy_nuts.py.
"""

from __future__ import annotations

import numpy as np

from .base import ROOT, Problem, load_json, nuts_reference

FOLDER = ROOT / "models" / "epilepsy"
DATA = FOLDER / "epil.json"
REFERENCE = FOLDER / "poisson_gamma_nuts_reference.json"
COEFS = ("alpha", "b_trt", "b_base", "b_bt", "b_age", "b_v4")
PRIOR_SD = {"alpha": 5.0, "b_trt": 2.5, "b_base": 2.5, "b_bt": 2.5, "b_age": 2.5, "b_v4": 2.5}


def load() -> dict[str, np.ndarray | int]:
    """epil.json as arrays; `subject` made 0-based."""
    d = load_json(DATA)
    out: dict[str, np.ndarray | int] = {"N": int(d["N"]), "J": int(d["J"])}
    out["y"] = np.asarray(d["y"], dtype=np.int64)
    out["subject"] = np.asarray(d["subject"], dtype=np.int64) - 1
    for k in ("trt", "lbase", "lage", "V4"):
        out[k] = np.asarray(d[k], dtype=np.float64)
    return out


def _eta(c: dict, d: dict):
    return (
        c["alpha"] + c["b_trt"] * d["trt"] + c["b_base"] * d["lbase"]
        + c["b_bt"] * d["trt"] * d["lbase"] + c["b_age"] * d["lage"] + c["b_v4"] * d["V4"]
    )  # fmt: skip


def pymc_model():
    """The model in PyMC."""
    import pymc as pm
    import pytensor.tensor as pt

    d = load()
    with pm.Model() as model:
        c = {k: pm.Normal(k, 0.0, PRIOR_SD[k]) for k in COEFS}
        kappa = pm.Exponential("kappa", 1.0)
        u = pm.Gamma("u", alpha=1.0 / kappa, beta=1.0 / kappa, shape=d["J"])
        pm.Poisson("y", mu=u[d["subject"]] * pt.exp(_eta(c, d)), observed=d["y"])
    return model


def numpyro_model():
    """The model in NumPyro, and its arguments."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(d):
        c = {k: numpyro.sample(k, dist.Normal(0.0, PRIOR_SD[k])) for k in COEFS}
        kappa = numpyro.sample("kappa", dist.Exponential(1.0))
        u = numpyro.sample("u", dist.Gamma(1.0 / kappa, 1.0 / kappa).expand([d["J"]]).to_event(1))
        rate = u[d["subject"]] * jnp.exp(_eta(c, d))
        numpyro.sample("y", dist.Poisson(rate).to_event(1), obs=d["y"])

    d = load()
    data = {k: (v if isinstance(v, int) else jnp.asarray(v)) for k, v in d.items()}
    return model, {"d": data}


def problem() -> Problem:
    return Problem(
        name="epilepsy-poisson-gamma",
        model=FOLDER / "poisson_gamma.model",
        data=[DATA],
        reference=nuts_reference(REFERENCE) if REFERENCE.exists() else {},
        reference_source="NUTS, benchmarks/reference/epilepsy_nuts.py",
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
    )


PROBLEMS = [problem()]
