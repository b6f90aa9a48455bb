"""Bounded and affinely transformed reals: ``<lower=a>``, ``<upper=b>``, ``<lower=a, upper=b>``
(bounds constant or depending on parameters, scalar or elementwise, possibly infinite in places)
and ``<offset=o, multiplier=m>``."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd.tracer import getval

from ppl.library.special import expit
from ppl.library.transform_base import (
    Array,
    Transform,
    log1m_inv_logit,
    log_inv_logit,
    plain_value,
)


def _is_const_scalar(b: Array, value: float) -> bool:
    v = plain_value(b)
    return bool(v.size > 0 and np.all(v == value))


def _bounds_forward(u: Array, lo: Array | None, hi: Array | None) -> tuple[Array, Array]:
    """Elementwise bounds where some entries of an array bound are infinite.

    Each element picks the lower / upper / lower-upper / identity branch; every branch is
    evaluated on "safe" inputs (the double-where trick) so discarded branches cannot inject NaN
    into the gradient.
    """
    shape = np.broadcast_shapes(
        anp.shape(u), () if lo is None else anp.shape(lo), () if hi is None else anp.shape(hi)
    )
    lo_f = (
        np.zeros(shape, bool)
        if lo is None
        else np.broadcast_to(np.isfinite(plain_value(lo)), shape)
    )
    hi_f = (
        np.zeros(shape, bool)
        if hi is None
        else np.broadcast_to(np.isfinite(plain_value(hi)), shape)
    )
    both, only_lo, only_hi = lo_f & hi_f, lo_f & ~hi_f, hi_f & ~lo_f
    lo_s = 0.0 if lo is None else anp.where(lo_f, lo, 0.0)
    hi_s = 0.0 if hi is None else anp.where(hi_f, hi, 0.0)

    ub = anp.where(both, u, 0.0)
    diff = anp.where(both, hi_s - lo_s, 1.0)
    x_b = lo_s + diff * expit(ub)
    lj_b = anp.log(diff) + log_inv_logit(ub) + log1m_inv_logit(ub)
    ul = anp.where(only_lo, u, 0.0)
    uh = anp.where(only_hi, u, 0.0)
    x_l = anp.exp(ul) + lo_s
    x_h = hi_s - anp.exp(uh)
    x = anp.where(both, x_b, anp.where(only_lo, x_l, anp.where(only_hi, x_h, u)))
    lj = anp.where(both, lj_b, anp.where(only_lo, ul, anp.where(only_hi, uh, 0.0)))
    return x, lj


def _bounds_inverse(x: Array, lo: Array | None, hi: Array | None) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    lo_v = np.full(x.shape, -np.inf) if lo is None else np.broadcast_to(plain_value(lo), x.shape)
    hi_v = np.full(x.shape, np.inf) if hi is None else np.broadcast_to(plain_value(hi), x.shape)
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
        ok = ok & (x >= plain_value(lo) - tol)
    if hi is not None:
        ok = ok & (x <= plain_value(hi) + tol)
    return bool(np.all(ok))


def _has_infinite(b: Array) -> bool:
    return not bool(np.all(np.isfinite(plain_value(b))))


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
        lj = anp.log(diff) + log_inv_logit(u) + log1m_inv_logit(u)
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
        return (np.asarray(x, dtype=float) - plain_value(self.offset)) / plain_value(
            self.multiplier
        )

    def __repr__(self) -> str:
        return (
            f"OffsetMultiplier(offset={getval(self.offset)!r}, "
            f"multiplier={getval(self.multiplier)!r})"
        )
