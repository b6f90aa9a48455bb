"""Latents integrated out exactly: where the log joint is quadratic in a set of coordinates x
given the rest g (x's full conditional is Gaussian: random effects with a normal likelihood,
the true values of a measurement-error model, a regression's coefficients), log p(g) =
log of the integral of p(x, g) over x is closed-form, as in TMB's and INLA's Laplace step, which is
exact here:

    log p(g) = log p(x0, g) + g0' P^-1 g0 / 2 + (Dx / 2) log 2 pi - log det(P(g)) / 2,

with g0 the gradient in x at any x0 and P(g) = -H_xx (constant in x). q is then q(g) times the
exact conditional N(x; x0 + P^-1 g0, P^-1): only g, a few coordinates, is left to VI, and the
funnel between a scale in g and the x it scales is followed exactly (eight schools: tau and
theta; measurement error: sigma and the true x).

P comes from Hessian-vector products with one vector per colour of x's sparsity pattern (Curtis,
Powell & Reid; a dense row such as a shared intercept's is read off its own column by symmetry),
so a sweep costs a few gradients, not Dx of them; the gradient in g is the envelope theorem's
(the gradient of log p at the conditional mode) plus central differences of log det P.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import autograd.numpy as anp
import numpy as np
from autograd import grad as grad_of
from autograd.extend import defvjp, primitive

from ppl.errors import SecondDerivativeError
from ppl.inference.hessian import batched_hvp

LOG_2PI = float(np.log(2 * np.pi))
#: The most coordinates integrated out (P is dense: draws x Dx x Dx).
MAX_INNER = 400
#: Rows (draws x colours) per batched product call: memory is these times the data's rows.
ROWS = 256
#: Relative error within which the log joint counts as quadratic in x (a second-order
#: expansion along random steps of a few of q's sds reproduces it to this).
QUADRATIC_TOL = 1e-7
#: Rows whose P is worse conditioned than this (by its Cholesky diagonal) count as outside the
#: support: the integral there is round-off (eight schools at log tau = 43 gave 1.8e19).
MAX_CONDITION = 1e10
#: Central-difference step for the gradient of log det P in g (unconstrained scale).
STEP = 1e-4
#: Columns with more non-zeros than this multiple of the median (plus 2) get a colour each.
DENSE_FACTOR = 2


@dataclass
class Split:
    """Which unconstrained coordinates are integrated out (inner) and which q keeps (outer),
    and the colours of the inner ones' Hessian pattern."""

    inner: np.ndarray
    outer: np.ndarray
    names: list[str]
    pattern: np.ndarray  # (Dx, Dx) bool: where P can be non-zero
    colours: list[np.ndarray]  # inner positions (0..Dx-1) per Hessian-vector product
    dense: np.ndarray  # inner positions whose column has a colour of its own


def find_split(model, points: np.ndarray, rng: np.random.Generator) -> Split | None:
    """The largest set of whole latents, taken greedily from the largest, in which the log
    joint is quadratic (at `points`, draws of a fitted q, and steps from them), leaving at
    least one coordinate outside; None when there is none."""
    points = np.asarray(points, dtype=float)
    scale = np.maximum(points.std(axis=0), 1e-3)
    chosen: list = []
    inner = np.zeros(0, dtype=int)
    for lat in sorted(model.latents, key=lambda lat: -lat.size):
        if lat.binary:
            continue
        trial = np.concatenate([inner, np.arange(lat.offset, lat.offset + lat.size)])
        if len(trial) > MAX_INNER or len(trial) >= model.dim:
            continue
        if _quadratic(model.log_joint, points, trial, scale, rng):
            inner, chosen = np.sort(trial), chosen + [lat]
    if not chosen:
        return None
    pattern = _pattern(model.log_joint, points, inner)
    if pattern is None:
        return None
    colours, dense = colour(pattern)
    outer = np.setdiff1d(np.arange(model.dim), inner)
    names = [lat.name for lat in model.latents if lat in chosen]
    return Split(inner, outer, names, pattern, colours, dense)


