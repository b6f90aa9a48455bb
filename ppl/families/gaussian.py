"""Gaussian q on the unconstrained scale: mean-field, and full-rank in two parameterisations.

* :class:`MeanFieldGaussian`: N(mu, diag(exp(omega))^2), theta = (mu, omega). One class serves
  Stan's mean-field ADVI (the whole vector), and a block of a composite family
  (ppl.families.composite) for SGVB, the fixed-draw road and BBVI's score function.
* :class:`CholeskyGaussian`: N(mu, L L^T), theta = (mu, L as a D x D matrix): Stan's full-rank
  ADVI parameterisation, whose gradient in L the papers' stochastic algorithms step along
  (full-rank ADVI, DSVI's Algorithm 1).
* :class:`FullRankGaussian`: the same family in coordinates relative to a start,
  q = N(m0 + C a, (C B)(C B)^T) with B lower triangular (log-diagonal parameterised), where
  N(m0, C C^T) is the start (a Laplace approximation or a mean-field fit): theta = 0 is the start
  itself, and with C near the posterior's Cholesky factor the fixed-draw ELBO is well conditioned
  even where the posterior has sds of 1e4 and correlations of -0.999.

The two full-rank classes are kept apart on purpose: Stan's step-size sequence acts per
coordinate of theta, so the stochastic fits stay on Stan's (mu, L), while a quasi-Newton solve
needs the relative, log-diagonal coordinates.
"""

from __future__ import annotations

import functools

import autograd.numpy as anp
import numpy as np

LOG_2PI = float(np.log(2 * np.pi))


