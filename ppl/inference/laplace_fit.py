"""q(g) x N(x; x*_c + J_c (g - g_c), P_c^-1): the Laplace collapse (ppl.inference.laplace) with
one or two coordinates g left, q(g) a grid over them (as ppl.inference.collapse_grid, INLA's
integration over its hyperparameters) and each cell c carrying the Laplace Gaussian of the
conditional at its centre g_c, moved along J_c = dx*/dg within the cell. Draws and log q are
exact for this q and need no Newton solve; only the cells do. The grid's frame is the mode of
log p~(g) and its curvature, found by Newton steps on 3^Dg-point stencils (INLA's mode of the
hyperparameters)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ppl.inference.auto import CandidateFailed
from ppl.inference.collapse import LOG_2PI, Split
from ppl.inference.collapse_fit import set_moments
from ppl.inference.collapse_grid import GridResult, _edge, _normalised
from ppl.inference.laplace import Laplace
from ppl.inference.result import VIResult

#: Grid cells per frame unit (the frame: the Laplace covariance of log p~ at its mode), and the
#: half-widths tried, in frame units, until the edge is DEPTH nats below the peak.
PER_UNIT = {1: 6, 2: 2}
HALVES = (12.0, 24.0)
#: The grid is filled out to cells this many nats below its peak (the mass beyond: about
#: e^-DEPTH of the whole, in two dimensions), and the cells next to them (MARGIN more). On
#: gp_pois_regr (2 x 11): 371 cells, 16,000 gradients, k-hat 0.24-0.40; cells of 1 / 1.5
#: frame units: 225 cells, 12,600 gradients, k-hat 0.34-0.48 (DEPTH 14: the same q).
DEPTH = 11.0
MARGIN = 1.0
#: Stencil half-step (frame units), Newton steps on g, their largest step and when they stop.
STENCIL = 0.5
MODE_STEPS = 12
MAX_STEP = 3.0
MODE_TOL = 0.05


@dataclass
class LaplaceResult(VIResult):
    """The grid q(g) (`outer`) times each cell's Laplace Gaussian of x given g."""

    outer: GridResult | None = None
    split: Split | None = None
    # g, x, L, J of the evaluated cells, and "slot": each grid cell's row there (-1: none)
    cells: dict = field(default_factory=dict)
    polish: dict = field(default_factory=dict)

    def _cell(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        q = self.outer
        w = np.linalg.solve(q.frame, (g - q.centre).T).T
        index = np.floor((w + q.half) / (2 * q.half / q._n)).astype(int)
        inside = np.all((index >= 0) & (index < q._n), axis=1)
        flat = np.ravel_multi_index(tuple(np.clip(index, 0, q._n - 1).T), q.log_prob.shape)
        slot = self.cells["slot"][flat]
        return np.maximum(slot, 0), inside & (slot >= 0)

    def _means(self, g: np.ndarray, cell: np.ndarray) -> np.ndarray:
        c = self.cells
        return c["x"][cell] + np.einsum("sij,sj->si", c["J"][cell], g - c["g"][cell])

    def full(self, g: np.ndarray, x: np.ndarray) -> np.ndarray:
        z = np.empty((len(g), self.dim))
        z[:, self.split.outer], z[:, self.split.inner] = g, x
        return z

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        g = np.asarray(self.outer.sample(rng, n), dtype=float)
        cell, _ = self._cell(g)
        x = self._means(g, cell)
        eps = rng.standard_normal(x.shape)
        for c in np.unique(cell):  # x = x* + L'^-1 eps, one triangular solve per cell
            rows = cell == c
            x[rows] += np.linalg.solve(self.cells["L"][c].T, eps[rows].T).T
        return self.full(g, x)

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        zeta = np.atleast_2d(np.asarray(zeta, dtype=float))
        g, x = zeta[:, self.split.outer], zeta[:, self.split.inner]
        cell, inside = self._cell(g)
        r = x - self._means(g, cell)
        inner = np.empty(len(zeta))
        for c in np.unique(cell):
            rows = cell == c
            L = self.cells["L"][c]
            u = r[rows] @ L  # (L' r)'
            inner[rows] = np.sum(np.log(np.diag(L))) - 0.5 * np.sum(u**2, axis=1)
        inner -= 0.5 * len(self.split.inner) * LOG_2PI
        return np.where(inside, np.asarray(self.outer.log_q(g), dtype=float) + inner, -np.inf)

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        return self.log_q(zeta)

    @property
    def outer_dim(self) -> int:
        return len(self.split.outer)


def fit_laplace(log_joint, dim: int, split: Split, first_vi, *, seed: int = 0,
                budget: int | None = None) -> LaplaceResult:  # fmt: skip
    """The Laplace grid q from a fitted q (`first_vi`: its draws start the pool and the
    frame); `budget` in gradient evaluations."""
    start = time.perf_counter()
    lap = Laplace(log_joint, split, dim)
    lap.budget = budget
    points = np.asarray(first_vi.sample(np.random.default_rng(seed + 1), 256), dtype=float)
    if not np.all(np.isfinite(points)):
        raise CandidateFailed("the first q's draws are not finite", 0)
    g = points[:, split.outer]
    lap.seed(g.mean(axis=0), points[:, split.inner].mean(axis=0))
    sd = np.maximum(g.std(axis=0), 1e-3)
    frame = np.linalg.cholesky(np.atleast_2d(np.cov(g, rowvar=False)) + np.diag(1e-9 * sd**2))
    centre, frame = mode_frame(lap, g.mean(axis=0), frame)
    grid, cells = laplace_grid(lap, centre, frame)
    grid.seconds = time.perf_counter() - start
    return assemble(grid, cells, lap, seed)


def mode_frame(lap: Laplace, centre: np.ndarray, frame: np.ndarray):
    """Newton's method on log p~(g) with gradient and Hessian from a quadratic fitted to a
    3^Dg stencil: the mode and the Cholesky factor of the inverse curvature there (the
    frame kept where the curvature is not negative definite)."""
    Dg = len(centre)
    W = STENCIL * np.stack(np.meshgrid(*[[-1.0, 0.0, 1.0]] * Dg, indexing="ij"), -1).reshape(-1, Dg)
    design = np.column_stack([np.ones(len(W)), W] + [W[:, i] * W[:, j] for i in range(Dg)
                                                      for j in range(i, Dg)])  # fmt: skip
    for _ in range(MODE_STEPS):
        value = lap.solve(centre + W @ frame.T, np.linalg.inv(frame))[3]
        if not np.all(np.isfinite(value)):
            raise CandidateFailed("log p~ is not finite around q's mean of the rest", lap.work)
        coef = np.linalg.lstsq(design, value, rcond=None)[0]
        b, A, k = coef[1 : 1 + Dg], np.zeros((Dg, Dg)), 1 + Dg
        for i in range(Dg):
            for j in range(i, Dg):
                A[i, j] = A[j, i] = coef[k] * (2.0 if i == j else 1.0)
                k += 1
        try:
            C = np.linalg.cholesky(-A)
            step = np.linalg.solve(-A, b)
        except np.linalg.LinAlgError:
            C, step = None, b / max(np.linalg.norm(b), 1e-12)
        step *= min(1.0, MAX_STEP / max(np.linalg.norm(step), 1e-300))
        centre = centre + frame @ step
        if C is not None:
            frame = frame @ np.linalg.inv(C).T
        if np.linalg.norm(step) < MODE_TOL:
            break
    return centre, frame


def laplace_grid(lap: Laplace, centre: np.ndarray, frame: np.ndarray):
    """The grid q of log p~ in the frame (cells of 1 / PER_UNIT frame units), filled outwards
    from the centre cell through every cell next to one within DEPTH + MARGIN nats of the
    peak (the others have no mass: their log q is -inf), on a grid reaching out until no
    cell on its edge is within DEPTH of the peak; and the cells' conditionals."""
    Dg = len(centre)
    whiten = np.linalg.inv(frame)
    per_unit = PER_UNIT[Dg]
    for half in HALVES:
        n = int(2 * half * per_unit)
        axis = -half + (2 * half / n) * (np.arange(n) + 0.5)
        w = np.stack(np.meshgrid(*[axis] * Dg, indexing="ij"), axis=-1).reshape(-1, Dg)
        G = centre + w @ frame.T
        value, solved = np.full(len(G), -np.inf), np.zeros(len(G), dtype=bool)
        frontier = np.zeros(len(G), dtype=bool)
        frontier[np.argmin(np.sum(w**2, axis=1))] = True
        parts = {}
        while frontier.any():
            idx = np.flatnonzero(frontier)
            out = lap.solve(G[idx], whiten)
            for k, i in enumerate(idx):
                parts[i] = tuple(part[k] for part in out)
            value[idx], solved[idx] = out[3], True
            frontier = _neighbours(value.reshape((n,) * Dg) > np.max(value) - DEPTH - MARGIN)
            frontier = frontier.ravel() & ~solved
        lp = value.reshape((n,) * Dg)
        if _edge(lp) < np.max(lp) - DEPTH:
            break
    if not np.isfinite(lp).any():
        raise CandidateFailed("log p~ is not finite on the grid", lap.work)
    q = _normalised(lp, centre, frame, half)
    q.evaluations = int(solved.sum())
    q.elbo_trace = [(0, q.elbo)]
    rows = np.array(sorted(parts), dtype=int)
    slot = np.full(len(G), -1)
    slot[rows] = np.arange(len(rows))
    x, L, J = (np.stack([parts[i][k] for i in rows]) for k in range(3))
    return q, {"g": G[rows], "x": x, "L": L, "J": J, "slot": slot}


def _neighbours(mask: np.ndarray) -> np.ndarray:
    """The cells on or next to a cell of mask, diagonals included."""
    out = mask.copy()
    for axis in range(mask.ndim):
        shifted = np.zeros_like(out)
        lo = [slice(None)] * mask.ndim
        hi = [slice(None)] * mask.ndim
        lo[axis], hi[axis] = slice(1, None), slice(None, -1)
        shifted[tuple(lo)] |= out[tuple(hi)]
        shifted[tuple(hi)] |= out[tuple(lo)]
        out = out | shifted
    return out


def assemble(grid: GridResult, cells: dict, lap: Laplace, seed: int) -> LaplaceResult:
    """The whole-space result: its moments (set_moments), the work and what was done."""
    D = lap.dim
    q = LaplaceResult("fullrank", np.zeros(D), np.eye(D), grid.elbo_trace, grid.elbo, 1, 0, True,
                      0.0, grid.seconds, [], outer=grid, split=lap.split,
                      cells=cells)  # fmt: skip
    set_moments(q, seed)
    q.grad_evals = lap.work
    iterations = np.asarray(lap.iterations)
    q.polish = {"integrated": list(lap.split.names), "outer_dim": len(lap.split.outer),
                "colours": len(lap.split.colours), "outer": grid.method, "laplace": True,
                "cells": int(grid.evaluations),
                "newton_mean": float(iterations.mean()) if iterations.size else 0.0,
                "newton_max": int(iterations.max(initial=0))}  # fmt: skip
    return q
