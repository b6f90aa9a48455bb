"""Stan's constraining transforms (Reference Manual, "Constraint transforms"), vectorised.

ADVI optimises over an unconstrained vector; each declared parameter is read from a slice of it
and pushed through the transform its declaration implies.  ``forward`` returns the constrained
value together with log|det J| summed over the parameter's own (type) axes, so the caller can add
it straight onto the log density (which has the batch shape).  Everything on the forward path uses
``autograd.numpy`` so gradients flow to ``u`` *and* to bounds that depend on other parameters.
``inverse`` is plain numpy: it only serves initial values and tests.

Layout follows docs/conventions.md: batch axes first (axis 0 = Monte Carlo samples), type axes
last.  Bounds arrive already aligned with ``x`` under numpy's right-aligned broadcasting.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd.tracer import getval

from ppl.errors import ModelError
from ppl.language import ast
from ppl.library.special import expit

__all__ = [
    "TRANSFORM_KINDS",
    "Transform",
    "Identity",
    "LowerBound",
    "UpperBound",
    "LowerUpperBound",
    "OffsetMultiplier",
    "Simplex",
    "Ordered",
    "PositiveOrdered",
    "UnitVector",
    "SumToZero",
    "CholeskyFactorCorr",
    "CholeskyFactorCov",
    "CovMatrix",
    "CorrMatrix",
    "make_transform",
]

Array = Any  # numpy array, autograd ArrayBox or Python float

_LOG2 = math.log(2.0)


# --------------------------------------------------------------------------- numeric helpers


def _log_inv_logit(u: Array) -> Array:
    """log(inv_logit(u)) without overflow: -log1p(exp(-u))."""
    return -anp.logaddexp(0.0, -u)


def _log1m_inv_logit(u: Array) -> Array:
    """log(1 - inv_logit(u)) without overflow: -log1p(exp(u))."""
    return -anp.logaddexp(0.0, u)


def _log1m_tanh_sq(u: Array) -> Array:
    """log(1 - tanh(u)^2) = log(sech(u)^2), stable for any |u| (no log(0))."""
    a = anp.abs(u)
    return 2.0 * (_LOG2 - a - anp.log1p(anp.exp(-2.0 * a)))


def _sum_trailing(a: Array, n: int) -> Array:
    """Sum the last ``n`` axes (the parameter's remaining type axes)."""
    if n <= 0:
        return a
    nd = anp.ndim(a)
    if n > nd:
        raise ValueError(f"cannot sum {n} event axes of an array with {nd} axes")
    return anp.sum(a, axis=tuple(range(nd - n, nd)))


def _exclusive_cumsum(a: Array, axis: int = -1) -> Array:
    """Sum of the entries strictly before each position (first entry 0)."""
    c = anp.cumsum(a, axis=axis)
    return c - a


def _value(b: Array) -> np.ndarray:
    return np.asarray(getval(b), dtype=float)


def _is_const_scalar(b: Array, value: float) -> bool:
    v = _value(b)
    return bool(v.size > 0 and np.all(v == value))


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


# --------------------------------------------------------------------------- base class


class Transform:
    """One constraining transform.  ``core_ndim`` is how many constrained axes it consumes."""

    kind: str = ""
    support: str = "real"
    core_ndim: int = 0

    def unconstrained_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """Shape of the unconstrained slice for a constrained value of ``shape``."""
        return tuple(shape)

    def constrained_shape(self, ushape: tuple[int, ...]) -> tuple[int, ...]:
        """Inverse of :meth:`unconstrained_shape`."""
        return tuple(ushape)

    def forward(self, u: Array, event_ndim: int | None = None) -> tuple[Array, Array]:
        """Map ``u`` to ``(x, log|det J|)``, the latter summed over ``event_ndim`` type axes."""
        if event_ndim is None:
            event_ndim = self.core_ndim
        if event_ndim < self.core_ndim:
            raise ValueError(f"{self.kind} needs event_ndim >= {self.core_ndim}")
        x, lj = self._forward(u)
        return x, _sum_trailing(lj, event_ndim - self.core_ndim)

    def inverse(self, x: Array) -> np.ndarray:
        """Map a constrained value back to the unconstrained space (plain numpy)."""
        raise NotImplementedError

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        """Whether every element / event of ``x`` satisfies the constraint (up to ``tol``)."""
        return bool(np.all(~np.isnan(np.asarray(x, dtype=float))))

    def _forward(self, u: Array) -> tuple[Array, Array]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class Identity(Transform):
    """Unconstrained ``real``: x = u, log|J| = 0."""

    kind = "identity"
    support = "real"

    def _forward(self, u: Array) -> tuple[Array, Array]:
        return u, anp.zeros(anp.shape(u))

    def inverse(self, x: Array) -> np.ndarray:
        return np.asarray(x, dtype=float)


# --------------------------------------------------------------------------- bounds


def _bounds_forward(u: Array, lo: Array | None, hi: Array | None) -> tuple[Array, Array]:
    """Elementwise bounds where some entries of an array bound are infinite.

    Each element picks the lower / upper / lower-upper / identity branch; every branch is
    evaluated on "safe" inputs (the double-where trick) so discarded branches cannot inject NaN
    into the gradient.
    """
    shape = np.broadcast_shapes(
        anp.shape(u), () if lo is None else anp.shape(lo), () if hi is None else anp.shape(hi)
    )
    lo_f = np.zeros(shape, bool) if lo is None else np.broadcast_to(np.isfinite(_value(lo)), shape)
    hi_f = np.zeros(shape, bool) if hi is None else np.broadcast_to(np.isfinite(_value(hi)), shape)
    both, only_lo, only_hi = lo_f & hi_f, lo_f & ~hi_f, hi_f & ~lo_f
    lo_s = 0.0 if lo is None else anp.where(lo_f, lo, 0.0)
    hi_s = 0.0 if hi is None else anp.where(hi_f, hi, 0.0)

    ub = anp.where(both, u, 0.0)
    diff = anp.where(both, hi_s - lo_s, 1.0)
    x_b = lo_s + diff * expit(ub)
    lj_b = anp.log(diff) + _log_inv_logit(ub) + _log1m_inv_logit(ub)
    ul = anp.where(only_lo, u, 0.0)
    uh = anp.where(only_hi, u, 0.0)
    x_l = anp.exp(ul) + lo_s
    x_h = hi_s - anp.exp(uh)
    x = anp.where(both, x_b, anp.where(only_lo, x_l, anp.where(only_hi, x_h, u)))
    lj = anp.where(both, lj_b, anp.where(only_lo, ul, anp.where(only_hi, uh, 0.0)))
    return x, lj


def _bounds_inverse(x: Array, lo: Array | None, hi: Array | None) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    lo_v = np.full(x.shape, -np.inf) if lo is None else np.broadcast_to(_value(lo), x.shape)
    hi_v = np.full(x.shape, np.inf) if hi is None else np.broadcast_to(_value(hi), x.shape)
    lo_f, hi_f = np.isfinite(lo_v), np.isfinite(hi_v)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = (x - lo_v) / (hi_v - lo_v)
        u_b = np.log(p) - np.log1p(-p)
        u_l = np.log(x - lo_v)
        u_h = np.log(hi_v - x)
    return np.where(lo_f & hi_f, u_b, np.where(lo_f, u_l, np.where(hi_f, u_h, x)))


def _in_bounds(x: Array, lo: Array | None, hi: Array | None, tol: float) -> bool:
    x = np.asarray(x, dtype=float)
    ok = ~np.isnan(x)
    if lo is not None:
        ok = ok & (x >= _value(lo) - tol)
    if hi is not None:
        ok = ok & (x <= _value(hi) + tol)
    return bool(np.all(ok))


def _has_infinite(b: Array) -> bool:
    return not bool(np.all(np.isfinite(_value(b))))


class LowerBound(Transform):
    """``real<lower=a>``: x = exp(u) + a, log|J| = u."""

    kind = "lower"

    def __init__(self, lower: Array) -> None:
        self.lower = lower
        self._mixed = _has_infinite(lower)
        self.support = "positive" if _is_const_scalar(lower, 0.0) else "lower"

    def _forward(self, u: Array) -> tuple[Array, Array]:
        if self._mixed:
            return _bounds_forward(u, self.lower, None)
        x = anp.exp(u) + self.lower
        return x, u + anp.zeros(anp.shape(x))

    def inverse(self, x: Array) -> np.ndarray:
        return _bounds_inverse(x, self.lower, None)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        return _in_bounds(x, self.lower, None, tol)

    def __repr__(self) -> str:
        return f"LowerBound(lower={getval(self.lower)!r})"


class UpperBound(Transform):
    """``real<upper=b>``: x = b - exp(u), log|J| = u."""

    kind = "upper"
    support = "upper"

    def __init__(self, upper: Array) -> None:
        self.upper = upper
        self._mixed = _has_infinite(upper)

    def _forward(self, u: Array) -> tuple[Array, Array]:
        if self._mixed:
            return _bounds_forward(u, None, self.upper)
        x = self.upper - anp.exp(u)
        return x, u + anp.zeros(anp.shape(x))

    def inverse(self, x: Array) -> np.ndarray:
        return _bounds_inverse(x, None, self.upper)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        return _in_bounds(x, None, self.upper, tol)

    def __repr__(self) -> str:
        return f"UpperBound(upper={getval(self.upper)!r})"


class LowerUpperBound(Transform):
    """``real<lower=a, upper=b>``: x = a + (b - a) inv_logit(u).

    log|J| = log(b - a) + log_inv_logit(u) + log1m_inv_logit(u), each term in log-sigmoid form
    so |u| in the hundreds gives finite values, never NaN.
    """

    kind = "lower_upper"

    def __init__(self, lower: Array, upper: Array) -> None:
        self.lower = lower
        self.upper = upper
        self._mixed = _has_infinite(lower) or _has_infinite(upper)
        unit = _is_const_scalar(lower, 0.0) and _is_const_scalar(upper, 1.0)
        self.support = "unit" if unit else "interval"

    def _forward(self, u: Array) -> tuple[Array, Array]:
        if self._mixed:
            return _bounds_forward(u, self.lower, self.upper)
        diff = self.upper - self.lower
        x = self.lower + diff * expit(u)
        lj = anp.log(diff) + _log_inv_logit(u) + _log1m_inv_logit(u)
        return x, lj + anp.zeros(anp.shape(x))

    def inverse(self, x: Array) -> np.ndarray:
        return _bounds_inverse(x, self.lower, self.upper)

    def in_support(self, x: Array, tol: float = 1e-8) -> bool:
        return _in_bounds(x, self.lower, self.upper, tol)

    def __repr__(self) -> str:
        return f"LowerUpperBound(lower={getval(self.lower)!r}, upper={getval(self.upper)!r})"


class OffsetMultiplier(Transform):
    """``<offset=m, multiplier=s>``: x = m + s u, log|J| = log s (non-centred parametrisation)."""

    kind = "offset_multiplier"
    support = "real"

    def __init__(self, offset: Array = 0.0, multiplier: Array = 1.0) -> None:
        self.offset = offset
        self.multiplier = multiplier

    def _forward(self, u: Array) -> tuple[Array, Array]:
        x = self.offset + self.multiplier * u
        return x, anp.log(self.multiplier) + anp.zeros(anp.shape(x))

    def inverse(self, x: Array) -> np.ndarray:
        return (np.asarray(x, dtype=float) - _value(self.offset)) / _value(self.multiplier)

    def __repr__(self) -> str:
        return (
            f"OffsetMultiplier(offset={getval(self.offset)!r}, "
            f"multiplier={getval(self.multiplier)!r})"
        )


# --------------------------------------------------------------------------- vector transforms


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
        log_z = _log_inv_logit(adj)
        log_1mz = _log1m_inv_logit(adj)
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


# --------------------------------------------------------------------------- matrix transforms


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


# --------------------------------------------------------------------------- factory

TRANSFORM_KINDS = (
    "identity",
    "lower",
    "upper",
    "lower_upper",
    "offset_multiplier",
    "simplex",
    "ordered",
    "positive_ordered",
    "unit_vector",
    "sum_to_zero_vector",
    "cholesky_factor_corr",
    "cholesky_factor_cov",
    "cov_matrix",
    "corr_matrix",
)

_SIMPLE = {
    "simplex": Simplex,
    "ordered": Ordered,
    "positive_ordered": PositiveOrdered,
    "unit_vector": UnitVector,
    "sum_to_zero_vector": SumToZero,
    "cholesky_factor_corr": CholeskyFactorCorr,
    "cov_matrix": CovMatrix,
    "corr_matrix": CorrMatrix,
}


def _is_const(b: Array) -> bool:
    """True for plain floats / arrays, False for values traced by autograd."""
    return getval(b) is b


def _all_equal(b: Array, value: float) -> bool:
    v = _value(b)
    return bool(np.all(v == value))


def make_transform(
    kind: str,
    *,
    lower: Array | None = None,
    upper: Array | None = None,
    offset: Array | None = None,
    multiplier: Array | None = None,
    shape: tuple[int, int] | None = None,
    check: bool = True,
) -> Transform:
    """Build the transform for a declaration; bounds may be floats, arrays or autograd boxes.

    For "identity", "lower", "upper" and "lower_upper" the class is chosen from the bounds that
    are actually present and finite (a bound of -inf/+inf everywhere is dropped), so e.g.
    ``make_transform("lower_upper", lower=-inf, upper=1.0)`` is an :class:`UpperBound`.
    Constant bounds are checked here (lower < upper, multiplier > 0) unless ``check=False``;
    traced (autograd-boxed) bounds never are, since a bad draw must not abort the optimiser.
    ``shape=(M, N)`` is only for non-square ``cholesky_factor_cov``.
    """
    if kind not in TRANSFORM_KINDS:
        raise ModelError(f"unknown constraint transform {kind!r}")
    if kind in ("identity", "lower", "upper", "lower_upper"):
        if offset is not None or multiplier is not None:
            raise ModelError("offset/multiplier cannot be combined with lower/upper bounds")
        if lower is not None and _all_equal(lower, np.inf):
            raise ModelError("lower bound cannot be +inf")
        if upper is not None and _all_equal(upper, -np.inf):
            raise ModelError("upper bound cannot be -inf")
        if lower is not None and _all_equal(lower, -np.inf):
            lower = None
        if upper is not None and _all_equal(upper, np.inf):
            upper = None
        if lower is not None and upper is not None:
            lo, hi = _value(lower), _value(upper)
            if check and _is_const(lower) and _is_const(upper) and np.any(lo >= hi):
                raise ModelError(
                    f"lower bound must be less than upper bound, got lower={lo}, upper={hi}"
                )
            return LowerUpperBound(lower, upper)
        if lower is not None:
            return LowerBound(lower)
        if upper is not None:
            return UpperBound(upper)
        return Identity()
    if lower is not None or upper is not None:
        raise ModelError(f"{kind} does not take lower/upper bounds")
    if kind == "offset_multiplier":
        if offset is None and multiplier is None:
            return Identity()
        offset = 0.0 if offset is None else offset
        multiplier = 1.0 if multiplier is None else multiplier
        if check and _is_const(offset) and not np.all(np.isfinite(_value(offset))):
            raise ModelError(f"offset must be finite, got {_value(offset)}")
        m = _value(multiplier)
        if check and _is_const(multiplier) and not np.all(np.isfinite(m) & (m > 0)):
            raise ModelError(f"multiplier must be positive and finite, got {m}")
        return OffsetMultiplier(offset, multiplier)
    if offset is not None or multiplier is not None:
        raise ModelError(f"{kind} does not take offset/multiplier")
    if kind == "cholesky_factor_cov":
        return CholeskyFactorCov(shape)
    return _SIMPLE[kind]()


def transform_kind(spec: ast.TypeSpec) -> str:
    """The constraining transform a declaration implies: make_transform's kind."""
    if spec.kind in ("int", "real", "vector", "row_vector", "matrix"):
        b = spec.bounds
        if "offset" in b or "multiplier" in b:
            return "offset_multiplier"
        if "lower" in b and "upper" in b:
            return "lower_upper"
        if "lower" in b:
            return "lower"
        if "upper" in b:
            return "upper"
        return "identity"
    return spec.kind