class MeanFieldGaussian:
    """theta = (mu, omega): means and log sds of `dim` independent Gaussians (2 dim numbers)."""

    name = "meanfield"
    family = "gaussian"
    n_params = 2
    dense = False  # a diagonal scale: q's correlations are not fitted

    @staticmethod
    def scale_of(scale_tril: np.ndarray) -> np.ndarray:
        """The diagonal scale with the marginal sds of `scale_tril`'s Gaussian."""
        return np.diag(marginal_sd(scale_tril))

    @staticmethod
    def laplace_scale(hessian: np.ndarray, scale_tril: np.ndarray) -> np.ndarray:
        """The scale of a Laplace approximation: the conditional sds, 1 / sqrt(-H_dd)."""
        return np.diag(1.0 / np.sqrt(np.diag(hessian)))

    @staticmethod
    def polish_coordinates(q, C: np.ndarray):
        """The deterministic polish's coordinates relative to q (ppl.inference.refine)."""
        return MeanFieldCoordinates(q, C)

    def __init__(self, dim: int) -> None:
        self.dim = int(dim)
        self.size = 2 * self.dim

    # -- parameters ----------------------------------------------------------------------------

    def initial(self, mu0: np.ndarray) -> np.ndarray:
        """Stan's start: mean mu0, sd 1."""
        return np.concatenate([np.asarray(mu0, dtype=float), np.zeros(self.dim)])

    def from_gaussian(self, mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
        return np.concatenate([np.asarray(mean, dtype=float), np.log(np.maximum(sd, 1e-8))])

    def describe(self, theta: np.ndarray) -> dict:
        mean, omega = theta[: self.dim], theta[self.dim :]
        return {"family": "gaussian", "mean": mean.tolist(), "sd": np.exp(omega).tolist()}

    def moments(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Mean and sd of each coordinate."""
        return theta[: self.dim], np.exp(np.minimum(theta[self.dim :], 700.0))

    def mean_map(self, theta):
        """E_q[zeta], differentiable in theta."""
        return theta[: self.dim]

    def changes(self, before: np.ndarray, after: np.ndarray) -> list[np.ndarray]:
        """How far q moved, unitless: each mean in sds, each log sd."""
        d = self.dim
        m0, s0, m1, s1 = before[:d], before[d:], after[:d], after[d:]
        return [np.abs(m1 - m0) / np.exp(np.minimum(s1, 700.0)), np.abs(s1 - s0)]

    def mean_scale(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return theta[: self.dim].copy(), np.diag(np.exp(theta[self.dim :]))

    # -- draws, density, entropy ---------------------------------------------------------------

    def noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.dim))

    def zeta(self, theta: np.ndarray, eps: np.ndarray) -> np.ndarray:
        return theta[: self.dim] + eps * np.exp(theta[self.dim :])

    def entropy_terms(self, theta) -> tuple:
        """The entropy as addends (a composite family adds them in this order)."""
        return anp.sum(theta[self.dim :]), 0.5 * self.dim * (1.0 + LOG_2PI)

    def entropy(self, theta: np.ndarray) -> float:
        first, constant = self.entropy_terms(theta)
        return float(first + constant)

    def draw_terms(self, theta, eps: np.ndarray):
        """Draws from standard-normal noise (autograd-differentiable) and the entropy's addends."""
        return theta[: self.dim] + eps * anp.exp(theta[self.dim :]), self.entropy_terms(theta)

    def draws(self, theta, eps: np.ndarray):
        """(S, D) draws for noise eps and q's entropy, differentiable in theta."""
        zeta, (first, constant) = self.draw_terms(theta, eps)
        return zeta, first + constant

    def rvs(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        return theta[: self.dim] + np.exp(theta[self.dim :]) * rng.standard_normal((n, self.dim))

    def log_q_terms(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        """(S, D): log q of each coordinate of each draw."""
        log_sd = theta[self.dim :]
        u = (zeta - theta[: self.dim]) / np.exp(log_sd)
        return -0.5 * u**2 - log_sd - 0.5 * LOG_2PI

    def score(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        """(S, 2D): d log q(zeta_s) / d theta."""
        sd = np.exp(theta[self.dim :])
        u = (zeta - theta[: self.dim]) / sd
        return np.concatenate([u / sd, u**2 - 1.0], axis=1)

    def grad(self, theta: np.ndarray, eps: np.ndarray, g: np.ndarray) -> np.ndarray:
        """The pathwise ELBO gradient from the log joint's gradients g at zeta(theta, eps),
        chained by hand (Stan's), plus the entropy's."""
        g_mu = g.mean(axis=0)
        g_omega = (g * eps).mean(axis=0) * np.exp(theta[self.dim :]) + 1.0
        return np.concatenate([g_mu, g_omega])


class CholeskyGaussian:
    """theta = (mu, L): D + D^2 numbers, only L's lower triangle used (Stan's full-rank ADVI)."""

    name = "fullrank"
    family = "gaussian"
    dense = True

    def __init__(self, dim: int) -> None:
        self.dim = int(dim)
        self.size = self.dim + self.dim * self.dim

    @staticmethod
    def scale_of(scale_tril: np.ndarray) -> np.ndarray:
        return scale_tril

    @staticmethod
    def laplace_scale(hessian: np.ndarray, scale_tril: np.ndarray) -> np.ndarray:
        return scale_tril

    @staticmethod
    def polish_coordinates(q, C: np.ndarray):
        return DenseCoordinates(q, C)

    def _L(self, theta: np.ndarray) -> np.ndarray:
        return theta[self.dim :].reshape(self.dim, self.dim)

    def initial(self, mu0: np.ndarray) -> np.ndarray:
        return np.concatenate([mu0, np.eye(self.dim).ravel()])

    def noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.standard_normal((n, self.dim))

    def zeta(self, theta: np.ndarray, eps: np.ndarray) -> np.ndarray:
        return theta[: self.dim] + eps @ self._L(theta).T

    def entropy(self, theta: np.ndarray) -> float:
        logdet = np.sum(np.log(np.abs(np.diag(self._L(theta)))))
        return float(logdet + 0.5 * self.dim * (1.0 + LOG_2PI))

    def grad(self, theta: np.ndarray, eps: np.ndarray, g: np.ndarray) -> np.ndarray:
        g_mu = g.mean(axis=0)
        g_L = np.tril(g.T @ eps) / g.shape[0]
        g_L[np.diag_indices(self.dim)] += 1.0 / np.diag(self._L(theta))
        return np.concatenate([g_mu, g_L.ravel()])

    def mean_scale(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        L = np.tril(self._L(theta))
        # The entropy only sees |L_dd|; flip columns so the factor is a proper Cholesky factor.
        return theta[: self.dim].copy(), L * np.where(np.diag(L) < 0, -1.0, 1.0)


def lower_from(diag_log, off, dim: int):
    """Lower-triangular matrix with diagonal exp(diag_log) and rows of `off` below it
    (np.tril_indices(dim, -1) order), by one gather: autograd has no in-place writes, and
    building it row by row costs a traced primitive per row."""
    flat = anp.concatenate([np.zeros(1), anp.exp(diag_log), off])
    return anp.reshape(flat[_lower_positions(dim)], (dim, dim))


@functools.cache
def _lower_positions(dim: int) -> np.ndarray:
    """Where each entry of a dim x dim lower-triangular matrix sits in (0, diagonal, off)."""
    i, j = np.indices((dim, dim))
    return np.where(j == i, 1 + i, np.where(j < i, 1 + dim + i * (i - 1) // 2 + j, 0)).ravel()


class FullRankGaussian:
    """theta = (a, log diag B, below-diagonal B): D + D + D(D-1)/2 numbers."""

    def __init__(self, mean: np.ndarray, scale_tril: np.ndarray):
        self.dim = len(mean)
        self.m0 = np.asarray(mean, dtype=float).copy()
        self.C = np.asarray(scale_tril, dtype=float).copy()
        self.size = 2 * self.dim + self.dim * (self.dim - 1) // 2
        self._log_det_C = float(np.sum(np.log(np.abs(np.diag(self.C)))))

    def initial(self) -> np.ndarray:
        return np.zeros(self.size)

    def _mean_scale(self, theta):
        D = self.dim
        mu = self.m0 + anp.dot(self.C, theta[:D])
        return mu, anp.dot(self.C, lower_from(theta[D : 2 * D], theta[2 * D :], D))

    def draws(self, theta, eps: np.ndarray):
        """(S, D) draws for standard-normal eps, and q's entropy."""
        mu, L = self._mean_scale(theta)
        D = self.dim
        entropy = anp.sum(theta[D : 2 * D]) + self._log_det_C + 0.5 * D * (1.0 + LOG_2PI)
        return mu + anp.dot(eps, anp.transpose(L)), entropy

    def mean_scale(self, theta) -> tuple[np.ndarray, np.ndarray]:
        mu, L = self._mean_scale(np.asarray(theta, dtype=float))
        return np.asarray(mu), np.tril(np.asarray(L))

    def moments(self, theta) -> tuple[np.ndarray, np.ndarray]:
        mu, L = self.mean_scale(theta)
        return mu, np.sqrt(np.sum(L**2, axis=1))

    def changes(self, before, after) -> np.ndarray:
        """How far q moved: each mean in sds, each sd relatively (unitless)."""
        (m0, s0), (m1, s1) = self.moments(before), self.moments(after)
        return np.concatenate([np.abs(m1 - m0) / s1, np.abs(np.log(s1 / s0))])


#: The Gaussians of Stan's ADVI by their covariance structure ("meanfield", "fullrank"): a
#: VIResult's `method`.
STRUCTURES = {cls.name: cls for cls in (MeanFieldGaussian, CholeskyGaussian)}


def marginal_sd(scale_tril: np.ndarray) -> np.ndarray:
    """Marginal standard deviations of N(mean, L L^T)."""
    return np.sqrt(np.sum(scale_tril**2, axis=1))


def covariance(scale_tril: np.ndarray) -> np.ndarray:
    """L L^T."""
    return scale_tril @ scale_tril.T


class MeanFieldCoordinates:
    """The polish's preconditioned coordinates of a mean-field q: mu = m0 + C a and log sds
    relative to q's (theta = 0 is q itself)."""

    def __init__(self, q, C: np.ndarray):
        self.dim, self.method = q.dim, q.method
        self.m0, self.C = q.mean.copy(), C
        self.log_s0 = np.log(np.maximum(np.sqrt(np.sum(q.scale_tril**2, axis=1)), 1e-300))

    def initial(self) -> np.ndarray:
        return np.zeros(2 * self.dim)

    def draws(self, theta, eps):
        """(S, D) draws of q and its entropy up to a constant, differentiable in theta."""
        D = self.dim
        mu = self.m0 + anp.dot(self.C, theta[:D])
        log_sd = self.log_s0 + theta[D:]
        return mu + eps * anp.exp(log_sd), anp.sum(log_sd)

    def mean_scale(self, theta) -> tuple[np.ndarray, np.ndarray]:
        D = self.dim
        mu = self.m0 + self.C @ theta[:D]
        return mu, np.diag(np.exp(self.log_s0 + theta[D:]))


class DenseCoordinates:
    """The polish's preconditioned coordinates of a full-rank q: mu = m0 + C a and L = C B, B
    lower triangular with a log diagonal, relative to q's factor (theta0 is q itself)."""

    def __init__(self, q, C: np.ndarray):
        self.dim, self.method = q.dim, q.method
        self.m0, self.C = q.mean.copy(), C
        B0 = np.linalg.solve(C, q.scale_tril)
        B0 = np.tril(B0)
        sign = np.sign(np.diag(B0))
        sign[sign == 0] = 1.0
        B0 = B0 * sign[None, :]  # keep a positive diagonal; columns' signs do not change q
        rows, cols = np.tril_indices(self.dim, -1)
        self.theta0 = np.concatenate(
            [np.zeros(self.dim), np.log(np.maximum(np.diag(B0), 1e-300)), B0[rows, cols]]
        )

    def initial(self) -> np.ndarray:
        return self.theta0.copy()

    def draws(self, theta, eps):
        """(S, D) draws of q and its entropy up to a constant, differentiable in theta."""
        D = self.dim
        mu = self.m0 + anp.dot(self.C, theta[:D])
        B = lower_from(theta[D : 2 * D], theta[2 * D :], D)
        L = anp.dot(self.C, B)
        entropy = anp.sum(theta[D : 2 * D]) + np.sum(np.log(np.abs(np.diag(self.C))))
        return mu + anp.dot(eps, anp.transpose(L)), entropy

    def mean_scale(self, theta) -> tuple[np.ndarray, np.ndarray]:
        D = self.dim
        mu = self.m0 + self.C @ theta[:D]
        B = np.tril(np.asarray(lower_from(theta[D : 2 * D], theta[2 * D :], D)))
        return mu, self.C @ B
