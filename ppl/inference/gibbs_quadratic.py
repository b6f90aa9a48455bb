"""Incremental pair updates for local spike-and-slab pairs (z, w) whose row log joint is quadratic
in u = z .* w: a sweep over K pairs costs O(B K^2) arithmetic, not K evaluations of the model.

When, for each row i of the batch and given the globals,

    F_i(z, w) = b_i'u - u'G_i u / 2 + sum_k A_ik z_k - sum_k p_ik (w_k - m_ik)^2 / 2 + const,

(BPFA: a Gaussian likelihood linear in u, Bernoulli indicators, Gaussian weights), the exact pair
update of (z_ik, w_ik) needs only r_i = b_i - G_i u_i (the gradient of the quadratic part):
with w_k integrated out, the log-odds of z_k is

    A_k - p_k m_k^2 / 2 + h^2 / (2 c) + log(p_k / c) / 2,
    c = G_kk + p_k,   h = r_k + G_kk u_k + p_k m_k,

w_k | z_k = 1 is N(h / c, 1 / c) and w_k | z_k = 0 its prior N(m_k, 1 / p_k); then
r_i -= G_i[:, k] (u_k' - u_k). The coefficients are read off the compiled model once per batch
(the globals are fixed during the local step): G_i, b_i, p_i, m_i from K + 3 gradients of the
log joint in w (the points z = 1, w = 0 and w = e_k; z = 0, w = 0 and w = 1), A_ik from K + 1
values (z = e_k, w = 0, where u = 0 so only z's own terms move). Every row is done at once: each
point moves column k of every row, and rows are separate given the globals (ppl.inference.gibbs
checked). Nothing here knows BPFA: whether a model has this form is checked numerically, the
update against the exact six-point one (ppl.inference.gibbs) on a few coordinates of a batch;
if they differ, the sweep keeps the exact one.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import grad
from scipy.special import expit

_CHUNK = 32  # points per autograd call


class QuadraticPairs:
    """The pairs (Z[:, k], W[:, k]) of one binary latent and its slab, for a batch of B rows."""

    def __init__(self, plan, units: list, log_joint):
        """`units`: the plan's local units of the pair, one per k (columns (B,) each);
        `log_joint(X)`: the (S,) differentiable log joint of the batch model."""
        self.plan, self.units, self.log_joint = plan, units, log_joint
        self.zc = np.stack([u.binary for u in units], axis=1)  # (B, K) columns of z
        self.wc = np.stack([u.cont for u in units], axis=1)
        self.B, self.K = self.zc.shape

    def _grads(self, x: np.ndarray, points: list[tuple[float, np.ndarray]]) -> np.ndarray:
        """(n, B, K) the gradient of the log joint in w at x with z set to each point's value and
        w to each point's (B, K) values."""
        out = []
        for start in range(0, len(points), _CHUNK):
            chunk = points[start : start + _CHUNK]
            X = np.repeat(x[None], len(chunk), axis=0)
            for j, (z, w) in enumerate(chunk):
                X[j, self.zc] = z
                X[j, self.wc] = w
            g = grad(lambda Y: anp.sum(self.log_joint(Y)))(X)
            out.append(g[:, self.wc])
        return np.concatenate(out)

    def prepare(self, x: np.ndarray) -> None:
        """The coefficients at the globals in x (one state of the batch model)."""
        B, K = self.B, self.K
        zero, one = np.zeros((B, K)), np.ones((B, K))
        points = [(1.0, zero), (0.0, zero), (0.0, one)]
        for k in range(K):
            w = zero.copy()
            w[:, k] = 1.0
            points.append((1.0, w))
        g = self._grads(x, points)
        pm = g[1]
        self.p = g[1] - g[2]  # prior precision of each w
        with np.errstate(all="ignore"):
            self.m = np.where(self.p > 0, pm / self.p, 0.0)
        self.b = g[0] - pm
        # G[:, j, k] = g(1, 0)_j - g(1, e_k)_j - p_k [j == k]
        G = (g[0][:, :, None] - np.moveaxis(g[3:], 0, 2)).copy()
        G[:, np.arange(K), np.arange(K)] -= self.p
        self.G = 0.5 * (G + np.swapaxes(G, 1, 2))
        # A[:, k] from row energies at z = e_k, w = 0 against z = 0, w = 0
        X = np.repeat(x[None], K + 1, axis=0)
        X[:, self.wc] = 0.0
        X[:, self.zc] = 0.0
        for k in range(K):
            X[k + 1, self.zc[:, k]] = 1.0
        from ppl.inference.gibbs import _energies

        E = np.concatenate(
            [_energies(self.plan, X[a : a + _CHUNK], True) for a in range(0, K + 1, _CHUNK)]
        )
        self.A = (E[1:] - E[0]).T  # (B, K)

    def log_odds(self, u: np.ndarray, r: np.ndarray, k: int):
        """Per row: the log-odds of z_k with w_k integrated out, and (h, c) of w_k | z_k = 1."""
        Gkk, pk, mk = self.G[:, k, k], self.p[:, k], self.m[:, k]
        c = Gkk + pk
        h = r[:, k] + Gkk * u[:, k] + pk * mk
        with np.errstate(all="ignore"):
            lo = self.A[:, k] - 0.5 * pk * mk**2 + h * h / (2 * c) + 0.5 * np.log(pk / c)
        return lo, h, c

    def sweeps(self, X: np.ndarray, n: int, rng: np.random.Generator):
        """n sweeps on X (1, D) in place; yields P(z = 1) (B K,) after each, ordered as the
        plan's units (k major)."""
        x = X[0]
        z, w = x[self.zc].copy(), x[self.wc].copy()
        u = z * w
        r = self.b - np.einsum("ijk,ik->ij", self.G, u)
        for _ in range(n):
            probs = np.empty((self.B, self.K))
            for k in range(self.K):
                lo, h, c = self.log_odds(u, r, k)
                p = expit(lo)
                on = rng.uniform(size=self.B) < p
                pk = self.p[:, k]
                noise = rng.standard_normal(self.B)
                w[:, k] = np.where(on, h / c + noise / np.sqrt(c),
                                   self.m[:, k] + noise / np.sqrt(pk))  # fmt: skip
                z[:, k] = on
                new = np.where(on, w[:, k], 0.0)
                r -= self.G[:, :, k] * (new - u[:, k])[:, None]
                u[:, k] = new
                probs[:, k] = p
            X[0, self.zc], X[0, self.wc] = z, w
            yield probs.T.ravel()

    def agrees(self, X: np.ndarray, ks: list[int], rng: np.random.Generator) -> bool:
        """Whether the incremental log-odds and w | z = 1 equal the exact six-point ones at X
        for the coordinates ks."""
        from ppl.inference.gibbs import pair_conditionals

        x = X[0]
        z, w = x[self.zc], x[self.wc]
        u = z * w
        r = self.b - np.einsum("ijk,ik->ij", self.G, u)
        for k in ks:
            lo, h, c = self.log_odds(u, r, k)
            exact_lo, g1, c1, base = pair_conditionals(self.plan, X, self.units[k])
            mean_exact = (base + g1 / c1)[0]
            scale = 1.0 + np.abs(exact_lo[0])
            if not (np.all(np.abs(lo - exact_lo[0]) <= 1e-6 * scale)
                    and np.allclose(c, c1[0], rtol=1e-6)
                    and np.allclose(h / c, mean_exact, rtol=1e-6, atol=1e-8)):  # fmt: skip
                return False
        return True
