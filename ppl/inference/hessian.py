"""Hessian-vector products and what they buy: curvature without a dense autograd Hessian.

autograd's `hessian` runs one reverse pass per dimension. A Hessian-vector product costs a
few gradients (reverse over reverse), and the log joint is vectorised over rows of draws, so
the products with many vectors at one point are one batched call: the Hessian of a small
model at its mode is one call over D copies of the mode.
"""

from __future__ import annotations

from collections.abc import Callable

import autograd.numpy as anp
import numpy as np
from autograd import grad

from ppl.errors import SecondDerivativeError

#: Step of the central difference of gradients where second derivatives are missing: the
#: truncation error is O(h^2) and an adaptive ODE solver's error (~ its tolerance) divided by h
#: stays below 1% at Stan's default tolerances.
GRADIENT_DIFFERENCE_STEP = 1e-3


def batched_hvp(log_density: Callable, points: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Rows H(x_k) v_k for rows x_k of `points` and v_k of `vectors`, where H is the Hessian of
    a log density that maps (S, D) rows to (S,) values: one vectorised call."""
    g = grad(lambda X: anp.sum(log_density(X)))
    vectors = np.asarray(vectors, dtype=float)
    points = np.asarray(points, dtype=float)
    try:
        return np.asarray(grad(lambda X: anp.sum(g(X) * vectors))(points))
    except SecondDerivativeError:
        h = GRADIENT_DIFFERENCE_STEP
        both = np.asarray(g(np.concatenate([points + h * vectors, points - h * vectors])))
        return (both[: len(points)] - both[len(points) :]) / (2 * h)


def hessian_by_hvp(log_density: Callable, x: np.ndarray) -> np.ndarray:
    """The dense (symmetrised) Hessian of a row-vectorised log density at x, from D
    Hessian-vector products with the unit vectors in one batched call."""
    return expected_hessian(log_density, np.asarray(x, dtype=float)[None, :])


def expected_hessian(log_density: Callable, points: np.ndarray) -> np.ndarray:
    """The mean Hessian over the rows of `points` (S, D), from S x D Hessian-vector products
    in one batched call."""
    points = np.atleast_2d(np.asarray(points, dtype=float))
    S, D = points.shape
    products = batched_hvp(log_density, np.repeat(points, D, axis=0), np.tile(np.eye(D), (S, 1)))
    H = products.reshape(S, D, D).mean(axis=0)
    return 0.5 * (H + H.T)
