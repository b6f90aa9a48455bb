"""Incremental pair updates for *global* spike-and-slab pairs (z, w), the chains in parallel.

Spike-and-slab regression's indicators are global: one (z, w) of K pairs per chain, every pair
explaining all of y. The exact update of a pair (ppl.inference.gibbs) costs one model call of 6
points per chain per pair, so a sweep is K calls and an iteration of 3 + 3 sweeps 6 K calls
(Boston, K = 13: 78 calls an iteration, 90 % of the fit's time). When the log joint of a chain
is quadratic in u = z .* w given its globals (the form of ppl.inference.gibbs_quadratic: a
Gaussian likelihood linear in u, Bernoulli indicators, Gaussian slabs), the same update needs
only the chain's coefficients (b, G, A, p, m), read off the model once per iteration with
K + 3 gradients and K + 1 values per chain, all chains in one call each; a sweep is then O(S K^2)
arithmetic. The chains play the part the rows of a batch play in QuadraticPairs (their
coefficients differ: each chain has its own draw of the globals), and the sweep itself is
QuadraticPairs' own. Whether the form holds is checked against the exact six-point update on a
few coordinates of every chain before it is used (LocalGlobal.try_incremental); nothing here
knows a model by name.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import grad

from ppl.inference.gibbs_quadratic import QuadraticPairs

_POINTS = 2048  # points per model call when reading the coefficients (memory, not speed)


class ChainPairs(QuadraticPairs):
    """The K global pairs (z_k, w_k) of one binary latent and its slab, for S chains: z, w are
    (S, K), row s of every coefficient array is chain s's."""

    probe = False  # the rows are chains: no shared row map for gibbs_probe's shortcuts

    def __init__(self, plan, units: list, log_joint, values):
        """`units`: the plan's global pair units in order (one column each); `log_joint(X)`
        the (n,) differentiable log joint; `values(X)` its (n,) values (no gradient)."""
        self.plan, self.units, self.log_joint, self.values = plan, units, log_joint, values
        self.zc = np.array([int(u.binary[0]) for u in units])  # (K,) columns of z
        self.wc = np.array([int(u.cont[0]) for u in units])
        self.K = len(units)
        self.B = 0  # chains: set by prepare
        self.factors, self._G, self.rank = None, None, 0
        self.gradient_points = self.value_points = 0  # what the coefficients cost, counted

    def _read(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return X[:, self.zc].copy(), X[:, self.wc].copy()

    def _write(self, X: np.ndarray, z: np.ndarray, w: np.ndarray) -> None:
        X[:, self.zc], X[:, self.wc] = z, w

    def _out(self, probs: np.ndarray) -> np.ndarray:
        return probs  # (S, K): chains by the plan's global units

    def _points(self, X: np.ndarray, settings: list[tuple[np.ndarray, np.ndarray]]):
        """(S, n, D): each chain's state with (z, w) set to each of n settings ((K,) each or
        (S, K))."""
        P = np.repeat(X[:, None, :], len(settings), axis=1)
        for j, (z, w) in enumerate(settings):
            P[:, j, self.zc] = z
            P[:, j, self.wc] = w
        return P

    def prepare(self, X: np.ndarray) -> None:
        """Every chain's coefficients at its globals in X (S, D): G, b, p, m from K + 3
        gradients in w per chain (z = 1, w = 0; z = 0, w = 0 and w = 1; z = 1, w = e_k), A from
        K + 1 values (z = e_k against z = 0, w = 0: u = 0, so only z's own terms move)."""
        S, K = X.shape[0], self.K
        self.B = S
        zero, one, eye = np.zeros(K), np.ones(K), np.eye(K)
        P = self._points(X, [(one, zero), (zero, zero), (zero, one)]
                         + [(one, eye[k]) for k in range(K)])  # fmt: skip
        g = self._gradients(P.reshape(S * (K + 3), -1)).reshape(S, K + 3, -1)[:, :, self.wc]
        g10, pm = g[:, 0], g[:, 1]
        self.p = pm - g[:, 2]
        with np.errstate(all="ignore"):
            self.m = np.where(self.p > 0, pm / self.p, 0.0)
        self.b = g10 - pm
        G = g10[:, :, None] - np.swapaxes(g[:, 3:], 1, 2)  # G[:, j, k] = g10_j - g(1, e_k)_j
        G[:, np.arange(K), np.arange(K)] -= self.p
        self.G = 0.5 * (G + np.swapaxes(G, 1, 2))
        self.diag = np.einsum("skk->sk", self.G).copy()
        Z = self._points(X, [(zero, zero)] + [(eye[k], zero) for k in range(K)])
        E = self._values(Z.reshape(S * (K + 1), -1)).reshape(S, K + 1)
        self.A = E[:, 1:] - E[:, :1]

    def _gradients(self, P: np.ndarray) -> np.ndarray:
        self.gradient_points += len(P)
        out = [grad(lambda Y: anp.sum(self.log_joint(Y)))(P[a : a + _POINTS])
               for a in range(0, len(P), _POINTS)]  # fmt: skip
        return np.concatenate(out)

    def _values(self, P: np.ndarray) -> np.ndarray:
        self.value_points += len(P)
        return np.concatenate([self.values(P[a : a + _POINTS]) for a in range(0, len(P), _POINTS)])

    def usable(self) -> bool:
        """Every slab a proper Gaussian in every chain (its prior precision and, switched on,
        its conditional precision positive), every coefficient finite."""
        with np.errstate(invalid="ignore"):
            finite = all(np.all(np.isfinite(a)) for a in (self.p, self.b, self.G, self.A))
            return bool(finite and np.all(self.p > 0) and np.all(self.diag + self.p > 0))

    def agrees(self, X: np.ndarray, ks: list[int], rng: np.random.Generator) -> bool:
        """Whether the incremental log-odds and w | z = 1 equal the exact six-point ones of
        ppl.inference.gibbs in every chain of X for the coordinates ks."""
        from ppl.inference.gibbs import pair_conditionals

        z, w = self._read(X)
        u = z * w
        r = self.b - np.einsum("sjk,sk->sj", self.G, u)
        for k in ks:
            lo, h, c = self.log_odds(u, r[:, k], k)
            exact_lo, g1, c1, base = pair_conditionals(self.plan, X, self.units[k], per_row=False)
            exact_lo, g1, c1, base = exact_lo[:, 0], g1[:, 0], c1[:, 0], base[:, 0]
            scale = 1.0 + np.abs(exact_lo)
            if not (np.all(np.abs(lo - exact_lo) <= 1e-6 * scale)
                    and np.allclose(c, c1, rtol=1e-6)
                    and np.allclose(h / c, base + g1 / c1, rtol=1e-6, atol=1e-8)):  # fmt: skip
                return False
        return True
