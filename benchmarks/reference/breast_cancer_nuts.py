"""NUTS reference posterior for the breast-cancer logistic regression
(models/logistic_regression/breast_cancer/breast_cancer.model: 569 rows, 30 standardised features,
31 parameters), for benchmarks/dsvi_optimum.py.

Needs numpyro (with jax on CPU) in a separate virtualenv, as pima_nuts.py does:

    python -m venv /tmp/nutsenv && /tmp/nutsenv/bin/pip install numpyro scipy
    OPENBLAS_NUM_THREADS=1 /tmp/nutsenv/bin/python benchmarks/reference/breast_cancer_nuts.py

The model is restated in numpyro exactly as breast_cancer.model defines it (the same
standardisation as pima.model, alpha ~ normal(0, 5), beta ~ normal(0, 2.5)); pima_nuts.py's
sampler settings, checks (rank-normalised split R-hat < 1.01, bulk ESS > 1000, no divergences;
no file is written otherwise) and JSON layout, with a dense mass matrix (the features come in
strongly correlated groups, so a diagonal one needs a far smaller step).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pima_nuts  # noqa: E402
from numpyro.infer import NUTS  # noqa: E402

FOLDER = pima_nuts.FOLDER / "breast_cancer"
pima_nuts.DATA = FOLDER / "breast_cancer.csv"
pima_nuts.OUT = FOLDER / "breast_cancer_nuts_reference.json"
pima_nuts.COMMAND = ("OPENBLAS_NUM_THREADS=1 /tmp/nutsenv/bin/python "
                     "benchmarks/reference/breast_cancer_nuts.py")  # fmt: skip
MODEL = "models/logistic_regression/breast_cancer/breast_cancer.model"
DATA = "models/logistic_regression/breast_cancer/breast_cancer.csv"


def posterior_mode(Z, y):
    """The posterior mode (Newton) in the column pima_nuts.py fills with the MLE: the classes
    are nearly separable, so the unpenalised MLE does not exist (its Newton step is singular)."""
    import numpy as np

    A = np.column_stack([np.ones(len(y)), Z])
    prior = np.r_[1 / 5.0**2, np.full(Z.shape[1], 1 / 2.5**2)]
    w = np.zeros(A.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-A @ w))
        H = A.T @ (A * (p * (1 - p))[:, None]) + np.diag(prior)
        step = np.linalg.solve(H, A.T @ (y - p) - prior * w)
        w += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return w


def dense_nuts(model, target_accept_prob):
    return NUTS(model, target_accept_prob=target_accept_prob, dense_mass=True)


def main(argv=None) -> int:
    pima_nuts.NUTS = dense_nuts
    pima_nuts.mle = posterior_mode
    status = pima_nuts.main(argv)
    if status == 0:  # name the model and data this reference belongs to
        import json

        reference = json.loads(pima_nuts.OUT.read_text())
        reference.update(model=MODEL, data=DATA)
        reference["settings"]["mass_matrix"] = "dense"
        reference["mode"] = reference.pop("mle")  # the posterior mode (posterior_mode)
        pima_nuts.OUT.write_text(json.dumps(reference, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
