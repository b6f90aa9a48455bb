"""models/spike_slab/exact_inclusion.py: the enumeration behind the spike-and-slab benchmark's
exact inclusion probabilities, checked against brute force on a small problem and its stored
JSON against the model's own transformed data."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import numpy as np
from scipy import integrate
from scipy.stats import multivariate_normal

from ppl.data.build import build

ROOT = Path(__file__).resolve().parent.parent.parent
HERE = ROOT / "models" / "spike_slab"
exact = runpy.run_path(str(HERE / "exact_inclusion.py"), run_name="exact_inclusion")


def test_enumeration_matches_brute_force_integration():
    """K = 3 on 12 rows: p(z | y) by the script's closed form + Gauss-Legendre against the
    Gaussian marginal written out (dense covariance) and scipy's adaptive quad over sigma."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(12, 3))
    y = X @ np.array([0.8, 0.0, -0.5]) + rng.normal(0, 0.6, 12)
    p, log_ev, post, subsets = exact["enumerate_subsets"](X, y, *exact["sigma_rule"](0.05, 5, 400))
    A = np.column_stack([np.ones(12), X])
    joint = []
    for z in subsets:
        cols = np.concatenate([[0], 1 + np.flatnonzero(z)])
        cov = A[:, cols] @ A[:, cols].T

        def f(s, cov=cov):
            like = multivariate_normal(np.zeros(12), cov + s**2 * np.eye(12)).pdf(y)
            return like * 2 / np.sqrt(2 * np.pi) * np.exp(-0.5 * s**2)

        k = int(z.sum())
        pz = 1 / (4 * [1, 3, 3, 1][k])  # k! (3 - k)! / 4!
        joint.append(pz * integrate.quad(f, 0, np.inf, epsabs=0, epsrel=1e-10, limit=200)[0])
    joint = np.array(joint)
    np.testing.assert_allclose(post, joint / joint.sum(), rtol=1e-7)
    np.testing.assert_allclose(log_ev, np.log(joint.sum()), rtol=1e-9)


def test_stored_json_is_for_the_models_transformed_data():
    compiled = build(str(HERE / "spike_slab.model"), [str(HERE / "boston13.csv")])
    Xs, ys = exact["standardised"]()
    np.testing.assert_allclose(Xs, np.asarray(compiled.data["Xs"]), atol=1e-10)
    np.testing.assert_allclose(ys, np.asarray(compiled.data["ys"]), atol=1e-10)
    stored = json.loads((HERE / "exact_inclusion.json").read_text())
    assert stored["subsets"] == 8192
    assert stored["quadrature_check"]["max_abs_change_inclusion"] < 1e-10
    assert abs(stored["inclusion"]["crim"] - 0.4200) < 1e-4  # spread: not a 0/1 answer
