"""Rao-Blackwellised summaries of a collapsed q = q(g) N(x; x*(g), P(g)^-1)
(ppl.inference.collapse_fit): every output scalar y that is affine in the integrated x given g
(the integrated latents themselves, a non-centred latent loc + scale * x_raw, a linear
transformed parameter) has, given g, the Gaussian N(y(g, x*(g)), J P(g)^-1 J'), J its Jacobian in
x. Its mean, sd and quantiles are then those of a mixture of Gaussians over g: over the cells of
q's grid with their weights (quadrature: exact up to the grid's midpoint rule), or over draws of a
Gaussian or flow q(g). Neal's funnel: sd(x) = sqrt(E[e^v]) with v ~ N(0, 9), a quarter of which
lies beyond the largest of 4000 draws; the grid's quadrature over v gets it to 1e-6.

Affinity is checked numerically, never assumed: y(x* + d) - y(x*) along the whitened directions
d = L^-T e_j (L L' = P) gives J L^-T exactly when y is affine, and at a few nodes a random
direction's second difference must vanish and its first difference match. Scalars that fail
(and integer or random ones) keep their draw-based summaries."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from ppl.inference.draws import fixed_normal_draws
from ppl.inference.result import VIResult

#: The most rows (nodes x integrated coordinates) of output evaluations for the Jacobians.
MAX_ROWS = 300_000
#: Draws of a Gaussian or flow q(g) the mixture is taken over (fewer where MAX_ROWS says).
NODE_DRAWS = 2048
MIN_NODES = 200
#: Relative error within which y counts as affine in x.
AFFINE_TOL = 1e-6
#: Nodes at which the second differences are checked.
CHECK_NODES = 3
#: Grid cells lighter than this (relative to the heaviest) are left out.
LIGHT = 1e-16
#: Bisection steps for the mixture's quantiles, and its elements per step.
BISECTIONS = 52
BLOCK = 2_000_000
PROBS = (0.05, 0.5, 0.95)


@dataclass
class Nodes:
    """Where the mixture over g is taken: rows of g with normalised weights; `shape` is the
    grid's (cells per dimension) when they are its cell centres, None for draws."""

    g: np.ndarray
    weights: np.ndarray
    shape: tuple | None = None
    kept: np.ndarray | None = None  # the grid's cells kept (flat positions)
    log_q: np.ndarray | None = None  # q(g) at draws, for importance weights


@dataclass
class Exact:
    """Per output scalar (the order of `values`' columns): whether it is exact (affine in x
    given g), and the mixture's mean, mcse, sd and quantiles where it is."""

    exact: np.ndarray
    mean: np.ndarray
    mcse: np.ndarray
    sd: np.ndarray
    quantiles: np.ndarray  # (len(PROBS), scalars)
    grid: bool
    how: str | None = None  # how they were had, where not a collapse's (a closed form)


def grid_nodes(outer) -> Nodes:
    """The cell centres of a GridResult with its weights (the midpoint rule)."""
    n, Dg = outer.log_prob.shape[0], len(outer.centre)
    h = 2 * outer.half / n
    axis = -outer.half + h * (np.arange(n) + 0.5)
    w = np.stack(np.meshgrid(*[axis] * Dg, indexing="ij"), axis=-1).reshape(-1, Dg)
    lp = outer.log_prob.ravel()
    kept = np.flatnonzero(lp > lp.max() + np.log(LIGHT))
    p = np.exp(lp[kept] - lp.max())
    return Nodes(outer.centre + w[kept] @ outer.frame.T, p / p.sum(), outer.log_prob.shape, kept)


