"""The mode as a suspect: the default road starts from the mode of the log density, and a mode
can mislead in two ways that cost little to notice.

- There is none: the density grows without bound (the measurement-error model of Stan's User's
  Guide: as the regression's sigma goes to 0 the latent true values fit y exactly and the log
  density rises like -N log sigma). L-BFGS then climbs until its iteration cap, still gaining;
  the Gaussian built there sits on a spike of no mass. `unbounded` reads that from the search's
  last iterations, and the caller solves Stan's plain start (the initial point, sd 1) on the
  same fixed draws and keeps the higher ELBO.
- There are several: `second_mode` climbs once more from the antithetic start (the first start
  reflected through 0, as far from it as Stan's uniform(-2, 2) range allows) and reports a
  distinct mode of comparable log density, which a unimodal q cannot cover.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ppl.inference.mode import Mode, find_mode

#: The mode search still gained this many nats over the last quarter of its iterations: the
#: density grows without bound along where it was going.
STILL_CLIMBING = 1.0
#: A second mode is distinct when some coordinate is this many Laplace sds from the first ...
DISTINCT_SDS = 6.0
#: ... and comparable when its log density is within this many nats of the first's.
COMPARABLE_NATS = 3.0
#: The second search's iteration cap (it only needs to reach the basin).
SECOND_MAX_ITER = 60


def unbounded(mode: Mode) -> dict | None:
    """How an unconverged mode search ended: {"how", "gain", "iterations", "coordinates"}
    (the coordinates that moved most over the search's last quarter, their moves), or None
    when it converged. "unbounded density" when the log density was still rising by more than
    STILL_CLIMBING nats, else "no convergence"."""
    if mode.converged or len(mode.history) < 4:
        return None
    history = mode.history
    last_it = history[-1][0]
    back = [h for h in history if h[0] <= last_it - max(1, mode.iterations // 4)] or history[:1]
    it0, lp0, point0 = back[-1]
    _, lp1, point1 = history[-1]
    move = point1 - point0
    size = np.abs(move)
    top = float(size.max()) if size.size else 0.0
    coordinates = [int(j) for j in np.flatnonzero(size >= 0.5 * top)] if top > 0 else []
    gain = float(lp1 - lp0)
    how = "unbounded density" if gain > STILL_CLIMBING else "no convergence"
    return {
        "how": how,
        "gain": gain,
        "iterations": int(last_it - it0),
        "coordinates": coordinates,
        "moves": [float(move[j]) for j in coordinates],
    }


def second_mode(log_joint: Callable, mode: Mode, rng: np.random.Generator,
                precision: np.ndarray | None, *, max_evals: int | None = None,
                progress=None) -> tuple[Mode, dict | None]:  # fmt: skip
    """A second mode search from the antithetic start; returns (that search, a finding or
    None). A finding: {"log_density": (first, second), "coordinates": where they differ by
    more than DISTINCT_SDS Laplace sds, "point"}: a distinct mode of comparable density."""
    if precision is not None and np.all(np.diag(precision) > 0):
        sd = 1.0 / np.sqrt(np.diag(precision))
    else:
        sd = np.ones(len(mode.point))

    def home(z: np.ndarray) -> bool:  # within DISTINCT_SDS of the first mode: not a distinct one
        return bool(np.max(np.abs(z - mode.point) / sd) < DISTINCT_SDS)

    other = find_mode(log_joint, -np.asarray(mode.init, dtype=float), rng, until=home,
                      max_iter=SECOND_MAX_ITER, max_evals=max_evals, progress=progress,
                      label="a second mode search, from the antithetic start",
                      ftol=1e-7, gtol=1e-4)  # fmt: skip
    if not other.converged or not np.isfinite(other.log_density):
        return other, None
    apart = np.abs(other.point - mode.point) / sd
    if apart.max() <= DISTINCT_SDS or other.log_density < mode.log_density - COMPARABLE_NATS:
        return other, None
    coordinates = [int(j) for j in np.flatnonzero(apart > DISTINCT_SDS)]
    return other, {"log_density": (mode.log_density, other.log_density),
                   "coordinates": coordinates, "point": other.point}  # fmt: skip
