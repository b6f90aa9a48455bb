"""Dormand-Prince 5(4) for many independent ODE systems at once, each with its own step size.

A fit solves one ODE per Monte Carlo draw. As one stacked system (scipy's solve_ivp) every draw
takes the step of the hardest one; here each draw keeps its own time, step and error control,
and one call of the right-hand side per stage serves all of them. Steps are cut to land on the
output times (no interpolation). Error control is Boost odeint's (Stan's rk45): the largest
|error| / (atol + rtol |z|) over the first `control` components; ppl.library.ode passes the states,
not
their sensitivities, so that a value and its gradient come from the same steps (the log density
of a draw does not depend on whether it is being differentiated). A draw that
needs more than `max_steps` steps between two output times, or whose state stops being finite,
is given NaN from there on: the caller rejects that draw, as Stan rejects it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

_C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
_A = [
    [],
    [1 / 5],
    [3 / 40, 9 / 40],
    [44 / 45, -56 / 15, 32 / 9],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
]
_B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
#: fifth- minus fourth-order weights, the last for the first-same-as-last stage f(t + h, z_new)
_E = np.array([-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
_SAFETY, _SHRINK, _GROW = 0.9, 0.2, 5.0


def integrate(f: Callable[[np.ndarray, np.ndarray], np.ndarray], z0: np.ndarray, t0: float,
              ts: np.ndarray, rtol: float, atol: float, max_steps: int,
              control: int | None = None) -> np.ndarray:  # fmt: skip
    """z at the times `ts` (increasing, >= t0) of dz/dt = f(t, z), for S systems at once:
    `z0` (S, W), `f(t (S,), z (S, W)) -> (S, W)`. Returns (S, T, W); a failed system's rows
    are NaN from the first output time it did not reach."""
    z = np.array(z0, dtype=float)
    S, W = z.shape
    T = len(ts)
    out = np.full((S, T, W), np.nan)
    t = np.full(S, float(t0))
    idx = np.zeros(S, dtype=int)
    steps = np.zeros(S, dtype=int)
    active = np.ones(S, dtype=bool)
    # outputs at t0 itself
    while True:
        here = active & (ts[np.minimum(idx, T - 1)] <= t)
        if not here.any():
            break
        out[here, idx[here]] = z[here]
        idx[here] += 1
        active &= idx < T
    k1 = f(t, z)
    c = slice(0, control)
    h = _initial_step(z[:, c], k1[:, c], rtol, atol, ts[np.minimum(idx, T - 1)] - t)
    ks = [None] * 7
    while active.any():
        target = ts[np.minimum(idx, T - 1)]
        gap = target - t
        land = active & (h >= gap * (1 - 1e-12))
        step = np.where(active, np.where(land, gap, h), 0.0)
        ks[0] = k1
        for i in range(1, 6):
            dz = sum(a * ks[j] for j, a in enumerate(_A[i]))
            ks[i] = f(t + _C[i] * step, z + step[:, None] * dz)
        z_new = z + step[:, None] * sum(b * ks[j] for j, b in enumerate(_B) if b)
        ks[6] = f(t + step, z_new)
        error = step[:, None] * sum(e * ks[j] for j, e in enumerate(_E) if e)
        c = slice(0, control)
        scale = atol + rtol * np.maximum(np.abs(z[:, c]), np.abs(z_new[:, c]))
        with np.errstate(invalid="ignore", over="ignore"):
            norm = np.max(np.abs(error[:, c]) / scale, axis=1)
        norm = np.where(np.isfinite(norm) & np.all(np.isfinite(ks[6]), axis=1), norm, np.inf)
        accept = active & (norm <= 1.0)
        with np.errstate(divide="ignore"):
            factor = np.clip(_SAFETY * norm**-0.2, _SHRINK, _GROW)
        factor = np.where(np.isfinite(norm), factor, _SHRINK)
        steps += active
        # accepted: move on (first same as last: f(t + h, z_new) is the next step's first stage)
        t = np.where(accept, np.where(land, target, t + step), t)
        z[accept] = z_new[accept]
        k1 = np.where(accept[:, None], ks[6], k1)
        reached = accept & land
        out[reached, idx[reached]] = z[reached]
        idx[reached] += 1
        steps[reached] = 0
        grown = np.where(step > 0, step * factor, h)
        h = np.where(reached, np.maximum(grown, h), np.where(active, grown, h))
        active &= idx < T
        stuck = active & ((steps > max_steps) | (h <= 1e-14 * np.maximum(np.abs(t), 1.0)))
        active &= ~stuck
    return out


def _initial_step(z: np.ndarray, f0: np.ndarray, rtol: float, atol: float,
                  span: np.ndarray) -> np.ndarray:  # fmt: skip
    """Hairer, Norsett & Wanner's first guess, 0.01 |z| / |f| in the error's units, per system."""
    scale = atol + rtol * np.abs(z)
    d0 = np.sqrt(np.mean((z / scale) ** 2, axis=1))
    d1 = np.sqrt(np.mean((f0 / scale) ** 2, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        h = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
    h = np.where(np.isfinite(h), h, 1e-6)
    return np.minimum(h, np.maximum(span, 1e-12))
