"""Low-rank-plus-diagonal Gaussian q on the unconstrained scale: the correlated family for
models too large for a full-rank Gaussian.

q = N(mu, B B' + diag(d^2)) with B of shape (D, r), r << D (a factor covariance structure:
Ong, Nott & Smith 2018; Rezende, Mohamed & Wierstra 2014): D(r + 2) parameters instead of
D(D + 3)/2, and a draw costs O(Dr). A draw takes D + r standard normals,

    zeta = mu + d * e + B z,   (e, z) ~ N(0, I_{D + r}),

so the fixed-draw noise has `dim` = D + r columns (`latent_dim` = D). The entropy needs
log det(B B' + diag(d^2)) = 2 sum log d + log det(I_r + U'U), U = B / d (the matrix
determinant lemma): an r x r determinant per call, never a D x D one.

Coordinates relative to a start N(m0, diag(s0^2)) (a mean-field fit): mu = m0 + s0 a,
d = s0 exp(c), B = s0 F, theta = (a, c, F), so theta = 0 with F = F0 is the start plus its
initial factor, and the fixed-draw ELBO is well conditioned where sds span orders of magnitude.
B = 0 is a saddle of the ELBO (the factors' gradient E[grad log p z'] vanishes there), so the
initial factor F0 must not be zero.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np

LOG_2PI = float(np.log(2 * np.pi))


class LowRankGaussian:
    """theta = (a, c, F): D + D + D r numbers."""

    def __init__(self, mean: np.ndarray, sd: np.ndarray, factor: np.ndarray):
        self.m0 = np.asarray(mean, dtype=float).copy()
        self.s0 = np.asarray(sd, dtype=float).copy()
        factor = np.asarray(factor, dtype=float)
        self.latent_dim, self.rank = factor.shape
        self.dim = self.latent_dim + self.rank  # columns of the noise
        self.size = self.latent_dim * (2 + self.rank)
        self.F0 = factor / self.s0[:, None]
        self._entropy_constant = float(np.sum(np.log(self.s0))) + 0.5 * self.latent_dim * (
            1.0 + LOG_2PI
        )

    def initial(self) -> np.ndarray:
        D = self.latent_dim
        return np.concatenate([np.zeros(2 * D), self.F0.ravel()])

    def _parts(self, theta):
        D = self.latent_dim
        a, c = theta[:D], theta[D : 2 * D]
        F = anp.reshape(theta[2 * D :], (D, self.rank))
        return a, c, F

    def draws(self, theta, eps: np.ndarray):
        """(S, D) draws for (S, D + r) standard-normal eps, and q's entropy."""
        D = self.latent_dim
        a, c, F = self._parts(theta)
        mu = self.m0 + self.s0 * a
        scaled = eps[:, :D] * anp.exp(c) + anp.dot(eps[:, D:], anp.transpose(F))
        U = F * anp.exp(-c)[:, None]
        capacitance = np.eye(self.rank) + anp.dot(anp.transpose(U), U)
        _, log_det = anp.linalg.slogdet(capacitance)
        entropy = self._entropy_constant + anp.sum(c) + 0.5 * log_det
        return mu + self.s0 * scaled, entropy

    def mean_factor_diag(self, theta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """mu, B and d of q."""
        a, c, F = self._parts(np.asarray(theta, dtype=float))
        return self.m0 + self.s0 * a, self.s0[:, None] * F, self.s0 * np.exp(c)

    def covariance(self, theta) -> np.ndarray:
        _, B, d = self.mean_factor_diag(theta)
        return B @ B.T + np.diag(d**2)

    def mean_scale(self, theta) -> tuple[np.ndarray, np.ndarray]:
        """mu and the Cholesky factor of q's covariance (dense: once, for the result)."""
        mu, _, _ = self.mean_factor_diag(theta)
        return mu, np.linalg.cholesky(self.covariance(theta))

    def moments(self, theta) -> tuple[np.ndarray, np.ndarray]:
        mu, B, d = self.mean_factor_diag(theta)
        return mu, np.sqrt(d**2 + np.sum(B**2, axis=1))

    def changes(self, before, after) -> np.ndarray:
        """How far q moved: each mean in sds, each sd relatively (unitless)."""
        (m0, s0), (m1, s1) = self.moments(before), self.moments(after)
        return np.concatenate([np.abs(m1 - m0) / s1, np.abs(np.log(s1 / s0))])


def initial_factor(sd: np.ndarray, covariance: np.ndarray | None, rank: int,
                   seed: int = 0) -> np.ndarray:  # fmt: skip
    """A (D, rank) starting factor B0 for a start with sds `sd`: the leading eigenvectors of a
    covariance estimate (e.g. the Laplace approximation's) in sd units, scaled by how far their
    variance exceeds the start's (at least 0.1 sd, off the saddle at B = 0), or, without one,
    small seeded random columns."""
    sd = np.asarray(sd, dtype=float)
    D = len(sd)
    if covariance is not None and np.all(np.isfinite(covariance)):
        C = covariance / np.outer(sd, sd)
        values, vectors = np.linalg.eigh(0.5 * (C + C.T))
        top = np.argsort(values)[::-1][:rank]
        lengths = np.sqrt(np.maximum(values[top] - 1.0, 0.01))
        return sd[:, None] * vectors[:, top] * lengths
    rng = np.random.default_rng(seed)
    return sd[:, None] * 0.1 * rng.standard_normal((D, rank)) / np.sqrt(rank)