def draw_nodes(outer, rng: np.random.Generator, dx: int, seed: int = 0) -> Nodes | None:
    """Equal-weight draws of q(g), as many as MAX_ROWS allows (None below MIN_NODES): of a
    Gaussian q(g), scrambled Sobol points (ppl.inference.draws: the error of a smooth
    function's mean falls nearly as 1 / K, where plain draws of sigma in the measurement-error
    model left its sd 10 % off at K = 1000), of a flow its own draws."""
    k = min(NODE_DRAWS, MAX_ROWS // max(dx, 1))
    if k < MIN_NODES:
        return None
    if type(outer) is VIResult:
        k = 1 << int(np.log2(k))  # a power of two: Sobol balance
        z = fixed_normal_draws(k, len(outer.mean), seed)
        g = outer.mean + z @ np.asarray(outer.scale_tril, dtype=float).T
    else:
        g = np.asarray(outer.sample(rng, k), dtype=float)
    with np.errstate(all="ignore"):
        log_q = np.asarray(outer.log_q(g), dtype=float)
    return Nodes(g, np.full(k, 1.0 / k), log_q=log_q)


def exact_moments(collapsed, nodes: Nodes, values, rng: np.random.Generator,
                  candidates: np.ndarray | None = None, smooth=None) -> Exact | None:  # fmt: skip
    """The mixture's moments per column of `values(zeta) -> (rows, scalars)` (deterministic in
    zeta: the caller's output function with a fixed rng); `candidates` (bool per column): the
    columns that may be exact (not integers); `smooth(log_ratios) -> log_weights` (PSIS): draw
    nodes importance-weighted by the collapsed density over q(g). Nodes go in chunks that hold
    at most MAX_FLOATS numbers. None where the nodes' conditionals are not proper or the
    Jacobians would take more than MAX_ROWS rows."""
    Dx = len(collapsed.split.inner)
    K = len(nodes.g)
    if K * Dx > MAX_ROWS:
        return None
    Ny = _evaluate(values, collapsed.full(nodes.g[:1], collapsed.x0[None, :])).shape[1]
    weigh = smooth is not None and nodes.log_q is not None
    step = max(1, MAX_FLOATS // (Dx * (Dx + Ny)))
    parts = [_node_moments(collapsed, values, nodes.g[i : i + step], weigh)
             for i in range(0, K, step)]  # fmt: skip
    Y0, s2, ok, log_p = (np.concatenate([p[j] for p in parts]) for j in (0, 1, 2, 4))
    finite = np.all([p[3] for p in parts], axis=0)
    if np.sum(nodes.weights[~ok]) > 1e-9:
        return None
    w = np.where(ok, nodes.weights, 0.0)
    if weigh:
        w = np.exp(np.asarray(smooth(np.where(ok, log_p - nodes.log_q, -np.inf)), dtype=float))
    keep = w > 0
    g, Y0, s2, w = nodes.g[keep], Y0[keep], s2[keep], w[keep] / w[keep].sum()
    exact = _affine(collapsed, values, g, Y0, w, rng) & finite
    if candidates is not None:
        exact &= candidates
    exact &= np.all(np.isfinite(Y0), axis=0)
    m, s2 = Y0[:, exact], s2[:, exact]  # (K, E)
    mean = w @ m
    sd = np.sqrt(np.maximum(w @ (s2 + (m - mean) ** 2), 0.0))
    mcse = np.zeros_like(mean) if nodes.shape else np.sqrt(np.maximum(w**2 @ (m - mean) ** 2, 0))
    spread = s2 + _cell_spread(m, nodes, keep)
    out = Exact(exact, np.full(Ny, np.nan), np.full(Ny, np.nan), np.full(Ny, np.nan),
                np.full((len(PROBS), Ny), np.nan), nodes.shape is not None)  # fmt: skip
    out.mean[exact], out.mcse[exact], out.sd[exact] = mean, mcse, sd
    out.quantiles[:, exact] = mixture_quantiles(m, np.sqrt(spread), w, PROBS)
    return out


#: Rows per call of the output function.
CHUNK_ROWS = 8192
#: Numbers held at once per chunk of nodes: its Cholesky factors and whitened directions
#: (nodes x Dx x Dx) and its outputs along them (nodes x Dx x scalars).
MAX_FLOATS = 4_000_000


def _evaluate(values, rows: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        parts = [np.asarray(values(rows[i : i + CHUNK_ROWS]), dtype=float)
                 for i in range(0, len(rows), CHUNK_ROWS)]  # fmt: skip
    return np.concatenate(parts)


def _node_moments(collapsed, values, g: np.ndarray, weigh: bool):
    """At rows of g: y(x*), sum_j (y(x* + d_j) - y(x*))^2 = diag(J P^-1 J'), whether each
    conditional is proper, whether each column's differences are finite (at the proper ones),
    and the collapsed log density where the nodes are to be weighed (else zeros)."""
    x_star, L, *_, ok = collapsed.conditional(g)
    D, Y0, Jw = _jacobian(collapsed, values, g, x_star, L)
    finite = np.all(np.isfinite(Jw[ok]), axis=(0, 1))
    log_p = np.zeros(len(g))
    if weigh:
        with np.errstate(all="ignore"):
            at_mode = np.asarray(collapsed.log_joint(collapsed.full(g, x_star)), dtype=float)
            log_det = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
        log_p = at_mode + 0.5 * x_star.shape[1] * np.log(2 * np.pi) - log_det
        ok = ok & np.isfinite(log_p)
    return Y0, np.sum(Jw**2, axis=1), ok, finite, log_p


def _jacobian(collapsed, values, g, x_star, L):
    """The whitened directions d_j = L^-T e_j (one conditional sd along each), y(x*), and
    y(x* + d_j) - y(x*) = J L^-T when y is affine in x: (K, Dx, Ny)."""
    K, Dx = x_star.shape
    D = np.linalg.solve(np.swapaxes(L, 1, 2), np.broadcast_to(np.eye(Dx), (K, Dx, Dx)))
    Y0 = _evaluate(values, collapsed.full(g, x_star))  # (K, Ny)
    steps = x_star[:, None, :] + np.swapaxes(D, 1, 2)  # (K, Dx, Dx): row j is x* + d_j
    Yj = _evaluate(values, collapsed.full(np.repeat(g, Dx, axis=0), steps.reshape(K * Dx, Dx)))
    return D, Y0, Yj.reshape(K, Dx, -1) - Y0[:, None, :]


def _affine(collapsed, values, g, Y0, w, rng) -> np.ndarray:
    """Per column: at CHECK_NODES nodes (the heaviest and draws by weight), along a random
    combination c of the whitened directions (two conditional sds long), y(x* + u) - y(x*)
    equals Jw c and y(x* + u) + y(x* - u) - 2 y(x*) vanishes; and y(x*) does not change with
    the output function's random numbers (a generated quantity drawn by an _rng)."""
    K = len(g)
    picks = np.unique(np.concatenate([[int(np.argmax(w))],
                                      rng.choice(K, size=CHECK_NODES - 1, p=w)]))  # fmt: skip
    gp = g[picks]
    xp, L, *_ = collapsed.conditional(gp)
    D, again, Jw = _jacobian(collapsed, values, gp, xp, L)
    c = rng.standard_normal(xp.shape)
    c *= 2.0 / np.linalg.norm(c, axis=1, keepdims=True)
    u = np.einsum("kij,kj->ki", D, c)
    rows = collapsed.full(np.concatenate([gp, gp]), np.concatenate([xp + u, xp - u]))
    plus, minus = _evaluate(values, rows).reshape(2, len(picks), -1)
    base = Y0[picks]
    first = plus - base
    scale = np.abs(base) + np.abs(first) + np.sqrt(np.sum(Jw**2, axis=1)) + 1e-300
    with np.errstate(all="ignore"):
        linear = np.abs(first - np.einsum("kj,kjn->kn", c, Jw)) <= AFFINE_TOL * scale
        flat = np.abs(plus + minus - 2 * base) <= AFFINE_TOL * scale
        same = np.abs(again - base) <= AFFINE_TOL * scale
    return np.all(linear & flat & same, axis=0)


def _cell_spread(m: np.ndarray, nodes: Nodes, keep: np.ndarray) -> np.ndarray:
    """The variance of each kept column's conditional mean within a grid cell (its change
    across the cell, squared, over 12, along each axis), so that quantiles of a scalar of g
    are not those of point masses at the cell centres; 0 for draws."""
    if nodes.shape is None:
        return np.zeros_like(m)
    full = np.full((int(np.prod(nodes.shape)), m.shape[1]), np.nan)
    full[nodes.kept[keep]] = m
    full = full.reshape(*nodes.shape, m.shape[1])
    spread = np.zeros_like(full)
    for a in range(len(nodes.shape)):
        if nodes.shape[a] > 1:
            spread += np.nan_to_num(np.gradient(full, axis=a)) ** 2 / 12.0
    return spread.reshape(-1, m.shape[1])[nodes.kept[keep]]


def mixture_quantiles(m: np.ndarray, s: np.ndarray, w: np.ndarray, probs) -> np.ndarray:
    """Quantiles of the mixtures sum_k w_k N(m_k, s_k^2), one per column of m and s (K, N), by
    bisection on the mixture's CDF, vectorised over columns and probabilities (s_k = 0: a
    point mass)."""
    K, N = m.shape
    probs = np.asarray(probs, dtype=float)[:, None]
    lo = np.broadcast_to(np.min(m - 10 * s, axis=0), (len(probs), N)).copy()
    hi = np.broadcast_to(np.max(m + 10 * s, axis=0), (len(probs), N)).copy()
    step = max(1, BLOCK // max(K * len(probs), 1))
    for start in range(0, N, step):
        part = slice(start, min(start + step, N))
        mp, sp = m[:, part], s[:, part]
        for _ in range(BISECTIONS):
            t = 0.5 * (lo[:, part] + hi[:, part])
            with np.errstate(all="ignore"):
                z = (t[:, None, :] - mp[None]) / sp[None]
                cdf = np.where(sp[None] > 0, ndtr(z), (t[:, None, :] >= mp[None]).astype(float))
            below = np.einsum("k,pkn->pn", w, cdf) < probs
            lo[:, part] = np.where(below, t, lo[:, part])
            hi[:, part] = np.where(below, hi[:, part], t)
    return 0.5 * (lo + hi)


def flat(draws: dict) -> np.ndarray:
    """(rows, scalars) of a dict of output arrays, in ppl.outputs.summary.flatten_draws's
    order (declaration order, Stan's column-major element order)."""
    columns = []
    for arr in draws.values():
        arr = np.asarray(arr)
        axes = (0,) + tuple(reversed(range(1, arr.ndim)))
        columns.append(np.transpose(arr, axes).reshape(arr.shape[0], -1).astype(float))
    return np.concatenate(columns, axis=1) if columns else np.zeros((0, 0))


def summaries_of(q, model, draws: dict, seed: int, smooth=None) -> Exact | None:
    """The Rao-Blackwellised moments of a collapsed q's outputs (columns as `flat(draws)`;
    integer outputs keep their draws), over its grid's cells or draws of q(g)."""
    from ppl.inference.collapse_grid import GridResult

    rng = np.random.default_rng(seed)
    collapsed = q.collapsed
    if isinstance(q.outer, GridResult):
        nodes, smooth = grid_nodes(q.outer), None  # q is the density at the cells: no weights
    else:
        nodes = draw_nodes(q.outer, rng, len(collapsed.split.inner), seed)
    if nodes is None:
        return None
    candidates = np.concatenate([np.full(int(np.prod(np.shape(a)[1:], dtype=int)),
                                         np.asarray(a).dtype.kind == "f")
                                 for a in draws.values()])  # fmt: skip
    outputs = np.random.default_rng(seed + 1)  # advances: a random output is not reproduced

    def values(zeta):
        return flat(model.constrained_draws(np.asarray(zeta, dtype=float), outputs))

    return exact_moments(collapsed, nodes, values, rng, candidates, smooth)
