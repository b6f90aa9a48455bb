"""A linear map that is the identity except on disjoint pairs of coordinates, where it is a 2 x 2
block: the fixed-draw road's scaling by the gamma blocks' inverse Fisher information
(ppl.inference.saa.natural_factor), one (shape, rate) pair per gamma coordinate.

Kept as its diagonal, each row's partner and the partner's entry, so that a product costs O(n)
and not the O(n^2) of the dense matrix (gamma_normal: 3,686 parameters; the dense product and its
adjoint were a fifth of the fit's time, and solving with it once per solve a dense LU).
"""

from __future__ import annotations

import numpy as np


class PairScale:
    """R with R[i, i] = diag[i], R[i, partner[i]] = off[i] (0 where i has no partner)."""

    def __init__(self, n: int):
        self.n = int(n)
        self.diag = np.ones(self.n)
        self.off = np.zeros(self.n)
        self.partner = np.arange(self.n)

    def set_pairs(self, first: np.ndarray, second: np.ndarray, blocks: np.ndarray) -> None:
        """Blocks (m, 2, 2) on the positions (first[k], second[k]) (disjoint pairs)."""
        first, second = np.asarray(first, dtype=int), np.asarray(second, dtype=int)
        self.diag[first], self.off[first] = blocks[:, 0, 0], blocks[:, 0, 1]
        self.off[second], self.diag[second] = blocks[:, 1, 0], blocks[:, 1, 1]
        self.partner[first], self.partner[second] = second, first

    @property
    def shape(self) -> tuple[int, int]:
        return (self.n, self.n)

    def finite(self) -> bool:
        return bool(np.all(np.isfinite(self.diag)) and np.all(np.isfinite(self.off)))

    def __matmul__(self, v):
        """R v for a vector v (differentiable with autograd)."""
        return self.diag * v + self.off * v[self.partner]

    def rmatvec(self, v):
        """R^T v."""
        return self.diag * v + self.off[self.partner] * v[self.partner]

    def solve_transposed(self, v: np.ndarray) -> np.ndarray:
        """x with R^T x = v: per pair, the 2 x 2 system."""
        v = np.asarray(v, dtype=float)
        p = self.partner
        # on a pair (i, j): R^T = [[d_i, off_j], [off_i, d_j]] in rows (i, j)
        det = self.diag * self.diag[p] - self.off * self.off[p]
        paired = p != np.arange(self.n)
        with np.errstate(all="ignore"):
            x = np.where(paired, (self.diag[p] * v - self.off[p] * v[p]) / det, v / self.diag)
        return x

    def toarray(self) -> np.ndarray:
        """The dense matrix (for tests and inspection)."""
        R = np.diag(self.diag)
        rows = np.flatnonzero(self.partner != np.arange(self.n))
        R[rows, self.partner[rows]] = self.off[rows]
        return R
