"""Cheaper coefficients for the incremental pair updates (ppl.inference.gibbs_quadratic), each
checked numerically on the batch and dropped (the caller takes the exact K-point way) when the
check fails. Nothing here knows a model by name.

*Curvature by random directions.* G_i (K x K per row) is read exactly from K gradients of the
log joint, one per e_k. When G_i has low rank rho_i (BPFA: at most the row's observed pixels,
however large K is), r >= rho_i random directions V shared by every row give it exactly:
Y_i = G_i V and G_i = Y_i (V' Y_i)^+ Y_i' (Nystrom; exact when rank(V' G_i V) = rank(G_i), which
holds for random V with probability one). Two more random directions check it on every row;
if any row misses, more directions are added, up to K (then the exact way is cheaper). The rank
found is remembered, so the next batch starts with about the directions it needs.

*Prior log-odds from three values.* A_ik = log p(z_ik = 1, w = 0) - log p(z_ik = 0, w = 0) takes
K + 1 values of the model row-wise. When every term element that moves with z moves with one
z_ik only (the indicators' prior elementwise, as `Z[n] ~ bernoulli(pi)`), the elements' values at
z = 0 and at z = 1 give every A_ik at once, split by which (row, k) owns each element: the row
from the plan's row map (ppl.inference.gibbs.map_rows), k by a probe done once (the columns of z
whose index has bit b set are switched on, for every bit b). Each batch checks it at a random z:
every element must equal its value at z = 0 or at z = 1 as its owner is off or on.
"""

from __future__ import annotations

import numpy as np

from ppl.inference.blankets import stack_terms

_TESTS = 2  # check directions per probe
_START = 16  # directions before any rank is known
_RTOL = 1e-7  # agreement asked of a probed G (relative to the row's gradient scale)
_PAYS = 0.7  # probe with at most this fraction of K directions
_WAIT = 20  # batches without the curvature probe after it failed


def _nystrom(V: np.ndarray, Y: np.ndarray, noise: np.ndarray):
    """G = F diag(sign) F' from Y (B, K, r) = G V' for directions V (r, K): F (B, K, r), sign
    (B, r) (0 where an eigenvalue of V G V' is dropped as noise); and each row's rank."""
    C = V @ Y  # (B, r, r) = V G V'
    C = 0.5 * (C + np.swapaxes(C, 1, 2))
    lam, U = np.linalg.eigh(C)
    top = np.max(np.abs(lam), axis=1, keepdims=True)
    keep = np.abs(lam) > 1e-9 * np.maximum(top, noise[:, None])
    with np.errstate(all="ignore"):
        root = np.where(keep, 1.0 / np.sqrt(np.abs(lam)), 0.0)
    F = (Y @ U) * root[:, None, :]
    return F, np.where(keep, np.sign(lam), 0.0), keep.sum(axis=1)


def first_directions(pairs) -> np.ndarray | None:
    """(n, K) the directions a curvature probe starts with, or None when it would not pay (too
    many for K, or it failed lately: retried after _WAIT batches)."""
    if pairs.probe_wait > 0:
        pairs.probe_wait -= 1
        return None
    r = pairs.rank + 4 if pairs.rank else _START
    if r + _TESTS > _PAYS * pairs.K:
        return None
    return pairs.probe_rng.standard_normal((r + _TESTS, pairs.K))


