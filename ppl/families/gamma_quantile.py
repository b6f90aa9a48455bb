"""The standard gamma quantile x = F^{-1}(u; a, 1) warm-started from its last value at the same
uniforms: on fixed draws (ppl.inference.saa) u never changes within a solve and the shapes move
a little per step, so a Halley step or two from the previous x (moved by the last d log x / da)
replaces scipy's `gammaincinv` (~3.5 us an element, a cold start and 3-4 Halley steps inside;
27-35% of the edge partition model's fit). Cold starts, and any element that does not converge
in HALLEY_STEPS, are `gammaincinv`'s.

Halley's method on t = log x for g(t) = P(a, e^t) - u, where g' = x f(x) = exp(a t - x -
lgamma(a)), g'' = g' (a - x): its error after a step of size d is about |K| d^3, K = -(a - x)^2 /
12 - x / 6, and a step is accepted as the last one when that is below TOL (P from `gammainc`, or
1 - Q from `gammaincc` where u > UPPER, so the upper tail keeps its relative precision).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
from scipy.special import gammainc, gammaincc, gammaincinv, gammaln

#: Halley steps tried from a warm start before an element falls back to gammaincinv.
HALLEY_STEPS = 4
#: A step of size d ends the iteration when the next error, |K| d^3, is below TOL (in log x).
TOL = 1e-14
#: ... and it is at most this large (the error bound is asymptotic).
MAX_LAST_STEP = 1e-3
#: Above this u, P - u is taken as (1 - u) - Q (`gammaincc`, 5x slower than `gammainc` here):
#: P's absolute error, ~1e-16, is then at most 1e-14 of 1 - u.
UPPER = 0.99
#: ... and above 1/2 where dP / dt is below FLAT (a small shape: P's rounding is x f(x) times
#: as much in t; with P at a = 1e-4, u = 0.98, x was 1.7e-11 off, with Q 2e-14).
FLAT = 1e-2
#: Warm starts kept (one per array of uniforms: a fixed-draw fit has one per gamma block), the
#: largest array cached (4000 output draws of 936 latents are drawn once, not solved on), and
#: the elements kept in all (4 arrays of float64 each: 64 MB).
CACHE_ENTRIES, CACHE_MAX_SIZE, CACHE_TOTAL = 64, 1 << 18, 1 << 21


class _WarmStarts:
    """u (by value) -> (a, log x, d log x / da or None) of the last quantile at those u."""

    def __init__(self):
        self.entries: OrderedDict = OrderedDict()

    @staticmethod
    def key(u: np.ndarray):
        return u.shape, hash(u.tobytes())

    def get(self, u: np.ndarray):
        if u.size > CACHE_MAX_SIZE:
            return None
        key = self.key(u)
        entry = self.entries.get(key)
        if entry is None or not np.array_equal(entry[0], u):
            return None
        self.entries.move_to_end(key)
        return entry[1:]

    def put(self, u: np.ndarray, a: np.ndarray, log_x: np.ndarray, slope=None) -> None:
        if u.size > CACHE_MAX_SIZE:
            return
        key = self.key(u)
        self.entries[key] = (u.copy(), a.copy(), log_x.copy(), None if slope is None else
                             np.array(slope, dtype=float))  # fmt: skip
        self.entries.move_to_end(key)
        total = sum(entry[0].size for entry in self.entries.values())
        while len(self.entries) > CACHE_ENTRIES or total > CACHE_TOTAL:
            total -= self.entries.popitem(last=False)[1][0].size

    def slope(self, u: np.ndarray, a: np.ndarray, slope: np.ndarray) -> None:
        """Record d log x / da at the cached point for the next warm start, when that point's
        shapes are `a`."""
        entry = self.get(u)
        if entry is not None and np.array_equal(entry[0], a):
            self.put(u, a, entry[1], slope)

    def clear(self) -> None:
        self.entries.clear()


WARM = _WarmStarts()


def halley(a: np.ndarray, u: np.ndarray, t: np.ndarray, lgamma_a: np.ndarray):
    """Halley steps on t = log x from `t` (1-D arrays, x a normal double); (t, converged)."""
    t = t.copy()
    done = np.zeros(t.shape, dtype=bool)
    todo = np.arange(len(t))
    with np.errstate(all="ignore"):
        for _ in range(HALLEY_STEPS):
            if not len(todo):
                break
            at, tt, ut = a[todo], t[todo], u[todo]
            x = np.exp(tt)
            slope = np.exp(at * tt - x - lgamma_a[todo])  # dP / dt = x f(x)
            # P - u, from Q in the upper tail and where P's rounding would move t by > 1e-14
            g, up = np.empty_like(x), (ut > UPPER) | ((ut > 0.5) & (slope < FLAT))
            g[up] = (1.0 - ut[up]) - gammaincc(at[up], x[up])
            g[~up] = gammainc(at[~up], x[~up]) - ut[~up]
            newton = -g / slope
            h = -0.5 * newton * (at - x)  # Halley's correction; Newton's step where it is large
            d = np.where(np.abs(h) < 0.5, newton / (1.0 - h), np.clip(newton, -1.0, 1.0))
            finite = np.isfinite(d)
            t[todo] = np.where(finite, tt + d, tt)
            err = np.abs((at - x) ** 2 / 12 + x / 6) * np.abs(d) ** 3
            ok = finite & (np.abs(d) <= MAX_LAST_STEP) & (np.abs(h) < 0.1) & (err <= TOL)
            done[todo[ok]] = True
            todo = todo[~(ok | ~finite)]  # converged, or given up (gammaincinv's)
    return t, done & np.isfinite(t)


def std_quantile_log(a: np.ndarray, u: np.ndarray, small_x: float) -> np.ndarray:
    """log x for x = F^{-1}(u; a, 1), a and u float arrays of one shape, u in (0, 1). Below
    log(small_x) the exact small-x relation log x = (log u + lgamma(a + 1)) / a (a lower bound
    of log x, exact to O(x / a) there); above it, gammaincinv's x, by Halley steps from the last
    solution at the same u when there is one."""
    with np.errstate(all="ignore"):
        log_small = (np.log(u) + gammaln(a + 1.0)) / a
    small = ~(log_small >= np.log(small_x))
    log_x = np.where(small, log_small, 0.0)
    rest = np.flatnonzero(~small.ravel())
    if not len(rest):
        WARM.put(u, a, log_x)
        return log_x
    af, uf = a.ravel()[rest], u.ravel()[rest]
    solved = np.zeros(len(rest), dtype=bool)
    t = np.zeros(len(rest))
    warm = WARM.get(u)
    if warm is not None:
        a0, t0, slope = (w.ravel()[rest] if w is not None else None for w in warm)
        start = t0 if slope is None else t0 + slope * (af - a0)
        start = np.where(np.isfinite(start) & (t0 >= np.log(small_x)), start, t0)
        t, solved = halley(af, uf, start, gammaln(af))
    cold = np.flatnonzero(~solved)
    if len(cold):
        with np.errstate(all="ignore"):
            x = gammaincinv(af[cold], uf[cold])
            t[cold] = np.log(np.maximum(x, small_x))  # (x below small_x: a NaN or a rounding)
    out = log_x.ravel().copy()
    out[rest] = t
    out = out.reshape(a.shape)
    WARM.put(u, a, out)
    return out
