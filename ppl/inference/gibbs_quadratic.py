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
values (z = e_k, w = 0, where u = 0 so only z's own terms move); ppl.inference.gibbs_probe
gets G from about rank(G_i) + 2 random directions and A from three values when it can, each
checked on the batch (the K-point way otherwise). Every row is done at once: each
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

from ppl.inference import gibbs_probe

_CHUNK = 32  # points per autograd call


class QuadraticPairs:
    """The pairs (Z[:, k], W[:, k]) of one binary latent and its slab, for a batch of B rows."""

    probe = True  # the shortcuts of ppl.inference.gibbs_probe (checked each batch), or K points

    def __init__(self, plan, units: list, log_joint):
        """`units`: the plan's local units of the pair, one per k (columns (B,) each);
        `log_joint(X)`: the (S,) differentiable log joint of the batch model."""
        self.plan, self.units, self.log_joint = plan, units, log_joint
        self.zc = np.stack([u.binary for u in units], axis=1)  # (B, K) columns of z
        self.wc = np.stack([u.cont for u in units], axis=1)
        self.B, self.K = self.zc.shape
        self.rank = 0  # directions the last probed G needed (0: none yet)
        self.probe_wait = 0  # batches before the curvature probe is tried again
        self.owner: np.ndarray | None = None  # term element -> k of its z (elementwise prior)
        self.exact_curvatures = self.exact_priors = 0  # fallbacks taken
        self._G: np.ndarray | None = None
        self.factors = None  # (F (B, K, rank), sign (B, rank)): G = F diag(sign) F', if probed
        self.probe_rng = np.random.default_rng(0)
        self.gradient_points = 0  # gradients of the batch model the coefficients took, counted

    def _grads(self, x: np.ndarray, points: list[tuple[float, np.ndarray]]) -> np.ndarray:
        """(n, B, K) the gradient of the log joint in w at x with z set to each point's value and
        w to each point's (B, K) values."""
        self.gradient_points += len(points)
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
        # the probe's first directions ride with these three points (one model call)
        V = gibbs_probe.first_directions(self) if self.probe else None
        extra = [] if V is None else [(1.0, np.broadcast_to(v, (B, K))) for v in V]
        g = self._grads(x, [(1.0, zero), (0.0, zero), (0.0, one)] + extra)
        pm = g[1]
        self.p = g[1] - g[2]  # prior precision of each w
        with np.errstate(all="ignore"):
            self.m = np.where(self.p > 0, pm / self.p, 0.0)
        self.b = g[0] - pm
        self.factors = None
        if V is not None:
            self.factors = gibbs_probe.probed_curvature(self, x, g[0], V, g[3:])
        if self.factors is None:
            self.G = self._exact_curvature(x, g[0])
            self.diag = np.einsum("ikk->ik", self.G).copy()
        else:
            F, sign = self.factors
            self._G = None  # formed when asked for (the sweeps use the factors)
            self.diag = np.einsum("ikr,ir,ikr->ik", F, sign, F)
        A = gibbs_probe.elementwise_prior(self, x) if self.probe else None
        self.A = A if A is not None else self._exact_prior(x)

    def _exact_curvature(self, x: np.ndarray, g10: np.ndarray) -> np.ndarray:
        """G from K gradients: G[:, j, k] = g(1, 0)_j - g(1, e_k)_j - p_k [j == k]."""
        B, K = self.B, self.K
        points = []
        for k in range(K):
            w = np.zeros((B, K))
            w[:, k] = 1.0
            points.append((1.0, w))
        g = self._grads(x, points)
        G = (g10[:, :, None] - np.moveaxis(g, 0, 2)).copy()
        G[:, np.arange(K), np.arange(K)] -= self.p
        self.exact_curvatures += 1
        return 0.5 * (G + np.swapaxes(G, 1, 2))

    def _exact_prior(self, x: np.ndarray) -> np.ndarray:
        """A[:, k] from row energies at z = e_k, w = 0 against z = 0, w = 0 (K + 1 values)."""
        from ppl.inference.gibbs import _energies

        K = self.K
        X = np.repeat(x[None], K + 1, axis=0)
        X[:, self.wc] = 0.0
        X[:, self.zc] = 0.0
        for k in range(K):
            X[k + 1, self.zc[:, k]] = 1.0
        E = np.concatenate(
            [_energies(self.plan, X[a : a + _CHUNK], True) for a in range(0, K + 1, _CHUNK)]
        )
        self.exact_priors += 1
        return (E[1:] - E[0]).T  # (B, K)

    @property
    def G(self) -> np.ndarray:
        """(B, K, K) the rows' quadratic forms (from the factors when probed)."""
        if self._G is None:
            F, sign = self.factors
            self._G = (F * sign[:, None, :]) @ np.swapaxes(F, 1, 2)
        return self._G

    @G.setter
    def G(self, value: np.ndarray) -> None:
        self._G = value

    def log_odds(self, u: np.ndarray, rk: np.ndarray, k: int):
        """Per row: the log-odds of z_k with w_k integrated out, and (h, c) of w_k | z_k = 1;
        `rk` is column k of r = b - G u."""
        Gkk, pk, mk = self.diag[:, k], self.p[:, k], self.m[:, k]
        c = Gkk + pk
        h = rk + Gkk * u[:, k] + pk * mk
        with np.errstate(all="ignore"):
            lo = self.A[:, k] - 0.5 * pk * mk**2 + h * h / (2 * c) + 0.5 * np.log(pk / c)
        return lo, h, c

    def _read(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(z, w), each (B, K), from the state X (1, D): row i of the batch is row i here."""
        return X[0, self.zc].copy(), X[0, self.wc].copy()

    def _write(self, X: np.ndarray, z: np.ndarray, w: np.ndarray) -> None:
        X[0, self.zc], X[0, self.wc] = z, w

    def _out(self, probs: np.ndarray) -> np.ndarray:
        """(B, K) per-row probabilities as the sweep yields them: (1, B K), k major."""
        return probs.T.ravel()[None]

    def sweeps(self, X: np.ndarray, n: int, rng: np.random.Generator):
        """n sweeps on X (1, D) in place; yields P(z = 1) (1, B K) after each, ordered as the
        plan's units (k major)."""
        z, w = self._read(X)
        u = z * w
        r = _Residual(self, u)
        for _ in range(n):
            probs = np.empty((self.B, self.K))
            for k in range(self.K):
                lo, h, c = self.log_odds(u, r.column(k), k)
                p = expit(lo)
                on = rng.uniform(size=self.B) < p
                pk = self.p[:, k]
                noise = rng.standard_normal(self.B)
                w[:, k] = np.where(on, h / c + noise / np.sqrt(c),
                                   self.m[:, k] + noise / np.sqrt(pk))  # fmt: skip
                z[:, k] = on
                new = np.where(on, w[:, k], 0.0)
                r.move(k, new - u[:, k])
                u[:, k] = new
                probs[:, k] = p
            self._write(X, z, w)
            yield self._out(probs)

    def meanfield_sweeps(self, X: np.ndarray, n: int, rng: np.random.Generator):
        """The paper's MF-SSVI local step on these pairs: q(z_k) q(w_k) = Bernoulli(theta_k)
        N(nu_k, 1 / kappa_k), n passes of coordinate ascent on the local ELBO (closed form in
        the quadratic coefficients, with E[u_k] = theta_k nu_k, E[u_k^2] = theta_k (nu_k^2 +
        1 / kappa_k)): kappa_k = theta_k G_kk + p_k, nu_k = (theta_k rest_k + p_k m_k) / kappa_k,
        logit theta_k = A_k + nu_k rest_k - G_kk (nu_k^2 + 1 / kappa_k) / 2, rest_k = b_k -
        sum_{j != k} G_kj E[u_j]; started at the row's last state; after each pass a draw of q
        into X. Yields theta ordered as sweeps()."""
        theta, nu = self._read(X)
        kappa = self.p.copy()
        ubar = theta * nu
        r = _Residual(self, ubar)  # b - G E[u]
        for _ in range(n):
            for k in range(self.K):
                Gkk, pk, mk = self.diag[:, k], self.p[:, k], self.m[:, k]
                rest = r.column(k) + Gkk * ubar[:, k]  # b_k - sum_{j != k} G_kj E[u_j]
                # q(w_k) at the current theta_k, then theta_k at that q(w_k)
                kappa[:, k] = theta[:, k] * Gkk + pk
                nu[:, k] = (theta[:, k] * rest + pk * mk) / kappa[:, k]
                second = nu[:, k] ** 2 + 1 / kappa[:, k]  # E[w_k^2]
                theta[:, k] = expit(self.A[:, k] + nu[:, k] * rest - 0.5 * Gkk * second)
                new = theta[:, k] * nu[:, k]
                r.move(k, new - ubar[:, k])
                ubar[:, k] = new
            on = rng.uniform(size=theta.shape) < theta
            w = nu + rng.standard_normal(nu.shape) / np.sqrt(kappa)
            self._write(X, on.astype(float), w)
            yield self._out(theta)

    def agrees(self, X: np.ndarray, ks: list[int], rng: np.random.Generator) -> bool:
        """Whether the incremental log-odds and w | z = 1 equal the exact six-point ones at X
        for the coordinates ks."""
        from ppl.inference.gibbs import pair_conditionals

        x = X[0]
        z, w = x[self.zc], x[self.wc]
        u = z * w
        r = self.b - np.einsum("ijk,ik->ij", self.G, u)
        for k in ks:
            lo, h, c = self.log_odds(u, r[:, k], k)
            exact_lo, g1, c1, base = pair_conditionals(self.plan, X, self.units[k])
            mean_exact = (base + g1 / c1)[0]
            scale = 1.0 + np.abs(exact_lo[0])
            if not (np.all(np.abs(lo - exact_lo[0]) <= 1e-6 * scale)
                    and np.allclose(c, c1[0], rtol=1e-6)
                    and np.allclose(h / c, mean_exact, rtol=1e-6, atol=1e-8)):  # fmt: skip
                return False
        return True


class _Residual:
    """r = b - G u of every row, read one column at a time as u moves one column at a time:
    from G's factors (s = F'u kept, O(B rank) a read or move) when probed, else kept whole
    (O(B K) a move)."""

    def __init__(self, pairs: QuadraticPairs, u: np.ndarray):
        self.b = pairs.b
        if pairs.factors is not None:
            F, sign = pairs.factors
            self.F = np.ascontiguousarray(np.moveaxis(F, 1, 0))  # (K, B, rank)
            self.Fs = self.F * sign[None]
            self.s = np.einsum("kir,ik->ir", self.F, u)
            self.r = None
        else:
            self.G = pairs.G
            self.r = pairs.b - np.einsum("ijk,ik->ij", self.G, u)

    def column(self, k: int) -> np.ndarray:
        if self.r is None:
            return self.b[:, k] - np.einsum("ir,ir->i", self.Fs[k], self.s)
        return self.r[:, k]

    def move(self, k: int, delta: np.ndarray) -> None:
        """u[:, k] += delta."""
        if self.r is None:
            self.s += self.F[k] * delta[:, None]
        else:
            self.r -= self.G[:, :, k] * delta[:, None]