def probed_curvature(pairs, x: np.ndarray, g10: np.ndarray, V: np.ndarray, g: np.ndarray):
    """G as low-rank factors (F, sign) from random directions (module docstring), or None when
    nearly as many directions as K would be needed. `g10`: the gradient in w at z = 1, w = 0;
    `V` (n, K) the first directions, `g` (n, B, K) the gradients at z = 1, w = each."""
    B, K = pairs.B, pairs.K
    r = len(V) - _TESTS
    Y = np.zeros((B, K, 0))
    V_done = np.zeros((0, K))
    scale = np.max(np.abs(g10), axis=1) + np.max(np.abs(pairs.p), axis=1) * np.sqrt(K)
    while r + _TESTS <= _PAYS * K:  # else the K exact gradients cost about the same
        if len(V) > len(V_done):
            new = V[len(V_done) :]
            if g is None:
                g = pairs._grads(x, [(1.0, np.broadcast_to(v, (B, K))) for v in new])
            GV = g10[None] - g - pairs.p[None] * new[:, None, :]  # (n, B, K): G_i v
            Y = np.concatenate([Y, np.moveaxis(GV, 0, 2)], axis=2)
            V_done, g = V, None
        F, sign, rank = _nystrom(V[:r], Y[:, :, :r], scale * K)
        measured = Y[:, :, r:]
        predicted = F @ (sign[:, :, None] * (np.swapaxes(F, 1, 2) @ V[r:].T))
        tol = _RTOL * (np.max(np.abs(measured), axis=(1, 2)) + scale)
        if np.all(np.abs(predicted - measured) <= tol[:, None, None]):
            pairs.rank = int(rank.max())
            return F, sign
        grow = _TESTS + max(8, r // 2)
        V = np.concatenate([V, pairs.probe_rng.standard_normal((grow, K))])
        r += grow
    pairs.rank, pairs.probe_wait = 0, _WAIT
    return None


def _terms(plan, X: np.ndarray) -> np.ndarray:
    """(n, M) the sampled term elements at the states X."""
    plan.evaluations += 1
    with np.errstate(all="ignore"):
        _, terms = plan.model.log_terms(X)
    return stack_terms(terms, plan.sampled, plan.sizes, len(X))


def _owners(pairs, base: np.ndarray) -> np.ndarray:
    """Per term element: row * K + k of the z that moves it (-1: none), by one probe per bit of
    k; -2 where an element has no single row."""
    plan, K = pairs.plan, pairs.K
    bits = max(1, int(np.ceil(np.log2(K))))
    ks = np.arange(K)
    X = np.repeat(base[None], bits + 2, axis=0)
    X[1, pairs.zc] = 1.0
    for b in range(bits):
        X[2 + b][pairs.zc[:, (ks >> b) & 1 == 1]] = 1.0
    T = _terms(plan, X)
    moved = ~np.isclose(T[1:], T[0], rtol=1e-12, atol=1e-12, equal_nan=True)
    code = np.zeros(T.shape[1], dtype=int)
    for b in range(bits):
        code |= moved[1 + b].astype(int) << b
    rm = plan.row_map.tocsr()
    counts = np.diff(rm.indptr)
    row = np.full(T.shape[1], -1)
    row[counts == 1] = rm.indices[rm.indptr[:-1][counts == 1]]
    owner = np.where(moved[0], row * K + code, -1)
    owner[moved[0] & ((row < 0) | (code >= K))] = -2
    return owner


def elementwise_prior(pairs, x: np.ndarray) -> np.ndarray | None:
    """A (B, K) from the term elements at z = 0 and z = 1 (w = 0), checked at a random z; None
    when the terms are not elementwise in z."""
    plan, B, K = pairs.plan, pairs.B, pairs.K
    if plan.row_map is None:
        return None
    base = x.copy()
    base[pairs.wc] = 0.0
    base[pairs.zc] = 0.0
    if pairs.owner is None:
        pairs.owner = _owners(pairs, base)
    owner = pairs.owner
    if np.any(owner == -2):
        return None
    check = pairs.probe_rng.uniform(size=(B, K)) < 0.5
    X = np.repeat(base[None], 3, axis=0)
    X[1, pairs.zc] = 1.0
    X[2, pairs.zc] = check.astype(float)
    T = _terms(plan, X)
    if not np.all(np.isfinite(T)):
        return None
    d1, dc = T[1] - T[0], T[2] - T[0]
    own = owner >= 0
    on = np.zeros(len(owner), dtype=bool)
    on[own] = check.ravel()[owner[own]]
    expected = np.where(on, d1, 0.0)
    tol = 1e-9 * (1.0 + np.abs(T[0]) + np.abs(T[1]))
    if np.any(np.abs(d1[~own]) > tol[~own]) or np.any(np.abs(dc - expected) > tol):
        pairs.owner = None  # found again at the next batch
        return None
    return np.bincount(owner[own], weights=d1[own], minlength=B * K).reshape(B, K)
