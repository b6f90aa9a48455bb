"""L-BFGS with a strong-Wolfe line search, in numpy: the deterministic road's optimiser.

scipy's L-BFGS-B would do, but importing `scipy.optimize` (and the `scipy.linalg` and
`scipy.sparse` it pulls in) costs about 0.2 s at every start of `ppl fit`, a fifth of the
one-second budget of a small fit. The algorithm is the textbook one (Nocedal & Wright,
Numerical Optimization, 2nd ed.: the two-loop recursion, Algorithm 7.4, with the initial
inverse Hessian s'y / y'y I, eq. 7.20; the line search of Algorithms 3.5 and 3.6 with cubic
interpolation), with L-BFGS-B's conventions where they differ: sufficient decrease 1e-3 and
curvature 0.9, a first step of length 1 and unit steps after it, at most 20 evaluations per
line search, and its two stopping rules, (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol
and max |g_i| <= gtol.

A non-finite value counts as too high: the line search backs off from it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

#: L-BFGS-B's line-search constants: sufficient decrease, curvature, evaluations per search.
DECREASE, CURVATURE, MAX_LINE_EVALS = 1e-3, 0.9, 20


@dataclass
class InverseHessian:
    """The L-BFGS approximation of the inverse Hessian, as a product with vectors."""

    pairs: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # (s, y), oldest first

    def matvec(self, v: np.ndarray) -> np.ndarray:
        q = np.array(v, dtype=float)
        if not self.pairs:
            return q
        alphas = []
        for s, y in reversed(self.pairs):
            a = (s @ q) / (y @ s)
            alphas.append(a)
            q -= a * y
        s, y = self.pairs[-1]
        q *= (s @ y) / (y @ y)
        for (s, y), a in zip(self.pairs, reversed(alphas), strict=True):
            q += (a - (y @ q) / (y @ s)) * s
        return q


@dataclass
class LBFGSResult:
    x: np.ndarray
    fun: float
    jac: np.ndarray
    nit: int
    nfev: int
    success: bool
    message: str
    hess_inv: InverseHessian


def lbfgs(
    fun: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0: np.ndarray,
    *,
    max_iter: int = 1000,
    memory: int = 30,
    ftol: float = 2.2e-9,
    gtol: float = 1e-5,
    callback: Callable[[int, float], None] | None = None,
    stop: Callable[[], bool] | None = None,
    stall: tuple[int, float] | None = None,
) -> LBFGSResult:
    """Minimise fun (returning value and gradient) from x0; `callback(iteration, value)` after
    every iteration; `stop()` True ends it before the next (a gradient budget spent); `stall`
    = (W, delta) ends it, converged, when the last W iterations lowered f by less than delta
    (a number, or a function giving it now) in all (a creep along a flat ridge that ftol, per
    iteration, does not see)."""
    x = np.array(x0, dtype=float)
    f, g = _evaluate(fun, x)
    history = deque(maxlen=stall[0] + 1 if stall else 1)
    nfev, nit = 1, 0
    pairs: deque = deque(maxlen=memory)
    hess_inv = InverseHessian()
    message, success = "iteration limit reached", False
    if not np.isfinite(f):
        return LBFGSResult(x, f, g, 0, nfev, False, "non-finite value at the start", hess_inv)
    while True:
        if np.max(np.abs(g), initial=0.0) <= gtol:
            message, success = "gradient below gtol", True
            break
        if nit >= max_iter:
            break
        if stop is not None and stop():
            message = "the gradient budget was spent"
            break
        hess_inv.pairs = list(pairs)
        d = -hess_inv.matvec(g)
        if not g @ d < 0:  # not a descent direction: forget the curvature pairs
            pairs.clear()
            d = -g
        step = 1.0 if pairs else 1.0 / np.linalg.norm(g)  # L-BFGS-B's: a first step of length 1
        found, evals = _line_search(fun, x, f, g, d, step)
        nfev += evals
        if found is None:
            if pairs:  # retry along the steepest descent before giving up
                pairs.clear()
                continue
            message = "the line search found no lower point"
            break
        x_new, f_new, g_new = found
        s, y = x_new - x, g_new - g
        if s @ y > 1e-10 * (y @ y):
            pairs.append((s, y))
        nit += 1
        gain = (f - f_new) / max(abs(f), abs(f_new), 1.0)
        x, f, g = x_new, f_new, g_new
        if callback is not None:
            callback(nit, f)
        if gain <= ftol:
            message, success = "relative reduction of f below ftol", True
            break
        history.append(f)
        delta = None if stall is None else (stall[1]() if callable(stall[1]) else stall[1])
        if stall is not None and len(history) == history.maxlen and history[0] - f < delta:
            message, success = f"f fell by less than {delta:g} in {stall[0]} iterations", True
            break
    hess_inv.pairs = list(pairs)
    return LBFGSResult(x, f, g, nit, nfev, success, message, hess_inv)


def _evaluate(fun, x):
    value, grad = fun(x)
    value = float(value)
    grad = np.asarray(grad, dtype=float)
    if not np.isfinite(value) or not np.all(np.isfinite(grad)):
        return np.inf, np.zeros_like(x)
    return value, grad


def _line_search(fun, x, f0, g0, d, step):
    """A step along d meeting the strong Wolfe conditions (or, when the evaluations run out,
    the lowest point with sufficient decrease): ((x, f, g), evaluations), or (None, evals)."""
    slope0 = float(g0 @ d)
    evals = 0

    def at(a):
        nonlocal evals
        evals += 1
        f, g = _evaluate(fun, x + a * d)
        return f, g, float(g @ d) if np.isfinite(f) else np.nan

    def decreases(a, f):
        return np.isfinite(f) and f <= f0 + DECREASE * a * slope0

    lo = (0.0, f0, g0, slope0)  # the best step so far with sufficient decrease
    hi = None
    a = step
    while evals < MAX_LINE_EVALS:  # bracketing
        f, g, slope = at(a)
        if not decreases(a, f) or f >= lo[1] and lo[0] > 0:
            hi = (a, f, g, slope)
            break
        if abs(slope) <= -CURVATURE * slope0:
            return (x + a * d, f, g), evals
        if slope >= 0:
            hi, lo = lo, (a, f, g, slope)
            break
        lo = (a, f, g, slope)
        a *= 4.0
    while hi is not None and evals < MAX_LINE_EVALS:  # zoom
        a = _interpolate(lo, hi)
        f, g, slope = at(a)
        if not decreases(a, f) or f >= lo[1]:
            hi = (a, f, g, slope)
            continue
        if abs(slope) <= -CURVATURE * slope0:
            return (x + a * d, f, g), evals
        if slope * (hi[0] - lo[0]) >= 0:
            hi = lo
        lo = (a, f, g, slope)
    if lo[0] > 0:
        return (x + lo[0] * d, lo[1], lo[2]), evals
    return None, evals


def _interpolate(lo, hi) -> float:
    """The minimiser of the cubic through both ends' values and slopes, kept in the middle
    80% of the interval (bisection when the far end is not finite)."""
    (a0, f0, _, s0), (a1, f1, _, s1) = lo, hi
    width = a1 - a0
    if np.isfinite(f1) and np.isfinite(s1):
        d1 = s0 + s1 - 3 * (f0 - f1) / (a0 - a1)
        radicand = d1 * d1 - s0 * s1
        if radicand >= 0:
            d2 = np.copysign(np.sqrt(radicand), a1 - a0)
            denominator = s1 - s0 + 2 * d2
            if denominator != 0:
                a = a1 - (a1 - a0) * (s1 + d2 - d1) / denominator
                low, high = sorted((a0 + 0.1 * width, a1 - 0.1 * width))
                if np.isfinite(a):
                    return float(min(max(a, low), high))
    return a0 + 0.5 * width
