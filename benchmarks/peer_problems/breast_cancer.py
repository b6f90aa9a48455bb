"""Logistic regression on the Wisconsin diagnostic breast cancer data: 569 rows, 30 features
(models/logistic_regression/breast_cancer), 31 parameters.

The same model as Pima's (pima.py: standardised features, alpha ~ normal(0, 5),
beta ~ normal(0, 2.5)), on another table. No reference posterior is stored, so peers.py does not
list it; benchmarks/end_to_end.py times it.
"""

from __future__ import annotations

from .base import ROOT, Problem
from .pima import load, logistic_numpyro, logistic_pymc

FOLDER = ROOT / "models" / "logistic_regression" / "breast_cancer"
DATA = FOLDER / "breast_cancer.csv"


def pymc_model():
    return logistic_pymc(*load(DATA))


def numpyro_model():
    return logistic_numpyro(*load(DATA))


def problem() -> Problem:
    return Problem(
        name="breast-cancer-logistic",
        model=FOLDER / "breast_cancer.model",
        data=[DATA],
        reference={},
        reference_source="none stored",
        pymc_model=pymc_model,
        numpyro_model=numpyro_model,
    )
