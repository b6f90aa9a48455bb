"""A normalizing flow on the unconstrained scale: the family `auto` tries where the best Gaussian
still fails PSIS (curved, skewed or funnel-shaped posteriors).

    eps ~ N(0, I_D)  ->  sinh-arcsinh per coordinate  ->  K affine coupling layers  ->  affine

* sinh-arcsinh (Jones & Pewsey 2009): u -> sinh(exp(tau) asinh(u) - skew), a monotone map that
  skews a marginal and makes its tails heavier or lighter; the identity at (skew, tau) = 0;
* affine coupling (RealNVP, Dinh, Sohl-Dickstein & Bengio 2017): the coordinates outside a mask
  m are scaled and shifted by functions of those inside it, u -> m u + (1 - m)(u exp(s) + t),
  s and t from a one-hidden-layer tanh network of m u; s bounded by CLAMP tanh(./CLAMP); the
  identity when the network's output weights are 0 (its input weights start random, so the
  gradient in the output weights is not 0 there);
* affine: zeta = m0 + C (a + B u), B lower triangular with a log diagonal, relative to a start
  N(m0, C C') (the best Gaussian so far): theta's Gaussian part is FullRankGaussian's.

`initial()` is therefore exactly the start Gaussian, and the family contains every full-rank
Gaussian. Every step is invertible in closed form (the coupling's s, t depend only on the part
it leaves unchanged; sinh-arcsinh and the affine map invert directly), so log q of any zeta is
exact: log N(eps; 0, I) - log |det d zeta / d eps|, the log-determinant a sum of the layers'
(the coupling's: sum of s; sinh-arcsinh's: log(exp(tau) cosh(w) / sqrt(1 + u^2))).
All maps act on all draws at once (autograd through numpy arrays, no per-draw Python).
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np

from ppl.families.gaussian import lower_from

#: The family's name (fit.json's method and the label's title say it).
FLOW = "flow"
#: How a label describes it.
FLOW_TITLE = "normalizing flow (sinh-arcsinh marginals, affine coupling layers, full-rank affine)"

LOG_2PI = float(np.log(2 * np.pi))
#: Coupling layers, hidden units of each layer's network.
LAYERS, HIDDEN = 4, 8
#: The coupling's log scales are bounded by this (a factor e^2 = 7.4 either way per layer), and
#: sinh-arcsinh's log tail weight tau by TAU_BOUND (tail exponents in [e^-1, e]): with e^4 and
#: tau free, the truncated-normal posterior's flow squeezed a coordinate 10-fold and stretched
#: it back, and sent q's tails where the 256 fixed draws were not (ELBO on fresh draws -469 +-
#: 361 against the Gaussian's -96.0; bounded: -95.7).
CLAMP = 2.0
TAU_BOUND = 1.0


def coupling_masks(dim: int, layers: int = LAYERS) -> list[np.ndarray]:
    """Alternating masks, odd/even coordinates then first/second half, so that after four
    layers every coordinate has been transformed conditionally on every other's group. None
    in one dimension (nothing to condition on)."""
    if dim < 2:
        return []
    idx = np.arange(dim)
    patterns = [idx % 2 == 0, idx % 2 == 1, idx < dim // 2, idx >= dim // 2]
    return [patterns[k % 4].astype(float) for k in range(layers)]


def _log_cosh(w):
    return anp.logaddexp(w, -w) - np.log(2.0)


class CouplingFlow:
    """theta = (a, log diag B, below-diagonal B, skew, tau, then per layer W1, b1, Ws, bs, Wt,
    bt). `dim` is the noise's columns (= the latent dimension)."""

    def __init__(self, mean: np.ndarray, scale_tril: np.ndarray, *, layers: int = LAYERS,
                 hidden: int = HIDDEN, seed: int = 0):  # fmt: skip
        self.m0 = np.asarray(mean, dtype=float).copy()
        self.C = np.tril(np.asarray(scale_tril, dtype=float))
        D = self.dim = len(self.m0)
        self.hidden = hidden
        self.masks = coupling_masks(D, layers)
        self._log_det_C = float(np.sum(np.log(np.abs(np.diag(self.C)))))
        shapes = [("a", (D,)), ("log_b", (D,)), ("off", (D * (D - 1) // 2,)),
                  ("skew", (D,)), ("tau", (D,))]  # fmt: skip
        for k in range(len(self.masks)):
            shapes += [((k, "W1"), (D, hidden)), ((k, "b1"), (hidden,)),
                       ((k, "Ws"), (hidden, D)), ((k, "bs"), (D,)),
                       ((k, "Wt"), (hidden, D)), ((k, "bt"), (D,))]  # fmt: skip
        self._slices, at = {}, 0
        for key, shape in shapes:
            n = int(np.prod(shape))
            self._slices[key] = (at, at + n, shape)
            at += n
        self.size = at
        self._seed = seed

    # -- parameters ------------------------------------------------------------------------

    def initial(self) -> np.ndarray:
        """The start Gaussian exactly: every map the identity; the coupling networks' input
        weights random (seeded), so their output weights have a gradient."""
        theta = np.zeros(self.size)
        rng = np.random.default_rng(self._seed)
        for k in range(len(self.masks)):
            lo, hi, shape = self._slices[(k, "W1")]
            theta[lo:hi] = (rng.standard_normal(shape) / np.sqrt(self.dim / 2 + 1)).ravel()
        return theta

    def part(self, theta, key):
        lo, hi, shape = self._slices[key]
        return anp.reshape(theta[lo:hi], shape)

    def _affine(self, theta):
        D = self.dim
        B = lower_from(self.part(theta, "log_b"), self.part(theta, "off"), D)
        return self.m0 + anp.dot(self.C, self.part(theta, "a")), anp.dot(self.C, B)

    def _tau(self, theta):
        return TAU_BOUND * anp.tanh(self.part(theta, "tau") / TAU_BOUND)

    def _net(self, theta, k, x):
        h = anp.tanh(anp.dot(x, self.part(theta, (k, "W1"))) + self.part(theta, (k, "b1")))
        raw = anp.dot(h, self.part(theta, (k, "Ws"))) + self.part(theta, (k, "bs"))
        s = CLAMP * anp.tanh(raw / CLAMP) * (1.0 - self.masks[k])
        t = (anp.dot(h, self.part(theta, (k, "Wt"))) + self.part(theta, (k, "bt"))) * (
            1.0 - self.masks[k]
        )
        return s, t

    # -- the map and its inverse -------------------------------------------------------------

    def forward(self, theta, eps):
        """(zeta, log |det d zeta / d eps|) for each row of eps, differentiable in theta."""
        skew, tau = self.part(theta, "skew"), self._tau(theta)
        w = anp.exp(tau) * anp.arcsinh(eps) - skew
        u = anp.sinh(w)
        log_det = anp.sum(tau + _log_cosh(w) - 0.5 * anp.log1p(eps**2), axis=1)
        for k, m in enumerate(self.masks):
            s, t = self._net(theta, k, u * m)
            u = u * m + (1.0 - m) * u * anp.exp(s) + t
            log_det = log_det + anp.sum(s, axis=1)
        mu, L = self._affine(theta)
        log_det = log_det + anp.sum(self.part(theta, "log_b")) + self._log_det_C
        return mu + anp.dot(u, anp.transpose(L)), log_det

    def inverse(self, theta, zeta):
        """(eps, log |det d zeta / d eps| at eps) for each row of zeta (numpy)."""
        theta = np.asarray(theta, dtype=float)
        mu, L = self._affine(theta)
        u = np.linalg.solve(np.asarray(L), (np.atleast_2d(zeta) - mu).T).T
        log_det = np.full(len(u), float(np.sum(self.part(theta, "log_b")) + self._log_det_C))
        for k in reversed(range(len(self.masks))):
            m = self.masks[k]
            s, t = self._net(theta, k, u * m)
            u = u * m + (1.0 - m) * (u - t) * np.exp(-s)
            log_det = log_det + np.sum(s, axis=1)
        skew, tau = self.part(theta, "skew"), self._tau(theta)
        w = np.arcsinh(u)
        eps = np.sinh((w + skew) * np.exp(-tau))
        log_det = log_det + np.sum(tau + _log_cosh(w) - 0.5 * np.log1p(eps**2), axis=1)
        return eps, log_det

    def log_q(self, theta, zeta: np.ndarray) -> np.ndarray:
        """Exact log q(zeta): the base density at the inverse, less the log-determinant."""
        with np.errstate(all="ignore"):
            eps, log_det = self.inverse(theta, zeta)
            out = -0.5 * np.sum(eps**2, axis=1) - 0.5 * self.dim * LOG_2PI - log_det
        return np.where(np.isfinite(out), out, -np.inf)

    # -- what the fixed-draw road needs (ppl.inference.saa) ------------------------------------

    def draws(self, theta, eps: np.ndarray):
        """(S, D) draws and q's entropy estimated on the same draws (the base Gaussian's
        entropy plus the mean log-determinant), differentiable in theta."""
        zeta, log_det = self.forward(theta, eps)
        return zeta, 0.5 * self.dim * (1.0 + LOG_2PI) + anp.mean(log_det)

    def moments(self, theta, eps: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of each coordinate over draws for noise eps (by default a fixed set)."""
        if eps is None:
            eps = _probe(self.dim)
        zeta = np.asarray(self.forward(np.asarray(theta, dtype=float), eps)[0])
        return zeta.mean(axis=0), zeta.std(axis=0)

    def changes(self, before, after) -> np.ndarray:
        """How far q moved: each mean in sds, each sd relatively (unitless), on fixed draws."""
        (m0, s0), (m1, s1) = self.moments(before), self.moments(after)
        with np.errstate(all="ignore"):
            return np.concatenate([np.abs(m1 - m0) / s1, np.abs(np.log(s1 / s0))])


def _probe(dim: int, n: int = 1024) -> np.ndarray:
    """Fixed standard-normal draws on which the fit's movement is measured."""
    return np.random.default_rng(20250).standard_normal((n, dim))
