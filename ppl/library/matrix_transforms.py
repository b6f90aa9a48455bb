"""Constrained matrices over the last two axes: Cholesky factors of correlation and covariance
matrices, and correlation and covariance matrices (through their Cholesky factors)."""

from __future__ import annotations

import math
from functools import cache

import autograd.numpy as anp
import numpy as np

from ppl.errors import ModelError
from ppl.library.transform_base import Array, Transform

_LOG2 = math.log(2.0)


def _log1m_tanh_sq(u: Array) -> Array:
    """log(1 - tanh(u)^2) = log(sech(u)^2), stable for any |u| (no log(0))."""
    a = anp.abs(u)
    return 2.0 * (_LOG2 - a - anp.log1p(anp.exp(-2.0 * a)))


def _exclusive_cumsum(a: Array, axis: int = -1) -> Array:
    """Sum of the entries strictly before each position (first entry 0)."""
    c = anp.cumsum(a, axis=axis)
    return c - a


def _tri_size_to_k(m: int, *, strict: bool, what: str) -> int:
    """Invert m = K(K-1)/2 (strict) or m = K(K+1)/2 to find K, or fail loudly."""
    disc = 1 + 8 * m
    root = math.isqrt(disc)
    if root * root != disc:
        raise ValueError(f"{what}: {m} unconstrained values do not form a triangle")
    return (1 + root) // 2 if strict else (root - 1) // 2


@cache
def _scatter(rows: tuple[int, ...], cols: tuple[int, ...], nrow: int, ncol: int) -> np.ndarray:
    """0/1 matrix P with (u @ P).reshape(nrow, ncol) placing u[m] at (rows[m], cols[m])."""
    p = np.zeros((len(rows), nrow * ncol))
    p[np.arange(len(rows)), np.asarray(rows, dtype=int) * ncol + np.asarray(cols, dtype=int)] = 1
    p.flags.writeable = False  # cached and shared
    return p


def _fill(u: Array, rows: np.ndarray, cols: np.ndarray, nrow: int, ncol: int) -> Array:
    """Place the last axis of ``u`` into an (nrow, ncol) matrix without in-place writes."""
    p = _scatter(tuple(int(r) for r in rows), tuple(int(c) for c in cols), nrow, ncol)
    flat = anp.matmul(u, p)
    return anp.reshape(flat, anp.shape(u)[:-1] + (nrow, ncol))


