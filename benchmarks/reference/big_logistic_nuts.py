"""NUTS reference posterior for the simulated 200,000-row, 21-parameter logistic regression.

Needs numpyro (with jax on CPU), an optional benchmark dependency (pip install '.[bench]' into a
separate virtualenv). Run from the repository root:

    OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /work/benchvenv/bin/python \
        benchmarks/reference/big_logistic_nuts.py

The data are remade by models/logistic_regression/simulate.py (seed 11, 200,000 rows, K = 20);
the model is models/logistic_regression/fixed_prior.model in NumPyro: alpha ~ normal(0, 5),
beta ~ normal(0, 1), y ~ bernoulli_logit(alpha + X beta). NUTS in double precision, 4 chains of
1000 warmup + 3000 draws (4 x 1000 draws left sds off by up to 4%: bulk ESS of 5000 does not
bound an sd to the 1% it promises), target_accept_prob 0.9, diagonal mass matrix, fixed seed; the
script fails (no JSON written) unless every quantity has split R-hat < 1.01, bulk ESS > 400 and
there are no divergences.

It writes models/logistic_regression/simulated_200k_nuts_reference.json: the command, sampler
and versions, seed and run lengths, and per quantity (alpha, beta[1..20]) mean, sd, R-hat and
bulk/tail ESS.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "models" / "logistic_regression"))

from nuts_common import run_reference  # noqa: E402
from simulate import simulate  # noqa: E402

COMMAND = (
    "OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /work/benchvenv/bin/python "
    "benchmarks/reference/big_logistic_nuts.py"
)
OUT = ROOT / "models" / "logistic_regression" / "simulated_200k_nuts_reference.json"


def numpyro_model():
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    X, y = simulate(200_000, seed=11)

    def model(X, y):
        alpha = numpyro.sample("alpha", dist.Normal(0.0, 5.0))
        beta = numpyro.sample("beta", dist.Normal(0.0, 1.0).expand([X.shape[1]]).to_event(1))
        numpyro.sample("y", dist.Bernoulli(logits=alpha + X @ beta), obs=y)

    return model, {"X": jnp.asarray(X), "y": jnp.asarray(y)}


def main(argv=None) -> int:
    model, kwargs = numpyro_model()
    return run_reference(
        argv,
        description=__doc__.splitlines()[0],
        model=model,
        kwargs=kwargs,
        model_path="models/logistic_regression/fixed_prior.model",
        data_path="models/logistic_regression/simulate.py (200,000 rows, seed 11)",
        out=OUT,
        command=COMMAND,
        defaults={"seed": 20261124, "chains": 4, "warmup": 1000, "draws": 3000},
        ess_min=400.0,
        derived=None,
        order=("alpha", "beta"),
    )


if __name__ == "__main__":
    sys.exit(main())
