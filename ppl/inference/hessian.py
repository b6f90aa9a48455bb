"""Hessian-vector products and what they buy: curvature without a dense autograd Hessian.

autograd's `hessian` runs one reverse pass per dimension. A Hessian-vector product costs a
few gradients (reverse over reverse), and the log joint is vectorised over rows of draws, so
the products with many vectors at one point are one batched call: the Hessian of a small
model at its mode is one call over D copies of the mode. Conjugate gradients solve H x = b
from products alone, for models too large for that.
"""

from __future__ import annotations

from collections.abc import Callable

import autograd.numpy as anp
import numpy as np
from autograd import grad


def hvp(f: Callable, x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """H(x) v for a scalar function f of a vector x (reverse over reverse)."""
    g = grad(f)
    return np.asarray(grad(lambda y: anp.sum(g(y) * v))(np.asarray(x, dtype=float)))


def batched_hvp(log_density: Callable, points: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Rows H(x_k) v_k for rows x_k of `points` and v_k of `vectors`, where H is the Hessian of
    a log density that maps (S, D) rows to (S,) values: one vectorised call."""
    g = grad(lambda X: anp.sum(log_density(X)))
    vectors = np.asarray(vectors, dtype=float)
    return np.asarray(grad(lambda X: anp.sum(g(X) * vectors))(np.asarray(points, dtype=float)))


def hessian_by_hvp(log_density: Callable, x: np.ndarray) -> np.ndarray:
    """The dense (symmetrised) Hessian of a row-vectorised log density at x, from D
    Hessian-vector products with the unit vectors in one batched call."""
    return expected_hessian(log_density, np.asarray(x, dtype=float)[None, :])


def conjugate_gradient(
    apply: Callable[[np.ndarray], np.ndarray],
    b: np.ndarray,
    *,
    tol: float = 1e-8,
    max_iter: int | None = None,
) -> tuple[np.ndarray, int]:
    """Solve A X = B for a symmetric positive definite A given only X -> A X, for the columns
    of B together (a block of independent CG iterations, one product call per step); returns
    (X, products used). Columns whose curvature turns non-positive stop where they are."""
    B = np.asarray(b, dtype=float)
    vector = B.ndim == 1
    B = B.reshape(len(B), -1)
    X = np.zeros_like(B)
    R = B.copy()
    P = R.copy()
    rs = np.sum(R * R, axis=0)
    scale = np.sqrt(np.sum(B * B, axis=0))
    active = rs > (tol * scale) ** 2
    steps = 0
    for _ in range(max_iter or 10 * len(B)):
        if not active.any():
            break
        AP = np.zeros_like(P)
        AP[:, active] = apply(P[:, active])
        steps += 1
        curvature = np.sum(P * AP, axis=0)
        ok = active & (curvature > 0)
        alpha = np.where(ok, rs / np.where(ok, curvature, 1.0), 0.0)
        X += alpha * P
        R -= alpha * AP
        rs_new = np.sum(R * R, axis=0)
        beta = np.where(ok, rs_new / np.where(rs > 0, rs, 1.0), 0.0)
        P = R + beta * P
        rs = rs_new
        active = ok & (rs > (tol * scale) ** 2)
    return (X[:, 0] if vector else X), steps


def expected_hessian(log_density: Callable, points: np.ndarray) -> np.ndarray:
    """The mean Hessian over the rows of `points` (S, D), from S x D Hessian-vector products
    in one batched call."""
    points = np.atleast_2d(np.asarray(points, dtype=float))
    S, D = points.shape
    products = batched_hvp(log_density, np.repeat(points, D, axis=0), np.tile(np.eye(D), (S, 1)))
    H = products.reshape(S, D, D).mean(axis=0)
    return 0.5 * (H + H.T)
