"""q(g) on a grid where one or two coordinates are left after the collapse
(ppl.inference.collapse): the collapsed density evaluated at the centres of a grid of cells, q
constant within each cell and proportional to the density at its centre (INLA integrates its
hyperparameters numerically the same way). In one or two dimensions a few hundred or thousand
evaluations cover the posterior to 1e-10 of its peak, skew and tails included (eight schools'
log tau), where a Gaussian or a flow on fixed draws costs more and misses the far tail."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ppl.inference.result import VIResult

#: Cells per dimension, by dimension.
CELLS = {1: 128, 2: 40}
#: The grid reaches out until its edge is this many nats below its peak (mass beyond: under
#: e^-14 times the tail's length in frame units).
DEPTH = 14.0
#: Half-widths tried, in units of the frame's scale.
REACH = (10.0, 20.0, 40.0)


@dataclass
class GridResult(VIResult):
    """A piecewise-constant q on cells of a grid in the frame g = centre + B w."""

    centre: np.ndarray | None = None
    frame: np.ndarray | None = None
    half: float = 0.0
    log_prob: np.ndarray | None = None  # (cells per dim,) * Dg, normalised

    @property
    def _n(self) -> int:
        return self.log_prob.shape[0]

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        p = np.exp(self.log_prob.ravel() - self.log_prob.max())
        cells = rng.choice(p.size, size=n, p=p / p.sum())
        index = np.stack(np.unravel_index(cells, self.log_prob.shape), axis=1)
        h = 2 * self.half / self._n
        w = -self.half + h * (index + rng.uniform(size=index.shape))
        return self.centre + w @ self.frame.T

    def log_q(self, g: np.ndarray) -> np.ndarray:
        g = np.atleast_2d(np.asarray(g, dtype=float))
        w = np.linalg.solve(self.frame, (g - self.centre).T).T
        h = 2 * self.half / self._n
        index = np.floor((w + self.half) / h).astype(int)
        inside = np.all((index >= 0) & (index < self._n), axis=1)
        index = np.clip(index, 0, self._n - 1)
        volume = len(self.centre) * np.log(h) + np.log(abs(np.linalg.det(self.frame)))
        values = self.log_prob[tuple(index.T)] - volume
        return np.where(inside, values, -np.inf)


def fit_grid(log_density, centre: np.ndarray, scale: np.ndarray) -> GridResult:
    """The grid q of a log density on one or two coordinates (rows -> values), framed first by
    `centre` and the covariance `scale` @ scale.T (e.g. a first fit's), then by the grid's own
    mean and covariance, each time reaching out until the edge is DEPTH nats below the peak."""
    start = time.perf_counter()
    dim = len(centre)
    frame = np.asarray(scale, dtype=float)
    centre = np.asarray(centre, dtype=float)
    evaluations = 0
    for _ in range(2):
        for half in REACH:
            lp, cells = _evaluate(log_density, centre, frame, half, CELLS[dim])
            evaluations += cells
            if np.isfinite(lp).any() and _edge(lp) < np.nanmax(lp[np.isfinite(lp)]) - DEPTH:
                break
        q = _normalised(lp, centre, frame, half)
        zeta = q.sample(np.random.default_rng(0), 4096)
        w = np.linalg.solve(frame, (zeta - centre).T).T
        if np.all(np.abs(w.mean(axis=0)) < 0.3) and np.all(np.abs(np.log(w.std(axis=0))) < 0.3):
            break  # the frame was the grid's own: no second pass
        centre = zeta.mean(axis=0)
        cov = np.atleast_2d(np.cov(zeta, rowvar=False))
        try:
            frame = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            break
    q.evaluations = evaluations
    q.seconds = time.perf_counter() - start
    q.elbo_trace = [(0, q.elbo)]
    return q


def _evaluate(log_density, centre, frame, half: float, n: int):
    h = 2 * half / n
    axis = -half + h * (np.arange(n) + 0.5)
    mesh = np.meshgrid(*[axis] * len(centre), indexing="ij")
    w = np.stack(mesh, axis=-1).reshape(-1, len(centre))
    with np.errstate(all="ignore"):
        lp = np.asarray(log_density(centre + w @ frame.T), dtype=float)
    lp = np.where(np.isfinite(lp), lp, -np.inf).reshape((n,) * len(centre))
    return lp, lp.size


def _edge(lp: np.ndarray) -> float:
    """The highest log density on the grid's boundary cells."""
    edges = [np.take(lp, [0, -1], axis=a) for a in range(lp.ndim)]
    finite = [e[np.isfinite(e)] for e in edges]
    values = np.concatenate(finite) if finite else np.zeros(0)
    return float(values.max()) if values.size else -np.inf


def _normalised(lp: np.ndarray, centre, frame, half: float) -> GridResult:
    top = np.max(lp)
    log_total = top + np.log(np.sum(np.exp(lp - top)))
    log_prob = lp - log_total
    n = lp.shape[0]
    mean = np.asarray(centre, dtype=float)
    # the ELBO of q proportional to the density at the cell centres: log of their sum x volume
    elbo = float(log_total + len(mean) * np.log(2 * half / n) + np.log(abs(np.linalg.det(frame))))
    return GridResult("grid", mean, np.asarray(frame, dtype=float), [], elbo, 0, 0, True, 0.0,
                      0.0, [], centre=mean, frame=np.asarray(frame, dtype=float),
                      half=half, log_prob=log_prob.reshape((n,) * len(mean)))  # fmt: skip
