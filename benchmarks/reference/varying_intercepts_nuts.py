"""NUTS reference posterior for the varying-intercepts logistic regression (100 groups).

Needs numpyro (with jax on CPU), an optional benchmark dependency (pip install '.[bench]' into a
separate virtualenv). Run from the repository root:

    OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /work/benchvenv/bin/python \
        benchmarks/reference/varying_intercepts_nuts.py

The model is the NumPyro statement of benchmarks/peer_problems/varying_intercepts.py (the same
priors and likelihood as models/varying_intercepts/varying_intercepts.model, with
varying_intercepts.json; `python benchmarks/peers.py --check --only varying` checks that its log
density equals ppl's up to a constant). NUTS runs in double precision, 4 chains of 1000 warmup +
2000 draws, target_accept_prob 0.9, diagonal mass matrix, fixed seed. The script fails (exit
status 1, no JSON written) unless every quantity has rank-normalised split R-hat < 1.01 and bulk
ESS > 400 (Vehtari et al. 2021) and there are no divergences.

It writes models/varying_intercepts/nuts_reference.json: the command, sampler and versions, seed
and run lengths, and per quantity (Stan element names: mu, tau, beta[1], beta[2],
alpha_raw[1..100] and the transformed parameters alpha[1..100]) mean, sd, R-hat and bulk/tail
ESS. No raw draws are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from nuts_common import run_reference  # noqa: E402

from benchmarks.peer_problems import varying_intercepts  # noqa: E402

COMMAND = (
    "OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /work/benchvenv/bin/python "
    "benchmarks/reference/varying_intercepts_nuts.py"
)
# parameters, then transformed parameters, in declaration order (as ppl's summary)
ORDER = ("mu", "tau", "beta", "alpha_raw", "alpha")


def main(argv=None) -> int:
    model, kwargs = varying_intercepts.numpyro_model()
    return run_reference(
        argv,
        description=__doc__.splitlines()[0],
        model=model,
        kwargs=kwargs,
        model_path="models/varying_intercepts/varying_intercepts.model",
        data_path="models/varying_intercepts/varying_intercepts.json",
        out=varying_intercepts.REFERENCE,
        command=COMMAND,
        defaults={"seed": 20240611, "chains": 4, "warmup": 1000, "draws": 2000},
        ess_min=400.0,
        derived=None,
        order=ORDER,
        notes=[
            "alpha[j] = mu + tau * alpha_raw[j] are the model's transformed parameters, "
            "computed per draw (a numpyro deterministic site)"
        ],
    )


if __name__ == "__main__":
    sys.exit(main())
