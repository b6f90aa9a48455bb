"""Latents integrated out by Laplace's method (INLA's and TMB's step) where the log joint is
concave but not quadratic in them given the rest g (a Poisson or Bernoulli likelihood on a
latent field; ppl.inference.collapse takes the quadratic ones, exactly): x*(g) by damped
Newton, and

    log p~(g) = log p(x*, g) + (Dx / 2) log 2 pi - log det P(x*, g) / 2,    P = -H_xx,

which is no longer exact: the q built on it is an approximation, and PSIS judges it as any
other. P comes from Hessian-vector products, one per colour of x's sparsity pattern (as in
ppl.inference.collapse), and one more per coordinate of g gives H_xg, so J = dx*/dg = P^-1 H_xg
(the implicit function theorem) comes with it: a solved point predicts x* at its neighbours to
second order. Points are solved outwards in shells, each started from its nearest solved
neighbour's prediction, so most take one or two Newton iterations. An iteration costs a
gradient, 2 (colours + Dg) for the products and one per line-search value (`work`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ppl.inference.auto import CandidateFailed
from ppl.inference.collapse import (
    LOG_2PI,
    ROWS,
    Split,
    _cho_solve,
    _gradients,
    _hessian,
    colour,
    colour_vectors,
    product_entries,
)
from ppl.inference.hessian import batched_hvp

#: The most coordinates q keeps (the grid's dimension) and integrates out (the cells carry
#: a Dx x Dx factor each).
MAX_OUTER = 2
MAX_INNER = 100
#: Newton iterations per point, at most.
MAX_NEWTON = 30
#: A point is solved when the Newton decrement g' P^-1 g (twice the gain the step predicts,
#: in nats) is below this: the step taken then leaves x* off by about its square.
DECREMENT = 1e-3
#: Points this many nats below the best value so far stop iterating: their cells have no mass.
FREEZE = 40.0
#: Shell width, in the frame's units: the points within it of the solved set go next.
SHELL = 1.0
ARMIJO = 1e-4
#: Steps with a neighbour's P before Newton's own (each a gradient and a value).
CHORD_STEPS = 4
HALVINGS = 30
#: Levenberg shifts (relative to P's largest diagonal) tried where P is not positive definite
#: away from the mode: the step is then a damped one and the point is not yet solved.
SHIFTS = (1e-6, 1e-4, 1e-2, 1.0)


def laplace_split(model, points: np.ndarray) -> Split | None:
    """Every latent inside but the smallest ones that make up at most MAX_OUTER coordinates
    (at least one), where -H_xx is positive definite and finite at `points` (draws of a fitted
    q); None where there is no such split."""
    if any(lat.binary for lat in model.latents):
        return None
    outside, total = set(), 0
    for lat in sorted(model.latents, key=lambda lat: lat.size):
        if total + lat.size > MAX_OUTER:
            break
        outside.add(lat.name)
        total += lat.size
    kept = [lat for lat in model.latents if lat.name not in outside]
    if not outside or not kept:
        return None
    inner = np.sort(np.concatenate([np.arange(lat.offset, lat.offset + lat.size) for lat in kept]))
    if len(inner) > MAX_INNER:
        return None
    try:
        with np.errstate(all="ignore"):
            H = [_hessian(model.log_joint, z, inner) for z in np.asarray(points, float)[:4]]
            if not all(np.all(np.isfinite(h)) for h in H):
                return None
            if min(np.linalg.eigvalsh(-h).min() for h in H) <= 0:
                return None
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return None
    pattern = np.eye(len(inner), dtype=bool)
    for h in H:
        pattern |= h != 0
    colours, dense = colour(pattern)
    outer = np.setdiff1d(np.arange(model.dim), inner)
    return Split(inner, outer, [lat.name for lat in kept], pattern, colours, dense)


class Laplace:
    """x*(g), P(x*, g) and log p~(g) on rows of g, solved by damped Newton from warm starts;
    every solved point joins a pool the next ones start from. `work` counts gradient
    evaluations (a product two, a value one)."""

    def __init__(self, log_joint: Callable, split: Split, dim: int):
        self.log_joint, self.split, self.dim = log_joint, split, dim
        self.work = 0
        self.budget: int | None = None
        Dx, Dg, C = len(split.inner), len(split.outer), len(split.colours)
        self._vectors = np.zeros((C + Dg, dim))
        self._vectors[:C] = colour_vectors(split, dim)
        self._vectors[C + np.arange(Dg), split.outer] = 1.0
        self._entries = product_entries(split)  # as in Collapsed
        self.pool_g = np.zeros((0, Dg))
        self.pool_x = np.zeros((0, Dx))
        self.pool_J = np.zeros((0, Dx, Dg))
        self.pool_L = np.zeros((0, Dx, Dx))
        self.iterations: list[int] = []
        self.top = -np.inf  # the best log p~ solved so far
        self._known: dict[bytes, tuple] = {}

    def full(self, g: np.ndarray, x: np.ndarray) -> np.ndarray:
        z = np.empty((len(g), self.dim))
        z[:, self.split.outer] = g
        z[:, self.split.inner] = x
        return z

    def _values(self, g: np.ndarray, x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            lp = np.asarray(self.log_joint(self.full(g, x)), dtype=float)
        self.work += len(g)
        return np.where(np.isfinite(lp), lp, -np.inf)

    def products(self, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """P = -H_xx (S, Dx, Dx) and H_xg (S, Dx, Dg) at rows z, one product per colour and
        per coordinate of g."""
        K, C = len(self._vectors), len(self.split.colours)
        step = max(1, ROWS // K)
        parts = []
        for i in range(0, len(z), step):
            zz = z[i : i + step]
            with np.errstate(all="ignore"):
                hv = batched_hvp(self.log_joint, np.repeat(zz, K, axis=0),
                                 np.tile(self._vectors, (len(zz), 1)))  # fmt: skip
            parts.append(np.asarray(hv).reshape(len(zz), K, self.dim))
        hv = np.concatenate(parts)[:, :, self.split.inner]  # (S, K, Dx)
        self.work += 2 * len(z) * K
        rows, cols, colours, reads = self._entries
        P = np.zeros((len(z), len(self.split.inner), len(self.split.inner)))
        P[:, rows, cols] = -hv[:, colours, reads]
        return 0.5 * (P + np.swapaxes(P, 1, 2)), np.swapaxes(hv[:, C:, :], 1, 2)

    def seed(self, g: np.ndarray, x: np.ndarray) -> None:
        """Solve one point from x (a fitted q's mean) to start the pool."""
        out = self.newton(np.atleast_2d(g), np.atleast_2d(x))
        if not out[4][0]:
            raise CandidateFailed("Newton's method found no conditional mode at q's mean",
                                  self.work)  # fmt: skip
        self._join(np.atleast_2d(g), out)

    def _join(self, g, out) -> None:
        x, L, J, _, ok = out
        self.pool_g = np.concatenate([self.pool_g, g[ok]])
        self.pool_x = np.concatenate([self.pool_x, x[ok]])
        self.pool_J = np.concatenate([self.pool_J, J[ok]])
        self.pool_L = np.concatenate([self.pool_L, L[ok]])

    def solve(self, G: np.ndarray, whiten: np.ndarray):
        """x*, Cholesky factor of P, J, log p~ and whether solved, at rows G (N, Dg): shell by
        shell outwards from the pool (distances in `whiten` @ g units)."""
        N, Dx, Dg = len(G), len(self.split.inner), len(self.split.outer)
        x = np.zeros((N, Dx))
        L = np.tile(np.eye(Dx), (N, 1, 1))
        J = np.zeros((N, Dx, Dg))
        value = np.full(N, -np.inf)
        ok = np.zeros(N, dtype=bool)
        pending = np.ones(N, dtype=bool)
        for i, row in enumerate(G):  # a point solved before (a grid reaching further)
            known = self._known.get(row.tobytes())
            if known is not None:
                x[i], L[i], J[i], value[i], ok[i] = known
                pending[i] = False
        while pending.any():
            idx = np.flatnonzero(pending)
            W, Wp = G[idx] @ whiten.T, self.pool_g @ whiten.T
            d2 = np.sum((W[:, None, :] - Wp[None, :, :]) ** 2, axis=2)
            near, d = np.argmin(d2, axis=1), np.sqrt(np.min(d2, axis=1))
            batch = d <= d.min() + SHELL
            idx, near = idx[batch], near[batch]
            # a Newton iteration and a few chord steps per point, at least
            if (
                self.budget is not None
                and self.work + len(idx) * (len(self._vectors) * 2 + 6) > self.budget
            ):
                raise CandidateFailed("the gradient budget would end the Laplace grid before its "
                                      "last cells", self.work)  # fmt: skip
            start = self.pool_x[near] + np.einsum("sij,sj->si", self.pool_J[near],
                                                  G[idx] - self.pool_g[near])  # fmt: skip
            x[idx] = self._chord(G[idx], start, self.pool_L[near])
            out = self.newton(G[idx], x[idx], fallback=self.pool_x[near])
            x[idx], L[idx], J[idx], value[idx], ok[idx] = out
            self._join(G[idx], out)
            for k, i in enumerate(idx):
                self._known[G[i].tobytes()] = tuple(part[k] for part in out)
            pending[idx] = False
        return x, L, J, value, ok

    def _chord(self, g: np.ndarray, x: np.ndarray, L: np.ndarray) -> np.ndarray:
        """A few damped steps with the neighbours' P (a gradient and a value each, no products),
        which leave Newton's own iterations little to do."""
        x = np.array(x, dtype=float)
        lp = self._values(g, x)
        active = np.isfinite(lp)
        for _ in range(CHORD_STEPS):
            idx = np.flatnonzero(active)
            if not idx.size:
                break
            with np.errstate(all="ignore"):
                grad = _gradients(self.log_joint, self.full(g[idx], x[idx]))[:, self.split.inner]
            self.work += len(idx)
            usable = np.all(np.isfinite(grad), axis=1)
            step = _cho_solve(L[idx], np.where(usable[:, None], grad, 0.0))
            decrement = np.sum(grad * step, axis=1)
            x[idx], lp[idx] = self._line_search(g[idx], x[idx], lp[idx], step, decrement, usable)
            active[idx[~usable | (decrement < DECREMENT)]] = False
        return x

    def newton(self, g: np.ndarray, x: np.ndarray, fallback: np.ndarray | None = None):
        """Damped Newton from x (rows whose log p is not finite there start from `fallback`):
        x*, the Cholesky factor of P at the last iterate, J, log p~ and whether solved."""
        S, Dx, Dg = len(g), len(self.split.inner), len(self.split.outer)
        x = np.array(x, dtype=float)
        lp = self._values(g, x)
        if fallback is not None and not np.all(np.isfinite(lp)):
            bad = ~np.isfinite(lp)
            x[bad] = fallback[bad]
            lp[bad] = self._values(g[bad], x[bad])
        L = np.tile(np.eye(Dx), (S, 1, 1))
        J = np.zeros((S, Dx, Dg))
        value = np.full(S, -np.inf)
        ok = np.zeros(S, dtype=bool)
        active = np.isfinite(lp)
        count = np.zeros(S, dtype=int)
        for _ in range(MAX_NEWTON):
            idx = np.flatnonzero(active)
            if not idx.size:
                break
            z = self.full(g[idx], x[idx])
            with np.errstate(all="ignore"):
                grad = _gradients(self.log_joint, z)[:, self.split.inner]
            self.work += len(idx)
            P, Hxg = self.products(z)
            Li, exact = _factor(P)
            usable = np.all(np.isfinite(grad), axis=1) & np.all(np.isfinite(Li), axis=(1, 2))
            Li[~usable] = np.eye(Dx)
            step = _cho_solve(Li, np.where(usable[:, None], grad, 0.0))
            decrement = np.sum(grad * step, axis=1)
            moved, lp_new = self._line_search(g[idx], x[idx], lp[idx], step, decrement, usable)
            x[idx], lp[idx], L[idx], count[idx] = moved, lp_new, Li, count[idx] + 1
            J[idx] = _cho_solve_columns(Li, Hxg)
            log_det = np.sum(np.log(np.diagonal(Li, axis1=1, axis2=2)), axis=1)
            value[idx] = np.where(usable & exact, lp_new + 0.5 * Dx * LOG_2PI - log_det, -np.inf)
            self.top = max(self.top, np.max(value, initial=-np.inf))
            done = ~usable | (exact & (decrement < DECREMENT)) | (value[idx] < self.top - FREEZE)
            ok[idx] = usable & exact & np.isfinite(value[idx])
            active[idx[done]] = False
        self.iterations += count.tolist()
        ok &= ~active | (value > -np.inf)
        return x, L, J, np.where(ok, value, -np.inf), ok

    def _line_search(self, g, x, lp, step, decrement, usable):
        """Backtracking on log p from the full Newton step (Armijo); rows that find no gain
        stay where they are."""
        t = np.where(usable, 1.0, 0.0)
        out_x, out_lp = x.copy(), lp.copy()
        searching = usable.copy()
        for _ in range(HALVINGS):
            idx = np.flatnonzero(searching)
            if not idx.size:
                break
            trial = x[idx] + t[idx, None] * step[idx]
            lpt = self._values(g[idx], trial)
            accept = lpt >= lp[idx] + ARMIJO * t[idx] * decrement[idx]
            # round-off at the optimum: a step within it that loses nothing measurable
            accept |= (decrement[idx] < DECREMENT) & (lpt >= lp[idx] - 1e-9 * (1 + abs(lp[idx])))
            out_x[idx[accept]], out_lp[idx[accept]] = trial[accept], lpt[accept]
            searching[idx[accept]] = False
            t[idx[~accept]] *= 0.5
        return out_x, out_lp


def _factor(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cholesky factors of a stack, and whether each is of P itself (else of a Levenberg shift
    P + s I, or NaN where none is positive definite)."""
    try:
        return np.linalg.cholesky(P), np.ones(len(P), dtype=bool)
    except np.linalg.LinAlgError:
        pass
    L = np.full(P.shape, np.nan)
    exact = np.zeros(len(P), dtype=bool)
    scale = np.max(np.abs(np.diagonal(P, axis1=1, axis2=2)), axis=1)
    for s in range(len(P)):
        for k, shift in enumerate((0.0, *SHIFTS)):
            try:
                L[s] = np.linalg.cholesky(P[s] + shift * scale[s] * np.eye(P.shape[1]))
            except np.linalg.LinAlgError:
                continue
            exact[s] = k == 0
            break
    return L, exact


def _cho_solve_columns(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """P^-1 B per row, for P = L L' and B (S, Dx, k)."""
    return np.linalg.solve(np.swapaxes(L, 1, 2), np.linalg.solve(L, B))
