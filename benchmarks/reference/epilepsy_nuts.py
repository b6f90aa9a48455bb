"""NUTS reference posterior for the epilepsy Poisson-gamma model (epilepsy/poisson_gamma.model).

Needs numpyro (with jax on CPU), an optional benchmark dependency (pip install '.[bench]' into a
separate virtualenv). Run from the repository root:

    OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/benchvenv/bin/python \
        benchmarks/reference/epilepsy_nuts.py

The model is the NumPyro statement of benchmarks/peer_problems/epilepsy.py (the same priors and
likelihood as poisson_gamma.model, with epil.json). NUTS runs in double precision, 4 chains of
1000 warmup + 2000 draws, target_accept_prob 0.9, diagonal mass matrix, fixed seed. The script
fails (exit status 1, no JSON written) unless every parameter has rank-normalised split R-hat
< 1.01 and bulk ESS > 400 (Vehtari et al. 2021) and there are no divergences.

It writes models/epilepsy/poisson_gamma_nuts_reference.json: the command, sampler and versions,
seed and run lengths, per-parameter (Stan element names: alpha, ..., kappa, u[1]..u[59]) mean,
sd, R-hat and bulk/tail ESS. No raw draws are kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from nuts_common import run_reference  # noqa: E402

from benchmarks.peer_problems import epilepsy  # noqa: E402

COMMAND = (
    "OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/benchvenv/bin/python "
    "benchmarks/reference/epilepsy_nuts.py"
)


def main(argv=None) -> int:
    model, kwargs = epilepsy.numpyro_model()
    return run_reference(
        argv,
        description=__doc__.splitlines()[0],
        model=model,
        kwargs=kwargs,
        model_path="models/epilepsy/poisson_gamma.model",
        data_path="models/epilepsy/epil.json",
        out=epilepsy.REFERENCE,
        command=COMMAND,
        defaults={"seed": 20240607, "chains": 4, "warmup": 1000, "draws": 2000},
        ess_min=400.0,
        derived=None,
    )


if __name__ == "__main__":
    sys.exit(main())
