"""The GP regression model (models/gp_regression): its log joint against a direct computation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import stats

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

MODEL = Path(__file__).resolve().parents[2] / "models" / "gp_regression" / "gp_regression.model"


def direct_log_joint(X, y, log_h):
    """log N(y | 0, K + sigma^2 I) + the priors + the log-Jacobians of h = exp(log_h)."""
    h = np.exp(log_h)
    alpha, rho, sigma = h[0], h[1:-1], h[-1]
    A = X / rho
    d2 = ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1)
    cov = alpha**2 * np.exp(-0.5 * d2) + sigma**2 * np.eye(len(y))
    return (
        stats.multivariate_normal(np.zeros(len(y)), cov).logpdf(y)
        + stats.norm(0, 2).logpdf(alpha)
        + stats.invgamma(2, scale=2).logpdf(rho).sum()
        + stats.norm(0, 1).logpdf(sigma)
        + log_h.sum()
    )


def test_gp_model_log_joint_matches_a_direct_computation():
    rng = np.random.default_rng(4)
    N, K = 12, 3
    X = rng.standard_normal((N, K))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(N)
    checked = check(parse(MODEL.read_text(), str(MODEL)))
    model = CompiledModel(checked, {"N": N, "K": K, "X": X, "y": y})
    points = 0.5 * rng.standard_normal((4, K + 2))
    got = np.asarray(model.log_joint(points))
    want = np.array([direct_log_joint(X, y, p) for p in points])
    # equal up to the constants that `~` may drop: compare differences between points
    np.testing.assert_allclose(got - got[0], want - want[0], rtol=1e-9, atol=1e-9)
