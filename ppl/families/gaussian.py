"""Full-rank Gaussian q on the unconstrained scale, in coordinates relative to a start.

q = N(m0 + C a, (C B)(C B)^T) with B lower triangular (log-diagonal parameterised), where
N(m0, C C^T) is the start (a Laplace approximation or a mean-field fit): theta = 0 is the start
itself, and with C near the posterior's Cholesky factor the fixed-draw ELBO is well conditioned
even where the posterior has sds of 1e4 and correlations of -0.999.
"""

from __future__ import annotations

import functools

import autograd.numpy as anp
import numpy as np

LOG_2PI = float(np.log(2 * np.pi))


def lower_from(diag_log, off, dim: int):
    """Lower-triangular matrix with diagonal exp(diag_log) and rows of `off` below it
    (np.tril_indices(dim, -1) order), by one gather: autograd has no in-place writes, and
    building it row by row costs a traced primitive per row."""
    flat = anp.concatenate([np.zeros(1), anp.exp(diag_log), off])
    return anp.reshape(flat[_lower_positions(dim)], (dim, dim))


@functools.cache
def _lower_positions(dim: int) -> np.ndarray:
    """Where each entry of a dim x dim lower-triangular matrix sits in (0, diagonal, off)."""
    i, j = np.indices((dim, dim))
    return np.where(j == i, 1 + i, np.where(j < i, 1 + dim + i * (i - 1) // 2 + j, 0)).ravel()


class FullRankGaussian:
    """theta = (a, log diag B, below-diagonal B): D + D + D(D-1)/2 numbers."""

    def __init__(self, mean: np.ndarray, scale_tril: np.ndarray):
        self.dim = len(mean)
        self.m0 = np.asarray(mean, dtype=float).copy()
        self.C = np.asarray(scale_tril, dtype=float).copy()
        self.size = 2 * self.dim + self.dim * (self.dim - 1) // 2
        self._log_det_C = float(np.sum(np.log(np.abs(np.diag(self.C)))))

    def initial(self) -> np.ndarray:
        return np.zeros(self.size)

    def _mean_scale(self, theta):
        D = self.dim
        mu = self.m0 + anp.dot(self.C, theta[:D])
        return mu, anp.dot(self.C, lower_from(theta[D : 2 * D], theta[2 * D :], D))

    def draws(self, theta, eps: np.ndarray):
        """(S, D) draws for standard-normal eps, and q's entropy."""
        mu, L = self._mean_scale(theta)
        D = self.dim
        entropy = anp.sum(theta[D : 2 * D]) + self._log_det_C + 0.5 * D * (1.0 + LOG_2PI)
        return mu + anp.dot(eps, anp.transpose(L)), entropy

    def mean_scale(self, theta) -> tuple[np.ndarray, np.ndarray]:
        mu, L = self._mean_scale(np.asarray(theta, dtype=float))
        return np.asarray(mu), np.tril(np.asarray(L))

    def moments(self, theta) -> tuple[np.ndarray, np.ndarray]:
        mu, L = self.mean_scale(theta)
        return mu, np.sqrt(np.sum(L**2, axis=1))

    def changes(self, before, after) -> np.ndarray:
        """How far q moved: each mean in sds, each sd relatively (unitless)."""
        (m0, s0), (m1, s1) = self.moments(before), self.moments(after)
        return np.concatenate([np.abs(m1 - m0) / s1, np.abs(np.log(s1 / s0))])
