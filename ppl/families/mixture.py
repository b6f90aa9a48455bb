"""A mixture of full-rank Gaussians on the unconstrained scale: the family `auto` fits where its
mode searches found a second, distinct mode (ppl.inference.suspect), which one Gaussian cannot
cover (an equal mixture with modes at +-10: a Gaussian on one mode has sd 1 for the
posterior's 10).

    q(zeta) = sum_k w_k N(zeta; mu_k, L_k L_k'),   w = softmax(log w0 + c)

Each component is a FullRankGaussian relative to its start N(m0_k, C_k C_k') (a mode, with its
Laplace covariance or the fitted Gaussian's), and the logits are relative to the start weights
w0, so theta = 0 is the starts exactly.

The ELBO is the stratified one (Morningstar et al., AISTATS 2021, "Automatic differentiation
variational inference with mixtures"):

    ELBO = sum_k w_k E_{q_k}[log p(zeta) - log q(zeta)],

each expectation over reparameterised draws mu_k + L_k eps of the same noise eps, so no draw
picks its component at random: the weights' gradient is exact and, on fixed noise, the ELBO is a
smooth function of theta (ppl.inference.saa). `log_q` is exact (a log-sum-exp over components).
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np

from ppl.families.gaussian import FullRankGaussian
from ppl.library.special import logsumexp

#: The family's name (fit.json's method and the label's title say it).
MIXTURE = "mixture"
#: How a label describes it.
MIXTURE_TITLE = "mixture of full-rank Gaussians, one per mode found"

LOG_2PI = float(np.log(2 * np.pi))
#: The start weights are kept above this (a start of weight 0 has no gradient to grow by).
MIN_WEIGHT = 1e-3


class GaussianMixture:
    """theta = (component 1's FullRankGaussian theta, ..., component K's, K logits)."""

    def __init__(self, means, scale_trils, weights=None):
        self.components = [FullRankGaussian(np.asarray(m, float), np.asarray(L, float))
                           for m, L in zip(means, scale_trils, strict=True)]  # fmt: skip
        self.K = len(self.components)
        self.dim = self.components[0].dim
        w0 = np.full(self.K, 1.0 / self.K) if weights is None else np.asarray(weights, float)
        w0 = np.maximum(w0 / w0.sum(), MIN_WEIGHT)
        self.log_w0 = np.log(w0 / w0.sum())
        self.component_size = self.components[0].size
        self.size = self.K * self.component_size + self.K

    def initial(self) -> np.ndarray:
        """The starts and their weights exactly."""
        return np.zeros(self.size)

    # -- parameters ------------------------------------------------------------------------

    def log_weights(self, theta):
        logits = self.log_w0 + theta[self.K * self.component_size :]
        return logits - logsumexp(logits)

    def weights(self, theta) -> np.ndarray:
        return np.exp(np.asarray(self.log_weights(np.asarray(theta, dtype=float))))

    def parts(self, theta) -> list:
        """(mu_k, L_k) of each component, differentiable in theta."""
        n = self.component_size
        return [c._mean_scale(theta[k * n : (k + 1) * n]) for k, c in enumerate(self.components)]

    def mean_scales(self, theta) -> list[tuple[np.ndarray, np.ndarray]]:
        """(mu_k, L_k) of each component as arrays, L_k a proper Cholesky factor."""
        n = self.component_size
        theta = np.asarray(theta, dtype=float)
        return [c.mean_scale(theta[k * n : (k + 1) * n]) for k, c in enumerate(self.components)]

    # -- density and draws -------------------------------------------------------------------

    def _log_q(self, theta, zeta, parts=None):
        """log q of each row of zeta, differentiable in theta."""
        parts = self.parts(theta) if parts is None else parts
        log_w = self.log_weights(theta)
        columns = []
        for k, (mu, L) in enumerate(parts):
            u = anp.linalg.solve(L, anp.transpose(zeta - mu))
            log_det = anp.sum(anp.log(anp.abs(anp.diag(L))))
            columns.append(log_w[k] - 0.5 * anp.sum(u**2, axis=0) - log_det
                           - 0.5 * self.dim * LOG_2PI)  # fmt: skip
        return logsumexp(anp.stack(columns, axis=1), axis=1)

    def log_q(self, theta, zeta: np.ndarray) -> np.ndarray:
        """Exact log q(zeta) for the rows of zeta (numpy)."""
        with np.errstate(all="ignore"):
            out = np.asarray(self._log_q(np.asarray(theta, float), np.atleast_2d(zeta)), float)
        return np.where(np.isfinite(out), out, -np.inf)

    def stratified(self, theta, eps: np.ndarray):
        """The stratified ELBO's pieces on noise eps (S, D): the (K S, D) draws, component k's
        the rows k S .. (k + 1) S - 1; each row's factor K w_k (so that the plain mean of the
        factor times log p over the rows is sum_k w_k E_{q_k}[log p]); and the entropy term
        -sum_k w_k E_{q_k}[log q]. All differentiable in theta."""
        parts = self.parts(theta)
        S = len(eps)
        zeta = anp.concatenate([mu + anp.dot(eps, anp.transpose(L)) for mu, L in parts], axis=0)
        w = anp.exp(self.log_weights(theta))
        log_q = anp.reshape(self._log_q(theta, zeta, parts), (self.K, S))
        entropy = -anp.sum(w * anp.mean(log_q, axis=1))
        factor = anp.reshape(anp.outer(self.K * w, np.ones(S)), (self.K * S,))
        return zeta, factor, entropy

    def sample(self, theta, rng: np.random.Generator, n: int) -> np.ndarray:
        """n exact draws: a component by its weight, then its Gaussian."""
        w = self.weights(theta)
        which = rng.choice(self.K, size=n, p=w / w.sum())
        eps = rng.standard_normal((n, self.dim))
        out = np.empty((n, self.dim))
        for k, (mu, L) in enumerate(self.mean_scales(theta)):
            rows = which == k
            out[rows] = mu + eps[rows] @ L.T
        return out

    # -- moments, and what the fixed-draw road needs (ppl.inference.saa) ---------------------

    def mean_cov(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """The mixture's exact mean and covariance."""
        w, parts = self.weights(theta), self.mean_scales(theta)
        mean = sum(wk * mu for wk, (mu, _) in zip(w, parts, strict=True))
        cov = sum(wk * (L @ L.T + np.outer(mu - mean, mu - mean))
                  for wk, (mu, L) in zip(w, parts, strict=True))  # fmt: skip
        return np.asarray(mean, float), np.atleast_2d(np.asarray(cov, float))

    def moments(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """The mixture's mean and sd of each coordinate (exact)."""
        mean, cov = self.mean_cov(theta)
        return mean, np.sqrt(np.maximum(np.diag(cov), 0.0))

    def changes(self, before, after) -> np.ndarray:
        """How far q moved, unitless: each component's means in its sds and its log sds, and
        each weight's change (absolute: a weight's scale is 1)."""
        out = []
        for (m0, L0), (m1, L1) in zip(self.mean_scales(before), self.mean_scales(after),
                                      strict=True):  # fmt: skip
            s0, s1 = np.sqrt(np.sum(L0**2, axis=1)), np.sqrt(np.sum(L1**2, axis=1))
            with np.errstate(all="ignore"):
                out += [np.abs(m1 - m0) / s1, np.abs(np.log(s1 / s0))]
        out.append(np.abs(self.weights(after) - self.weights(before)))
        return np.concatenate(out)
