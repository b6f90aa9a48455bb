"""Shared pieces of the deterministic (fixed-draw) stages: L-BFGS that keeps its best point, the
treatment of draws outside the support, and the common-random-numbers rule that decides whether
a polished fit replaces the stochastic one."""

from __future__ import annotations

from collections.abc import Callable

import autograd.numpy as anp
import numpy as np
from autograd import value_and_grad

from ppl.inference.lbfgs import lbfgs

_OUTSIDE_PENALTY = 100.0


def guarded_mean(log_joint: Callable, zeta) -> object:
    """Mean log density where draws with a non-finite value count as the worst finite one minus
    a penalty, instead of making the whole objective infinite (a hard wall that makes the
    optimiser shrink q's scales to nothing, e.g. near a region where a Cholesky factor fails)."""
    raw = np.asarray(getattr(zeta, "_value", zeta))
    with np.errstate(all="ignore"):
        values = np.asarray(log_joint(raw), dtype=float)
    ok = np.isfinite(values)
    if ok.all():
        return anp.mean(log_joint(zeta))
    if not ok.any():
        return -np.inf
    good = log_joint(zeta[np.flatnonzero(ok)])
    penalty = (np.min(values[ok]) - _OUTSIDE_PENALTY) * np.sum(~ok)
    return (anp.sum(good) + penalty) / len(values)


def minimise(
    negative_objective: Callable,
    theta0: np.ndarray,
    *,
    max_iter: int = 2000,
    ftol: float = 1e-13,
    gtol: float = 1e-9,
    numpy_lbfgs: bool = False,
    callback: Callable[[int, float], None] | None = None,
    stop: Callable[[], bool] | None = None,
    stall: tuple[int, float] | None = None,
):
    """L-BFGS on an autograd objective; returns (optimiser's result, best theta, best value).

    Non-finite values or gradients count as +inf with a zero gradient (the line search backs
    off); the best finite point seen is returned even when the search ends abnormally. The
    optimiser is scipy's L-BFGS-B (imported here, at the first call), or with `numpy_lbfgs`
    ppl.inference.lbfgs, which `auto`'s road uses so that `ppl fit` need not import
    scipy.optimize at all. The stochastic road's polish keeps scipy's, so that its numbers stay
    as they were (the numpy one there: arK full-rank ADVI 30,116 gradients instead of 28,324,
    the same accuracy). `callback(iteration, value)` after every iteration of the numpy one;
    `stop()` True ends the numpy one (a gradient budget spent), as does `stall` (its rule).
    """
    objective = value_and_grad(negative_objective)
    best = {"value": np.inf, "theta": None}

    def fun(theta):
        if stop is not None and stop():  # the budget is spent: no more evaluations
            return np.inf, np.zeros_like(theta)
        with np.errstate(all="ignore"):
            value, grad = objective(theta)
        value = float(value)
        if not np.isfinite(value) or not np.all(np.isfinite(grad)):
            return np.inf, np.zeros_like(theta)
        if value < best["value"]:
            best["value"], best["theta"] = value, np.array(theta, dtype=float)
        return value, grad

    theta0 = np.asarray(theta0, dtype=float)
    with np.errstate(all="ignore"):
        if numpy_lbfgs:
            opt = lbfgs(fun, theta0, max_iter=max_iter, ftol=ftol, gtol=gtol, callback=callback,
                        stop=stop, stall=stall)  # fmt: skip
        else:
            from scipy.optimize import minimize

            options = {"maxiter": max_iter, "maxcor": 30, "ftol": ftol, "gtol": gtol}
            opt = minimize(fun, theta0, jac=True, method="L-BFGS-B", options=options)
    return opt, best["theta"], best["value"]


def reached_optimum(opt) -> bool:
    """Converged, or a line search that stalled with a tiny gradient (stalled at the optimum)."""
    grad_norm = float(np.max(np.abs(opt.jac))) if np.all(np.isfinite(opt.jac)) else np.inf
    return bool(opt.success) or grad_norm < 1e-4 * max(1.0, abs(float(opt.fun)))


def not_worse(new_terms: np.ndarray, old_terms: np.ndarray) -> bool:
    """Keep the new fit unless its ELBO on common random numbers is lower by > 2 standard errors."""
    if not np.all(np.isfinite(new_terms)):
        return False
    if not np.all(np.isfinite(old_terms)):
        return True
    diff = new_terms - old_terms
    return bool(np.mean(diff) > -2 * np.std(diff) / np.sqrt(len(diff)))