def _strict_lower_rowmajor(k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tril_indices(k, -1)


def _strict_lower_colmajor(k: int) -> tuple[np.ndarray, np.ndarray]:
    c, r = np.triu_indices(k, 1)
    return r, c


def _corr_cholesky_from_y(y_mat: Array, k: int) -> tuple[Array, Array]:
    """Cholesky factor of a correlation matrix from a matrix of unconstrained CPC values.

    Row i: L[i, j] = z_ij * sqrt(prod_{l<j} (1 - z_il^2)), L[i, i] = sqrt(prod_{l<i} ...),
    which is Stan's recursion with ``sum_sqs`` written as a product (vectorised).  Returns the
    factor and R (the per-entry log of the remaining squared row length, used by the Jacobian).
    """
    z = anp.tanh(y_mat)
    ls = _log1m_tanh_sq(y_mat)
    r = _exclusive_cumsum(ls, axis=-1)
    eye = np.eye(k)
    return (z + eye) * anp.exp(0.5 * r), r


def _corr_cholesky_to_z(lmat: np.ndarray) -> np.ndarray:
    """Inverse of the recursion above: the CPC matrix z (strictly lower part meaningful)."""
    sq = lmat**2
    rem = 1.0 - (np.cumsum(sq, axis=-1) - sq)
    with np.errstate(divide="ignore", invalid="ignore"):
        return lmat / np.sqrt(rem)


class _MatrixTransform(Transform):
    core_ndim = 2

    def unconstrained_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(shape[:-2]) + (self._n_free(shape[-2], shape[-1]),)

    def constrained_shape(self, ushape: tuple[int, ...]) -> tuple[int, ...]:
        k = self._k(ushape[-1])
        return tuple(ushape[:-1]) + (k, k)

    def _n_free(self, rows: int, cols: int) -> int:
        if rows != cols:
            raise ValueError(f"{self.kind} must be square, got {rows}x{cols}")
        return rows * (rows - 1) // 2

    def _k(self, m: int) -> int:
        return _tri_size_to_k(m, strict=True, what=self.kind)


class CholeskyFactorCorr(_MatrixTransform):
    """``cholesky_factor_corr[K]``: tanh to CPCs in (-1, 1), then Stan's row recursion.

    Unconstrained values fill the strictly lower triangle row-major (as Stan does).
    log|J| = sum log(1 - z^2) + 0.5 sum_{i, 0<j<i} log(1 - sum_{l<j} L_il^2).
    """

    kind = "cholesky_factor_corr"
    support = "cholesky_factor_corr"

    def _forward(self, u: Array) -> tuple[Array, Array]:
        k = self._k(anp.shape(u)[-1])
        rows, cols = _strict_lower_rowmajor(k)
        lmat, r = _corr_cholesky_from_y(_fill(u, rows, cols, k, k), k)
        mask = np.tril(np.ones((k, k)), -1)
        lj = anp.sum(_log1m_tanh_sq(u), axis=-1) + 0.5 * anp.sum(r * mask, axis=(-2, -1))
        return lmat, lj

    def inverse(self, x: Array) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        rows, cols = _strict_lower_rowmajor(x.shape[-1])
        return np.arctanh(_corr_cholesky_to_z(x)[..., rows, cols])

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        k = x.shape[-1]
        r, c = np.triu_indices(k, 1)
        upper_zero = np.all(np.abs(x[..., r, c]) <= tol)
        diag_pos = np.all(np.diagonal(x, axis1=-2, axis2=-1) > 0)
        unit_rows = np.all(np.abs(np.sum(x**2, axis=-1) - 1.0) <= tol)
        return bool(upper_zero and diag_pos and unit_rows)


class CholeskyFactorCov(_MatrixTransform):
    """``cholesky_factor_cov[M, N]``: lower trapezoid row-major, exp on the diagonal.

    log|J| = sum of the unconstrained diagonal entries.  Pass ``shape=(M, N)`` for non-square
    factors (the size cannot be recovered from the unconstrained length alone).
    """

    kind = "cholesky_factor_cov"
    support = "cholesky_factor_cov"

    def __init__(self, shape: tuple[int, int] | None = None) -> None:
        self.shape = None if shape is None else (int(shape[0]), int(shape[1]))
        if self.shape is not None and self.shape[0] < self.shape[1]:
            raise ModelError("cholesky_factor_cov[M, N] needs M >= N")

    def _n_free(self, rows: int, cols: int) -> int:
        if rows < cols:
            raise ValueError("cholesky_factor_cov[M, N] needs M >= N")
        return cols * (cols + 1) // 2 + (rows - cols) * cols

    def unconstrained_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Also fixes the factor's M x N shape, which the unconstrained length cannot tell."""
        if self.shape is None and shape[-2] != shape[-1]:
            self.shape = (int(shape[-2]), int(shape[-1]))
        return super().unconstrained_shape(shape)

    def _dims(self, m: int) -> tuple[int, int]:
        if self.shape is not None:
            if self._n_free(*self.shape) != m:
                raise ValueError(f"cholesky_factor_cov{list(self.shape)} needs different size")
            return self.shape
        k = _tri_size_to_k(m, strict=False, what=self.kind)
        return k, k

    def constrained_shape(self, ushape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(ushape[:-1]) + self._dims(ushape[-1])

    def _forward(self, u: Array) -> tuple[Array, Array]:
        nr, nc = self._dims(anp.shape(u)[-1])
        rows, cols = np.tril_indices(nr, 0, nc)
        y = _fill(u, rows, cols, nr, nc)
        diag = np.eye(nr, nc)
        off = np.tril(np.ones((nr, nc)), -1)
        lmat = y * off + diag * anp.exp(y)
        return lmat, anp.matmul(u, (rows == cols).astype(float))

    def inverse(self, x: Array) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        nr, nc = x.shape[-2:]
        rows, cols = np.tril_indices(nr, 0, nc)
        vals = x[..., rows, cols]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(rows == cols, np.log(np.abs(vals)), vals)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        nr, nc = x.shape[-2:]
        r, c = np.triu_indices(nr, 1, nc)
        return bool(
            np.all(np.abs(x[..., r, c]) <= tol) and np.all(np.diagonal(x, axis1=-2, axis2=-1) > 0)
        )

    def __repr__(self) -> str:
        return f"CholeskyFactorCov(shape={self.shape!r})"


class CovMatrix(_MatrixTransform):
    """``cov_matrix[K]``: x = L L^T with L a Cholesky factor (exp diagonal), Stan's layout.

    log|J| = K log 2 + sum_k (K - k + 1) log L_kk  (k 0-based), covering the exp and L -> L L^T.
    """

    kind = "cov_matrix"
    support = "cov_matrix"

    def _n_free(self, rows: int, cols: int) -> int:
        if rows != cols:
            raise ValueError(f"cov_matrix must be square, got {rows}x{cols}")
        return rows * (rows + 1) // 2

    def _k(self, m: int) -> int:
        return _tri_size_to_k(m, strict=False, what=self.kind)

    def _forward(self, u: Array) -> tuple[Array, Array]:
        k = self._k(anp.shape(u)[-1])
        rows, cols = np.tril_indices(k)
        lmat, _ = CholeskyFactorCov()._forward(u)
        x = anp.matmul(lmat, anp.swapaxes(lmat, -1, -2))
        weights = np.where(rows == cols, k - rows + 1.0, 0.0)
        return x, k * _LOG2 + anp.matmul(u, weights)

    def inverse(self, x: Array) -> np.ndarray:
        return CholeskyFactorCov().inverse(np.linalg.cholesky(np.asarray(x, dtype=float)))

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        if not np.allclose(x, np.swapaxes(x, -1, -2), atol=tol, rtol=tol):
            return False
        try:
            np.linalg.cholesky(x)
        except np.linalg.LinAlgError:
            return False
        return True


class CorrMatrix(CovMatrix):
    """``corr_matrix[K]``: CPCs (tanh, column-major as Stan's read_corr_L) -> L -> L L^T.

    log|J| = sum log(1 - z^2) + 0.5 sum_{j<K-2} (K - j - 2) sum_{i>j} log(1 - z_ij^2).
    """

    kind = "corr_matrix"
    support = "corr_matrix"

    def _n_free(self, rows: int, cols: int) -> int:
        if rows != cols:
            raise ValueError(f"corr_matrix must be square, got {rows}x{cols}")
        return rows * (rows - 1) // 2

    def _k(self, m: int) -> int:
        return _tri_size_to_k(m, strict=True, what=self.kind)

    def _forward(self, u: Array) -> tuple[Array, Array]:
        k = self._k(anp.shape(u)[-1])
        rows, cols = _strict_lower_colmajor(k)
        lmat, _ = _corr_cholesky_from_y(_fill(u, rows, cols, k, k), k)
        x = anp.matmul(lmat, anp.swapaxes(lmat, -1, -2))
        w = 1.0 + 0.5 * (k - cols - 2.0)
        return x, anp.matmul(_log1m_tanh_sq(u), w)

    def inverse(self, x: Array) -> np.ndarray:
        lmat = np.linalg.cholesky(np.asarray(x, dtype=float))
        rows, cols = _strict_lower_colmajor(lmat.shape[-1])
        return np.arctanh(_corr_cholesky_to_z(lmat)[..., rows, cols])

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        x = np.asarray(x, dtype=float)
        unit = np.all(np.abs(np.diagonal(x, axis1=-2, axis2=-1) - 1.0) <= tol)
        return bool(unit) and super().in_support(x, tol)