def _quadratic(log_joint: Callable, points: np.ndarray, idx: np.ndarray, scale: np.ndarray,
               rng: np.random.Generator) -> bool:  # fmt: skip
    """Whether log p is quadratic in the coordinates idx at two of the points: the Hessian in
    idx is the same at a point moved along idx, and a second-order expansion reproduces log p
    along random steps of three of q's sds, with P positive definite."""
    base = points[:2].copy()
    moved = base.copy()
    moved[:, idx] += 3 * scale[idx] * rng.standard_normal((2, len(idx)))
    try:
        with np.errstate(all="ignore"):
            H = [_hessian(log_joint, z, idx) for z in (*base, *moved)]
            lp = np.asarray(log_joint(np.concatenate([base, moved])), dtype=float)
            grads = _gradients(log_joint, base)[:, idx]
    except (ArithmeticError, ValueError, np.linalg.LinAlgError):
        return False
    if not (np.all(np.isfinite(lp)) and all(np.all(np.isfinite(h)) for h in H)):
        return False
    for k in range(2):
        step = moved[k, idx] - base[k, idx]
        if not np.allclose(H[k], H[k + 2], rtol=1e-6, atol=1e-8 * np.abs(H[k]).max()):
            return False
        predicted = lp[k] + grads[k] @ step + 0.5 * step @ H[k] @ step
        if abs(predicted - lp[k + 2]) > QUADRATIC_TOL * (1 + abs(lp[k]) + abs(lp[k + 2])):
            return False
        if np.linalg.eigvalsh(-H[k]).min() <= 0:
            return False
    return True


