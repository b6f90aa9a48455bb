"""Markov blankets of the unconstrained coordinates, for Rao-Blackwellised score gradients.

Ranganath et al. (2014, eqs. 5-6): under a mean-field q, the gradient for latent i needs only the
terms of log p(x, z) that involve z_i; the other terms add variance and no signal. The graph IR
says which statements (and which log-Jacobians) a latent *variable* can reach. Within those, a
probe finds which *elements* of each statement's elementwise log density each coordinate moves:
the log joint's terms are evaluated at a point and at copies of it with one coordinate changed
(a new value for a continuous coordinate, the other value for a binary one). So `y[n] ~
normal(z[n] * mu, sigma)` puts only y[n]'s term in z[n]'s blanket, with no per-model code.

A model whose log joint is not the sum of the recorded terms (for instance one evaluated draw by
draw) gets one extra, "residual" term in every blanket: still unbiased, only less reduced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ppl.ir.graph import Graph

_PROBE_ROWS = 256  # perturbed copies evaluated at once


@dataclass
class Blankets:
    """matrix[m, d] = 1 when term element m is in coordinate d's blanket."""

    matrix: sparse.csc_matrix  # (M, D)
    sampled: list[bool]  # per recorded term: varies with the draw (else a constant)
    sizes: list[int]  # elements per sampled term
    residual: bool  # the log joint has a part no term recorded: it joins every blanket

    def local(self, total: np.ndarray, terms: list) -> np.ndarray:
        """(S, D): for each draw, the sum of the log-joint terms in each coordinate's blanket."""
        T = stack_terms(terms, self.sampled, self.sizes, total.shape[0])
        out = np.asarray(self.matrix.T @ T.T).T if T.shape[1] else np.zeros((len(total), 0))
        if self.residual:
            out = out + (total - T.sum(axis=1))[:, None]
        return out

    def sizes_per_coordinate(self) -> np.ndarray:
        return np.asarray(self.matrix.sum(axis=0)).ravel()


class TermLayoutError(ValueError):
    """The model's terms differ in number or shape from the probe's (data-dependent control)."""


def stack_terms(terms: list, sampled: list[bool], sizes: list[int], S: int) -> np.ndarray:
    """The sampled terms as one (S, M) array, each flattened per draw."""
    if len(terms) != len(sampled):
        raise TermLayoutError(f"{len(terms)} terms where the probe found {len(sampled)}")
    cols = []
    for (_, value), keep, m in zip(terms, sampled, sizes, strict=True):
        if not keep:
            continue
        arr = np.asarray(value, dtype=float)
        if arr.ndim == 0 or arr.shape[0] != S or arr.size != S * m:
            raise TermLayoutError(f"a term of shape {arr.shape} where ({S}, {m} elements) was seen")
        cols.append(arr.reshape(S, m))
    return np.concatenate(cols, axis=1) if cols else np.zeros((S, 0))


def allowed_keys(model, graph: Graph) -> dict[str, set[int]]:
    """Per latent, the ids of the statements and declarations (log-Jacobians) it can reach."""
    decl_of = {lat.name: lat.decl for lat in model.latents}
    out = {}
    for lat in model.latents:
        keys = {id(graph.statements[f.name]) for f in graph.factors_of(lat.name)}
        reach = {lat.name}
        changed = True
        while changed:  # latents whose bounds (hence log-Jacobians) depend on this one
            changed = False
            for other in model.latents:
                if other.name not in reach and other.bound_names & reach:
                    reach.add(other.name)
                    changed = True
        keys |= {id(decl_of[name]) for name in reach}
        out[lat.name] = keys
    return out


def _layout(model, point: np.ndarray):
    """Which terms carry the sample axis (their leading axis follows the number of rows)."""
    t2, terms2 = model.log_terms(np.repeat(point[None], 2, axis=0))
    t3, terms3 = model.log_terms(np.repeat(point[None], 3, axis=0))
    if len(terms2) != len(terms3):
        raise TermLayoutError("the number of log-joint terms depends on the number of draws")
    sampled, sizes = [], []
    for (_, a), (_, b) in zip(terms2, terms3, strict=True):
        a, b = np.asarray(a), np.asarray(b)
        keep = a.ndim >= 1 and b.ndim >= 1 and a.shape[0] == 2 and b.shape[0] == 3
        sampled.append(bool(keep))
        sizes.append(a.size // 2 if keep else 0)
    return [key for key, _ in terms2], sampled, sizes


def find_blankets(
    model,
    graph: Graph,
    points: list[np.ndarray],
    rng: np.random.Generator,
    columns: np.ndarray | None = None,
    probe: bool = True,
) -> Blankets:
    """Blankets of the unconstrained coordinates, from the IR and a probe at each of `points`.

    Only `columns` (default: all) are probed; the others get empty blankets. The probe costs one
    log-joint evaluation per coordinate and point, vectorised in batches. `probe=False` skips it:
    every element of a statement the IR allows is in the blanket.
    """
    keys, sampled, sizes = _layout(model, points[0])
    D = model.dim
    allowed = allowed_keys(model, graph)
    term_of_element = np.repeat(np.arange(len(keys)), sizes)  # sampled terms only have elements
    owner = np.empty(D, dtype=int)
    binary = np.zeros(D, dtype=bool)
    for i, lat in enumerate(model.latents):
        owner[lat.offset : lat.offset + lat.size] = i
        binary[lat.offset : lat.offset + lat.size] = lat.binary
    M = int(sum(sizes))
    rows_found: list[np.ndarray] = []
    cols_found: list[np.ndarray] = []
    residual = False
    probed = np.arange(D) if columns is None else np.asarray(columns, dtype=int)
    if not probe:
        r, c = np.meshgrid(np.arange(M), probed, indexing="ij")
        rows_found, cols_found = [r.ravel()], [c.ravel()]
    for point in points if probe else []:
        for start in range(0, len(probed), _PROBE_ROWS):
            cols = probed[start : start + _PROBE_ROWS]
            batch = np.repeat(point[None], len(cols) + 1, axis=0)
            step = rng.normal(0.0, 1.0, len(cols)) + np.sign(rng.normal(size=len(cols)))
            moved = np.where(binary[cols], 1.0 - point[cols], point[cols] + step)
            batch[np.arange(1, len(cols) + 1), cols] = moved
            with np.errstate(all="ignore"):
                total, terms = model.log_terms(batch)
                T = stack_terms(terms, sampled, sizes, len(batch))
                base, rest = T[0], T[1:]
                changed = ~np.isclose(rest, base, rtol=1e-12, atol=1e-12, equal_nan=True)
                left = total - T.sum(axis=1)
            left = left[np.isfinite(left)]
            if left.size and np.ptp(left) > 1e-8 * (1 + np.abs(total[np.isfinite(total)]).max()):
                residual = True
            r, c = np.nonzero(changed.T)
            rows_found.append(r)
            cols_found.append(cols[c])
    r = np.concatenate(rows_found) if rows_found else np.zeros(0, int)
    c = np.concatenate(cols_found) if cols_found else np.zeros(0, int)
    # keep what the IR allows: an element counts only if its statement is in the latent's blanket
    permitted = np.array(
        [[id(k) in allowed[lat.name] for lat in model.latents] for k in keys], dtype=bool
    ).reshape(len(keys), len(model.latents))
    ok = permitted[term_of_element[r], owner[c]]
    data = np.ones(int(ok.sum()))
    matrix = sparse.coo_matrix((data, (r[ok], c[ok])), shape=(M, D)).tocsc()
    matrix.data[:] = 1.0  # duplicates from several probe points
    return Blankets(matrix, sampled, sizes, residual)
