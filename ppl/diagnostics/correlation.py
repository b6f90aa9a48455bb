"""How much a mean-field q must understate the posterior's sds where the posterior's coordinates
are correlated: the conditional precision A_ii of a Gaussian with precision A is what a
mean-field optimum matches (1 / sd_i^2 = A_ii), while its marginal variance is (A^-1)_ii; their
product is at least 1, and its square root is the factor by which the mean-field sd is too small."""

from __future__ import annotations

import numpy as np


def hidden_correlation(precision: np.ndarray) -> np.ndarray | None:
    """Per coordinate, sqrt((A^-1)_ii A_ii) >= 1 for a precision matrix A (e.g. -H at the mode,
    or E_q[-H]); None when A is not finite and positive definite."""
    A = np.asarray(precision, dtype=float)
    if A.ndim != 2 or not np.all(np.isfinite(A)):
        return None
    A = 0.5 * (A + A.T)
    d = np.diag(A)
    if np.any(d <= 0):
        return None
    scaled = A / np.sqrt(np.outer(d, d))  # a unit diagonal: the factor is scale-free
    try:
        L = np.linalg.cholesky(scaled)
    except np.linalg.LinAlgError:
        return None
    inverse_diag = np.sum(np.linalg.inv(L) ** 2, axis=0)
    return np.sqrt(np.maximum(inverse_diag, 1.0))