def _hessian(log_joint: Callable, z: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The Hessian of log p in the coordinates idx at z, from len(idx) products."""
    vectors = np.zeros((len(idx), len(z)))
    vectors[np.arange(len(idx)), idx] = 1.0
    products = batched_hvp(log_joint, np.repeat(z[None, :], len(idx), axis=0), vectors)
    H = np.asarray(products)[:, idx]
    return 0.5 * (H + H.T)


def _gradients(log_joint: Callable, zeta: np.ndarray) -> np.ndarray:
    return np.asarray(grad_of(lambda z: anp.sum(log_joint(z)))(np.asarray(zeta, dtype=float)))


def _pattern(log_joint: Callable, points: np.ndarray, inner: np.ndarray) -> np.ndarray | None:
    """Where -H_xx is non-zero at any of three points (their union)."""
    with np.errstate(all="ignore"):
        H = [_hessian(log_joint, z, inner) for z in points[:3]]
    if not all(np.all(np.isfinite(h)) for h in H):
        return None
    pattern = np.zeros((len(inner), len(inner)), dtype=bool)
    for h in H:
        pattern |= h != 0
    return pattern | np.eye(len(inner), dtype=bool)


def colour(pattern: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Colours of the columns of a symmetric pattern such that every entry is read off one
    product: a dense column (many more non-zeros than the median) gets its own colour and
    gives its row by symmetry; the others are coloured greedily so that no two of a colour
    share a non-zero in a row that is not dense."""
    n = len(pattern)
    degree = pattern.sum(axis=0)
    dense = np.flatnonzero(degree > DENSE_FACTOR * np.median(degree) + 2) if n > 2 else np.zeros(
        0, dtype=int)  # fmt: skip
    sparse = np.setdiff1d(np.arange(n), dense)
    rows = pattern[np.ix_(sparse, sparse)].astype(float)
    conflict = (rows.T @ rows) > 0
    assigned = -np.ones(len(sparse), dtype=int)
    for j in range(len(sparse)):
        taken = set(assigned[conflict[j] & (assigned >= 0)].tolist())
        c = 0
        while c in taken:
            c += 1
        assigned[j] = c
    colours = [np.array([j]) for j in dense]
    colours += [sparse[assigned == c] for c in range(assigned.max() + 1)] if len(sparse) else []
    return colours, dense


def colour_vectors(split: Split, dim: int) -> np.ndarray:
    """One direction per colour: 1 on the colour's inner coordinates (rows of (C, dim))."""
    vectors = np.zeros((len(split.colours), dim))
    for c, members in enumerate(split.colours):
        vectors[c, split.inner[members]] = 1.0
    return vectors


def product_entries(split: Split) -> tuple[np.ndarray, ...]:
    """(rows, cols, colour, read) of P's non-zeros: each (i, j) is read off one product, column
    j's colour at row i, unless j is sparse and row i dense (then row j of i's own colour, by
    symmetry)."""
    Dx = len(split.inner)
    dense = np.zeros(Dx, dtype=bool)
    dense[split.dense] = True
    colour_of = np.empty(Dx, dtype=int)
    for c, members in enumerate(split.colours):
        colour_of[members] = c
    rows, cols = np.nonzero(split.pattern)
    flip = dense[rows] & ~dense[cols]
    return (rows, cols, np.where(flip, colour_of[rows], colour_of[cols]),
            np.where(flip, cols, rows))  # fmt: skip


class Collapsed:
    """log p(g): the log joint with the split's inner coordinates integrated out, on rows of g
    (S, Dg), differentiable by autograd in g; `work` counts the gradient evaluations it cost
    (a Hessian-vector product counts as two)."""

    def __init__(self, log_joint: Callable, split: Split, x0: np.ndarray, dim: int):
        self.log_joint, self.split, self.dim = log_joint, split, dim
        self.x0 = np.asarray(x0, dtype=float)
        self.work = 0
        self._cache: tuple | None = None
        self._vectors = colour_vectors(split, dim)
        self._entries = product_entries(split)

        @primitive
        def value(g):
            return self._value(g)

        defvjp(value, lambda ans, g: lambda v: np.asarray(v)[:, None] * self._gradient(g))
        self._primitive = value

    def __call__(self, g):
        return self._primitive(g)

    def full(self, g: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Rows of the whole unconstrained vector from g and x."""
        z = np.empty((len(g), self.dim))
        z[:, self.split.outer] = g
        z[:, self.split.inner] = x
        return z

    def _chunks(self, S: int):
        """Slices of draws whose products (a row each per colour) make at most ROWS rows."""
        step = max(1, ROWS // len(self.split.colours))
        return [slice(i, min(i + step, S)) for i in range(0, S, step)]

    def precision(self, g: np.ndarray) -> np.ndarray:
        """P(g) = -H_xx, (S, Dx, Dx), from one product per colour at each row of g."""
        g = np.atleast_2d(np.asarray(g, dtype=float))
        if len(g) > max(1, ROWS // len(self.split.colours)):
            return np.concatenate([self.precision(g[part]) for part in self._chunks(len(g))])
        S, C, Dx = len(g), len(self.split.colours), len(self.split.inner)
        z = self.full(g, np.broadcast_to(self.x0, (S, Dx)))
        with np.errstate(all="ignore"):
            hv = np.asarray(batched_hvp(self.log_joint, np.repeat(z, C, axis=0),
                                        np.tile(self._vectors, (S, 1))))  # fmt: skip
        self.work += 2 * S * C
        hv = -hv.reshape(S, C, self.dim)[:, :, self.split.inner]  # (S, C, Dx)
        rows, cols, colours, reads = self._entries
        P = np.zeros((S, Dx, Dx))
        P[:, rows, cols] = hv[:, colours, reads]
        return 0.5 * (P + np.swapaxes(P, 1, 2))

    def conditional(self, g: np.ndarray):
        """The conditional mode x*(g), the Cholesky factor of P(g), log p(x0, g) and whether
        each row is proper (P positive definite, everything finite)."""
        g = np.atleast_2d(np.asarray(g, dtype=float))
        S, Dx = len(g), len(self.split.inner)
        z0 = self.full(g, np.broadcast_to(self.x0, (S, Dx)))
        with np.errstate(all="ignore"):
            lp0 = np.asarray(self.log_joint(z0), dtype=float)
            g0 = _gradients(self.log_joint, z0)[:, self.split.inner]
        self.work += S
        P = self.precision(g)
        ok = np.isfinite(lp0) & np.all(np.isfinite(g0), axis=1)
        ok &= np.all(np.isfinite(P), axis=(1, 2))
        # P = s Pc s with Pc unit-diagonal: Pc's conditioning, not the scales', is round-off's
        scale = np.sqrt(np.abs(np.diagonal(P, axis1=1, axis2=2)))
        ok &= np.all(scale > 0, axis=1)
        scale = np.where(ok[:, None], scale, 1.0)
        Pc = P / (scale[:, :, None] * scale[:, None, :])
        L = _batched_cholesky(np.where(ok[:, None, None], Pc, np.eye(Dx)), ok)
        diag = np.diagonal(L, axis1=1, axis2=2)
        ok &= (diag.max(axis=1) / diag.min(axis=1)) ** 2 < MAX_CONDITION  # else round-off rules
        L = scale[:, :, None] * L
        g0 = np.where(ok[:, None], g0, 0.0)
        delta = _cho_solve(L, g0)
        return self.x0 + delta, L, lp0, g0, delta, ok

    def _value(self, g) -> np.ndarray:
        g = np.atleast_2d(np.asarray(g, dtype=float))
        x_star, L, lp0, g0, delta, ok = self.conditional(g)
        log_det = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
        Dx = len(self.split.inner)
        # log p at x* itself, not log p(x0) + g0' P^-1 g0 / 2: far out (eight schools at
        # tau = 4e12) those two terms are 1e23 and cancel to round-off
        with np.errstate(all="ignore"):
            at_mode = np.asarray(self.log_joint(self.full(g, x_star)), dtype=float)
        self.work += len(g)
        ok = ok & np.isfinite(at_mode)
        out = at_mode + 0.5 * Dx * LOG_2PI - log_det
        out = np.where(ok, out, -np.inf)
        self._cache = (g.copy(), x_star, ok, L)
        return out

    def _gradient(self, g) -> np.ndarray:
        """d log p(g) / dg: the gradient of log p at (x*(g), g) in g (envelope theorem), and of
        -log det P(g) / 2 = -tr(P^-1 dP) / 2 by one reverse pass through the products (a third
        derivative of log p; central differences where it has none)."""
        g = np.atleast_2d(np.asarray(g, dtype=float))
        if self._cache is None or not np.array_equal(self._cache[0], g):
            self._value(g)
        _, x_star, ok, L = self._cache
        with np.errstate(all="ignore"):
            grad = _gradients(self.log_joint, self.full(g, x_star))[:, self.split.outer]
            self.work += len(g)
            try:
                grad = grad + self._log_det_gradient(g, L)
            except SecondDerivativeError:
                grad = grad + self._log_det_difference(g)
        return np.where(ok[:, None] & np.isfinite(grad), grad, 0.0)

    def _log_det_gradient(self, g: np.ndarray, L: np.ndarray) -> np.ndarray:
        """d(-log det P / 2)/dg: P's entries are minus products H v_c, so this is
        d/dg of sum_c <a_c, H v_c> / 2 with a_c collecting P^-1's entries read off product c."""
        if len(g) > max(1, ROWS // len(self.split.colours)):
            return np.concatenate([self._log_det_gradient(g[part], L[part])
                                   for part in self._chunks(len(g))])  # fmt: skip
        S, C, Dx = len(g), len(self.split.colours), len(self.split.inner)
        eye = np.broadcast_to(np.eye(Dx), (S, Dx, Dx))
        W = _cho_solve_matrix(L, eye)  # P^-1
        rows, cols, colours, reads = self._entries
        A = np.zeros((C, Dx, S))
        np.add.at(A, (colours, reads), np.moveaxis(W[:, rows, cols], 0, -1))
        U = np.zeros((S, C, self.dim))
        U[:, :, self.split.inner] = np.moveaxis(A, -1, 0)
        z = np.repeat(self.full(g, np.broadcast_to(self.x0, (S, Dx))), C, axis=0)
        V, U = np.tile(self._vectors, (S, 1)), U.reshape(S * C, self.dim)
        first = grad_of(lambda Z: anp.sum(self.log_joint(Z)))
        weighted = grad_of(lambda Z: anp.sum(grad_of(lambda Y: anp.sum(first(Y) * V))(Z) * U))
        out = np.asarray(weighted(z)).reshape(S, C, self.dim).sum(axis=1)
        self.work += 4 * S * C
        return 0.5 * out[:, self.split.outer]

    def _log_det_difference(self, g: np.ndarray) -> np.ndarray:
        S, Dg = g.shape
        shifted = np.concatenate([g + STEP * np.eye(Dg)[k] for k in range(Dg)]
                                 + [g - STEP * np.eye(Dg)[k] for k in range(Dg)])  # fmt: skip
        log_det = _log_det(self.precision(shifted)).reshape(2, Dg, S)
        return -0.5 * ((log_det[0] - log_det[1]) / (2 * STEP)).T


def _batched_cholesky(P: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Cholesky factors of a stack, in one LAPACK call; only where one is not positive definite
    row by row, that row's `ok` set False and its factor the identity."""
    try:
        return np.linalg.cholesky(P)
    except np.linalg.LinAlgError:
        pass
    L = np.tile(np.eye(P.shape[1]), (len(P), 1, 1))
    for s in np.flatnonzero(ok):
        try:
            L[s] = np.linalg.cholesky(P[s])
        except np.linalg.LinAlgError:
            ok[s] = False
    return L


def _cho_solve(L: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P^-1 b per row, for P = L L'."""
    y = np.linalg.solve(L, b[:, :, None])
    return np.linalg.solve(np.swapaxes(L, 1, 2), y)[:, :, 0]


def _cho_solve_matrix(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    return np.linalg.solve(np.swapaxes(L, 1, 2), np.linalg.solve(L, B))


def _log_det(P: np.ndarray) -> np.ndarray:
    sign, log_det = np.linalg.slogdet(P)
    return np.where(sign > 0, log_det, np.nan)
