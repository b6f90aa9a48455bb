"""Truncation `y ~ dist(...) T[L, U]`: the density renormalised over [L, U] (Stan's semantics).

log p(y) = dist_lpdf(y | ...) - log(F(U) - F(L)) for L <= y <= U and -inf outside; T[L, ]
subtracts lccdf(L), T[, U] lcdf(U). For a discrete distribution Pr[L <= y] = 1 - F(L - 1).
The bounds become extra parameters of a wrapping distribution, so they broadcast and are
differentiated like any other argument (they may be parameters).
"""

from __future__ import annotations

from typing import Any

import autograd.numpy as np

from .base import Distribution, where, where_support
from .cdfs import CDFS

_LOG_HALF = float(np.log(0.5))


def _log_diff_exp(a: Any, b: Any) -> Any:
    """log(exp(a) - exp(b)) for a >= b; -inf where they are equal (an empty interval)."""
    d = where(a > b, b - a, -1.0)
    out = a + where(d > -0.693147, np.log(-np.expm1(d)), np.log1p(-np.exp(d)))
    return where(a > b, out, -np.inf)


class Truncated(Distribution):
    """`base` restricted to [lower, upper]; either bound may be absent."""

    def __init__(self, base: Distribution, lower: bool, upper: bool) -> None:
        self.base = base
        self.lower, self.upper = lower, upper
        self.name = base.name
        bounds = (("lower",) if lower else ()) + (("upper",) if upper else ())
        self.params = base.params + bounds
        self.param_ndims = base.param_ndims + (0,) * len(bounds)
        self.discrete = base.discrete
        self.support = base.support
        self.has_rng = False

    def log_normaliser(self, params: tuple, lo: Any, hi: Any) -> Any:
        """log Pr[lo <= Y <= hi] under the base distribution."""
        lcdf, lccdf = CDFS[self.base.name]
        below = lo - 1.0 if (self.discrete and lo is not None) else lo
        if lo is None:
            return lcdf(hi, *params)
        if hi is None:
            return lccdf(below, *params)
        lcdf_lo = lcdf(below, *params)
        upper_tail = lcdf_lo > _LOG_HALF  # then 1 - F is the better-resolved side
        via_ccdf = _log_diff_exp(lccdf(below, *params), lccdf(hi, *params))
        via_cdf = _log_diff_exp(lcdf(hi, *params), lcdf_lo)
        return where(upper_tail, via_ccdf, via_cdf)

    def _log_prob(self, y: Any, *args: Any) -> Any:
        n = len(self.base.params)
        params, bounds = args[:n], list(args[n:])
        lo = bounds.pop(0) if self.lower else None
        hi = bounds.pop(0) if self.upper else None
        inside = True
        if lo is not None:
            inside = inside & (y >= lo)
        if hi is not None:
            inside = inside & (y <= hi)
        lp = self.base._log_prob(y, *params) - self.log_normaliser(params, lo, hi)
        return where_support(inside, lp)


def truncated(base: Distribution, args: list, bounds: tuple) -> tuple[Distribution, list]:
    """The distribution and argument list a truncated `~` statement evaluates."""
    lo, hi = bounds
    extra = [e for e in (lo, hi) if e is not None]
    return Truncated(base, lo is not None, hi is not None), list(args) + extra
