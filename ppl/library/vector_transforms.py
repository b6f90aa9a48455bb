"""Constrained vectors: ``simplex``, ``ordered``, ``positive_ordered``, ``unit_vector`` and
``sum_to_zero_vector``, each over the last axis."""

from __future__ import annotations

import math
from functools import cache

import autograd.numpy as anp
import numpy as np

from ppl.library.transform_base import (
    Array,
    Transform,
    log1m_inv_logit,
    log_inv_logit,
)


class Simplex(Transform):
    """``simplex[K]`` by Stan's stick-breaking, in log space so it is vectorised and stable.

    z_k = inv_logit(u_k - log(K - k)) (k 1-based), x_k = stick_k z_k, stick_{k+1} = stick_k - x_k,
    x_K = stick_K.  log stick_k is an exclusive cumsum of log1m_inv_logit, so no loop over K.
    """

    kind = "simplex"
    support = "simplex"
    core_ndim = 1

    def unconstrained_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[:-1]) + (shape[-1] - 1,)

    def constrained_shape(self, ushape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(ushape[:-1]) + (ushape[-1] + 1,)

    @staticmethod
    def _offsets(n: int) -> np.ndarray:
        return np.log(np.arange(n, 0, -1, dtype=float))  # log(K - k), k = 1..K-1

    def _forward(self, u: Array) -> tuple[Array, Array]:
        n = anp.shape(u)[-1]
        adj = u - self._offsets(n)
        log_z = log_inv_logit(adj)
        log_1mz = log1m_inv_logit(adj)
        batch = anp.shape(u)[:-1]
        zero = anp.zeros(batch + (1,))
        log_stick = anp.concatenate([zero, anp.cumsum(log_1mz, axis=-1)], axis=-1)  # (..., K)
        log_x = log_stick + anp.concatenate([log_z, zero], axis=-1)
        lj = anp.sum(log_stick[..., :n] + log_z + log_1mz, axis=-1)
        return anp.exp(log_x), lj

    def inverse(self, x: Array) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        n = x.shape[-1] - 1
        stick = np.cumsum(x[..., ::-1], axis=-1)[..., ::-1]  # sum_{j>=k} x_j, precise tail sums
        with np.errstate(divide="ignore", invalid="ignore"):
            # logit(x_k / stick_k) = log x_k - log(stick_k - x_k) = log x_k - log stick_{k+1}
            u = np.log(x[..., :n]) - np.log(stick[..., 1:])
        return u + self._offsets(n)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(np.all(x >= -tol) and np.all(np.abs(x.sum(axis=-1) - 1.0) <= tol))


class Ordered(Transform):
    """``ordered[K]``: x_1 = u_1, x_k = x_{k-1} + exp(u_k); log|J| = sum_{k>1} u_k."""

    kind = "ordered"
    support = "ordered"
    core_ndim = 1

    def _forward(self, u: Array) -> tuple[Array, Array]:
        if anp.shape(u)[-1] == 0:
            return u, anp.zeros(anp.shape(u)[:-1])
        steps = anp.concatenate([u[..., :1], anp.exp(u[..., 1:])], axis=-1)
        return anp.cumsum(steps, axis=-1), anp.sum(u[..., 1:], axis=-1)

    def inverse(self, x: Array) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.concatenate([x[..., :1], np.log(np.diff(x, axis=-1))], axis=-1)

    def in_support(self, x: Array, tol: float = 0.0) -> bool:
        return bool(np.all(np.diff(np.asarray(x, dtype=float), axis=-1) > -tol))


class PositiveOrdered(Transform):
    """``positive_ordered[K]``: x_1 = exp(u_1), x_k = x_{k-1} + exp(u_k); log|J| = sum u_k."""

    kind = "positive_ordered"
    support = "positive_ordered"
    core_ndim = 1

    def _forward(self, u: Array) -> tuple[Array, Array]:
        return anp.cumsum(anp.exp(u), axis=-1), anp.sum(u, axis=-1)

    def inverse(self, x: Array) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(np.diff(x, axis=-1, prepend=0.0))

    def in_support(self, x: Array, tol: float = 0.0) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(np.all(np.diff(x, axis=-1, prepend=0.0) > -tol))


class UnitVector(Transform):
    """``unit_vector[K]``: x = u / |u|, with -|u|^2 / 2 in place of a log-Jacobian.

    The map is not a bijection (every ray goes to one point); Stan adds the standard normal
    log kernel of u so that the density on u is proper, and the induced x is uniform on the
    sphere under that term alone. ``inverse`` returns x itself (a point of unit norm).
    """

    kind = "unit_vector"
    support = "unit_vector"
    core_ndim = 1

    def _forward(self, u: Array) -> tuple[Array, Array]:
        r2 = anp.sum(u * u, axis=-1)
        return u / anp.sqrt(r2)[..., None], -0.5 * r2

    def inverse(self, x: Array) -> np.ndarray:
        return np.asarray(x, dtype=float)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(np.all(np.abs(np.sum(x * x, axis=-1) - 1.0) <= tol))


@cache
def _zero_sum_basis(n: int) -> np.ndarray:
    """The (n + 1) x n orthonormal basis of sum-to-zero vectors Stan uses (pivot coordinates of
    the isometric log-ratio transform): column j (1-based) is (1, ..., 1, -j, 0, ...) / sqrt(j(j+1))
    with j ones."""
    h = np.zeros((n + 1, n))
    for j in range(1, n + 1):
        h[:j, j - 1] = 1.0
        h[j, j - 1] = -float(j)
        h[:, j - 1] /= math.sqrt(j * (j + 1))
    h.flags.writeable = False
    return h


class SumToZero(Transform):
    """``sum_to_zero_vector[K]``: x = H u with H the orthonormal basis of the sum-zero subspace.

    Linear, so the log-Jacobian is a constant, which Stan leaves out (0 here too); every x_k
    then has the same marginal variance under a symmetric prior on u.
    """

    kind = "sum_to_zero_vector"
    support = "sum_to_zero_vector"
    core_ndim = 1

    def unconstrained_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[:-1]) + (shape[-1] - 1,)

    def constrained_shape(self, ushape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(ushape[:-1]) + (ushape[-1] + 1,)

    def _forward(self, u: Array) -> tuple[Array, Array]:
        n = anp.shape(u)[-1]
        x = anp.matmul(u, _zero_sum_basis(n).T)
        return x, anp.zeros(anp.shape(u)[:-1])

    def inverse(self, x: Array) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return x @ _zero_sum_basis(x.shape[-1] - 1)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        return bool(np.all(np.abs(np.sum(x, axis=-1)) <= tol))
