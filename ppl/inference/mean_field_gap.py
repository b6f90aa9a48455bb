"""What a mean-field q can reach at best, from the curvature at the mode, and how much solving
that is worth where nothing richer follows it.

For a Gaussian posterior with precision A the mean-field optimum has precision diag(A) (Laplace
at the mode: the road's first q). In q's whitened coordinates the posterior's precision is the
unit-diagonal C = S A S, S = diag(A)^-1/2; along an eigenvector of C with eigenvalue lam the
posterior's variance is 1 / lam against q's 1, so PSIS's weights p / q have tail index
1 / (1 - lam): k = 1 - lam_min(C) is the k-hat of the best mean-field q, and the ELBO of that q
is below the log evidence by the KL gap -1/2 log det C (nats). Where k > 0.7 no mean-field q is
reliable, and where the road has no richer Gaussian to try after it (more than MAX_DENSE_DIM
coordinates: neither the full-rank nor the low-rank family; ppl.methods.escalation), polishing
that q to a fraction of a nat of its own optimum buys nothing the verdict will not flag: the
solve stops when its gains are small against the gap (`stall`), on no more draws than make the
fixed-draw optimum's own error (about size / (2 S) nats for q's `size` parameters on S draws)
smaller than the gap (`max_draws`).

gamma_normal (1,843 coordinates, a factor model's scale ridges): k = 0.99996, gap 1,020 nats;
its mean-field solve from the mode crept on for 50,000 gradients (173 s of CPU), ending with W's
means 1.5 NUTS sd off and sds 0.28-0.46 of NUTS', as far from the posterior as the bounded solve.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ppl.inference.hessian import batched_hvp

#: The dense precision (D Hessian-vector products, a D x D matrix) is taken up to this many
#: coordinates (4000: 128 MB, a Cholesky of a few seconds).
MAX_GAP_DIM = 4000
#: Hessian-vector products per batched call (bounds the memory of one call to about that many
#: gradients' worth).
HVP_CHUNK = 256
#: A mean-field q whose best k-hat is above this is not reliable (PSIS's threshold).
UNRELIABLE = 0.7
#: The solve stops when its last ppl.inference.saa.STALL[0] iterations gained less than this
#: fraction of the gap.
STALL_SHARE = 0.01


def dense_precision(log_joint: Callable, point: np.ndarray) -> np.ndarray | None:
    """-H at `point` from D Hessian-vector products in chunks of HVP_CHUNK; None if not
    finite."""
    point = np.asarray(point, dtype=float)
    D = len(point)
    H = np.empty((D, D))
    try:
        with np.errstate(all="ignore"):
            for lo in range(0, D, HVP_CHUNK):
                k = min(HVP_CHUNK, D - lo)
                vectors = np.zeros((k, D))
                vectors[np.arange(k), lo + np.arange(k)] = 1.0
                H[lo : lo + k] = -batched_hvp(log_joint, np.repeat(point[None, :], k, axis=0),
                                              vectors)  # fmt: skip
    except (ValueError, FloatingPointError, ArithmeticError, np.linalg.LinAlgError):
        return None
    return 0.5 * (H + H.T) if np.all(np.isfinite(H)) else None


def best_mean_field(precision: np.ndarray) -> tuple[bool, float] | None:
    """(unreliable, gap): whether the PSIS k of the mean-field optimum for the Gaussian with this
    precision, 1 - lam_min(C), is over UNRELIABLE (C - (1 - UNRELIABLE) I is then not positive
    definite: a Cholesky, no eigen-decomposition), and its KL gap -1/2 log det C (C the
    unit-diagonal scaling); None when the precision is not positive definite."""
    A = np.asarray(precision, dtype=float)
    d = np.diag(A)
    if not np.all(d > 0):
        return None
    C = A / np.sqrt(np.outer(d, d))
    try:
        L = np.linalg.cholesky(C)
    except np.linalg.LinAlgError:
        return None
    gap = -float(np.sum(np.log(np.diag(L))))
    try:
        np.linalg.cholesky(C - (1.0 - UNRELIABLE) * np.eye(len(C)))
    except np.linalg.LinAlgError:
        return True, gap
    return False, gap


def mean_field_bound(log_joint: Callable, point: np.ndarray, size: int, first_draws: int,
                     growth: int, min_dim: int) -> dict | None:  # fmt: skip
    """Where more than `min_dim` (and at most MAX_GAP_DIM) coordinates leave the road no richer
    Gaussian and the curvature at the mode says no mean-field q is reliable: {"gap",
    "stall" (nats), "max_draws", "hessian_vector_products"} for the solve of q's `size`
    parameters (draw sets first_draws * growth^k); else None."""
    D = len(point)
    if not min_dim < D <= MAX_GAP_DIM:
        return None
    precision = dense_precision(log_joint, point)
    found = None if precision is None else best_mean_field(precision)
    if found is None or not found[0]:
        return None
    gap = found[1]
    draws = first_draws
    while size / (2.0 * draws) > gap:
        draws *= growth
    return {"gap": gap, "stall": STALL_SHARE * gap, "max_draws": draws,
            "hessian_vector_products": D}  # fmt: skip


def bound_warnings(polish: dict) -> list[str]:
    """Why the road's mean-field solve stopped short, for the fit's warnings (mean_field_bound)."""
    bound = polish.get("mean_field_bound")
    if not bound:
        return []
    return [f"the mean-field solve was stopped short (q is NOT converged): the curvature at the "
            f"mode says no mean-field q is reliable here (the best one's PSIS k is over "
            f"{UNRELIABLE}: it understates the sd along some direction by more than "
            f"{1 / np.sqrt(1 - UNRELIABLE):.2g}x, and its ELBO is about {bound['gap']:.4g} nats "
            f"below the log evidence), and no Gaussian with correlations is tried at "
            f"{bound['hessian_vector_products']} coordinates; q was solved until its ELBO gained "
            f"less than {bound['stall']:.3g} nats in 50 iterations, on at most "
            f"{bound['max_draws']} draws, as more work would not make it reliable"]  # fmt: skip
