"""The mode as a suspect: the default road starts from the mode of the log density, and a mode
can mislead in two ways that cost little to notice.

- There is none: the density grows without bound (the measurement-error model of Stan's User's
  Guide: as the regression's sigma goes to 0 the latent true values fit y exactly and the log
  density rises like -N log sigma). L-BFGS then climbs until its iteration cap, still gaining;
  the Gaussian built there sits on a spike of no mass. `unbounded` reads that from the search's
  last iterations, and the caller solves Stan's plain start (the initial point, sd 1) on the
  same fixed draws and keeps the higher ELBO. A search still gaining at its cap may also be on
  a slow ridge that ends at a mode (a factor model's scale symmetry x -> c x, W -> W / c, broken
  only by the priors): the log density along the search's last move, carried on, tells them
  apart (rising on the spike, falling past the ridge's mode: `still_rising`).
- There are several: `second_mode` looks along the line from the mode through the antithetic
  start (the first start reflected through 0) for a valley, climbs from beyond it, and reports
  a distinct mode of comparable log density, which a unimodal q cannot cover.
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
#: ... and the log density halfway between them is this many nats below both (a valley).
VALLEY_NATS = 2.0
#: The second search's iteration cap (it only needs to reach the basin).
SECOND_MAX_ITER = 60


def unbounded(mode: Mode, log_joint: Callable | None = None) -> dict | None:
    """How an unconverged mode search ended: {"how", "gain", "iterations", "coordinates"}
    (the coordinates that moved most over the search's last quarter, their moves), or None
    when it converged. "unbounded density" when the log density was still rising by more than
    STILL_CLIMBING nats and (given `log_joint`) keeps rising along that quarter's move carried
    on (still_rising), else "no convergence"."""
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
    rising = gain > STILL_CLIMBING and (log_joint is None
                                        or still_rising(log_joint, point1, move, lp1))  # fmt: skip
    how = "unbounded density" if rising else "no convergence"
    return {
        "how": how,
        "gain": gain,
        "iterations": int(last_it - it0),
        "coordinates": coordinates,
        "moves": [float(move[j]) for j in coordinates],
    }


#: Multiples of the search's last-quarter move, carried on from where it ended, at which the
#: log density must still rise for the climb to read as unbounded. Measured: on the
#: measurement-error model (seeds 1-3, cap 400) it rose by +2 to +5, +4 to +10, +9 to +17 nats
#: at 0.5, 1, 2 moves (linearly: -N log sigma); on gamma_normal's slow ridge (seeds 1, 2) it
#: fell by 29 to 31,000 nats at 0.5 already (the ridge's mode lies within the move).
RAY = np.array([0.5, 1.0, 2.0])


def still_rising(log_joint: Callable, point: np.ndarray, move: np.ndarray, lp: float) -> bool:
    """Whether the log density keeps rising at point + t move for t in RAY (one batched call,
    no gradient): a climb up an unbounded spike does, one along a slow ridge to a mode falls
    past the mode."""
    points = point[None, :] + RAY[:, None] * move[None, :]
    with np.errstate(all="ignore"):
        values = np.asarray(log_joint(points), dtype=float)
    return bool(np.all(np.isfinite(values)) and np.all(np.diff(np.r_[lp, values]) > 0))


def second_mode(log_joint: Callable, mode: Mode, rng: np.random.Generator,
                precision: np.ndarray | None, *, max_evals: int | None = None,
                progress=None) -> tuple[Mode | None, dict | None]:  # fmt: skip
    """A second mode search where the line from the mode through the antithetic start crosses a
    valley; returns (that search or None, a finding or None). A finding: {"log_density":
    (first, second), "coordinates": where they differ by more than DISTINCT_SDS Laplace sds,
    "point"}: a distinct mode of comparable density, with a valley between. The line costs
    LINE_POINTS log densities in one call and no gradient: on a unimodal posterior the log
    density falls along it and nothing is climbed (a climb from the antithetic start itself
    cost 8-66 gradients on the posteriordb posteriors, raising the median fit's by 5-10%).
    The sds are the Laplace approximation's marginal ones: its conditional ones are tiny on a
    strongly correlated posterior (kilpisjarvi, an uncentred year), where two searches stopping
    on the same ridge looked like two modes."""
    sd = _marginal_sd(precision, len(mode.point))
    start = _beyond_a_valley(log_joint, mode, -np.asarray(mode.init, dtype=float))
    if start is None:
        return None, None

    def home(z: np.ndarray) -> bool:  # within DISTINCT_SDS of the first mode: not a distinct one
        return bool(np.max(np.abs(z - mode.point) / sd) < DISTINCT_SDS)

    other = find_mode(log_joint, start, rng, until=home, max_iter=SECOND_MAX_ITER,
                      max_evals=max_evals, progress=progress, ftol=1e-7, gtol=1e-4,
                      label="a second mode search, beyond a valley of the log density")  # fmt: skip
    if not other.converged or not np.isfinite(other.log_density):
        return other, None
    apart = np.abs(other.point - mode.point) / sd
    if apart.max() <= DISTINCT_SDS or other.log_density < mode.log_density - COMPARABLE_NATS:
        return other, None
    with np.errstate(all="ignore"):  # a valley between them, not a ridge L-BFGS stopped on
        middle = float(log_joint(0.5 * (mode.point + other.point)[None, :])[0])
    if not middle < min(mode.log_density, other.log_density) - VALLEY_NATS:
        return other, None
    coordinates = [int(j) for j in np.flatnonzero(apart > DISTINCT_SDS)]
    return other, {"log_density": (mode.log_density, other.log_density),
                   "coordinates": coordinates, "point": other.point}  # fmt: skip


#: A point beyond a valley is worth a climb when within this many nats of the mode.
PROMISING_NATS = 25.0
#: Points (multiples of the step from the mode to the antithetic start) on the probe's line.
LINE = np.array([0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0])
LINE_POINTS = len(LINE)


def _beyond_a_valley(log_joint: Callable, mode: Mode, start: np.ndarray) -> np.ndarray | None:
    """The highest point on the line mode + t (start - mode), t in LINE, that lies beyond a
    valley (a point between it and the mode VALLEY_NATS below both) and within PROMISING_NATS
    of the mode's log density, or None. Without the last condition the line's far end rose
    again on unimodal posteriors, as a scale's log grew along it (sblrc, kilpisjarvi: a climb
    back to the same mode, 60-100 gradients), from millions of nats below the mode."""
    points = mode.point + LINE[:, None] * (start - mode.point)[None, :]
    with np.errstate(all="ignore"):
        lp = np.asarray(log_joint(points), dtype=float)
    lp = np.where(np.isfinite(lp), lp, -np.inf)
    best, best_lp = None, -np.inf
    low = np.inf  # the lowest log density between the mode and each point
    for k in range(len(LINE)):
        near = lp[k] > mode.log_density - PROMISING_NATS
        if near and low < min(mode.log_density, lp[k]) - VALLEY_NATS and lp[k] > best_lp:
            best, best_lp = points[k], lp[k]
        low = min(low, lp[k])
    return best


def _marginal_sd(precision: np.ndarray | None, dim: int) -> np.ndarray:
    """sqrt(diag(precision^-1)), or ones when the precision is missing or not invertible."""
    if precision is None:
        return np.ones(dim)
    try:
        with np.errstate(all="ignore"):
            var = np.diag(np.linalg.inv(precision))
    except np.linalg.LinAlgError:
        return np.ones(dim)
    return np.sqrt(var) if np.all(np.isfinite(var)) and np.all(var > 0) else np.ones(dim)
