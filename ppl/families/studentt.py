"""The Student-t family: q = law of mu + C z with z from a standard distribution phi, normal or
multivariate Student-t (DSVI, Titsias & Lazaro-Gredilla 2014).

Algorithm 1's step for (mu, C) is the gradient of E_phi[log g(C z + mu)] + log|C| + H_phi for
*any* standard phi, so the Student-t family needs nothing beyond the Gaussian one but phi's draws
and entropy: :class:`FullScale` is Stan's full-rank parameterisation (ppl.families.gaussian.
CholeskyGaussian) with phi's draws; :class:`DiagonalScale` keeps only C's diagonal (unlogged, as
the paper's eq. 9 has it).
"""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, psi

from ppl.errors import FitError
from ppl.families.gaussian import CholeskyGaussian


class StandardDistribution:
    """phi: standard normal (dof=None) or multivariate Student-t with `dof` degrees of freedom."""

    def __init__(self, dof: float | None = None):
        if dof is not None and not (np.isfinite(dof) and dof > 0):
            raise FitError(f"DSVI: Student-t degrees of freedom must be positive, got {dof!r}")
        self.dof = dof

    @property
    def name(self) -> str:
        return "normal" if self.dof is None else f"student-t({self.dof:g})"

    def sample(self, rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
        z = rng.standard_normal((n, dim))
        if self.dof is None:
            return z
        return z * np.sqrt(self.dof / rng.chisquare(self.dof, size=(n, 1)))

    def variance(self) -> float:
        """Of each coordinate of z (inf for a Student-t with dof <= 2)."""
        if self.dof is None:
            return 1.0
        return self.dof / (self.dof - 2.0) if self.dof > 2 else np.inf

    def entropy(self, dim: int) -> float:
        if self.dof is None:
            return 0.5 * dim * (1.0 + np.log(2.0 * np.pi))
        nu, half = self.dof, 0.5 * (self.dof + dim)
        return float(
            gammaln(0.5 * nu) - gammaln(half) + 0.5 * dim * np.log(nu * np.pi)
            + half * (psi(half) - psi(0.5 * nu))
        )  # fmt: skip

    def log_density(self, z: np.ndarray) -> np.ndarray:
        dim = z.shape[1]
        r2 = np.sum(z**2, axis=1)
        if self.dof is None:
            return -0.5 * r2 - 0.5 * dim * np.log(2.0 * np.pi)
        nu, half = self.dof, 0.5 * (self.dof + dim)
        return (
            gammaln(half) - gammaln(0.5 * nu) - 0.5 * dim * np.log(nu * np.pi)
            - half * np.log1p(r2 / nu)
        )  # fmt: skip


class FullScale(CholeskyGaussian):
    """theta = mu + C z with C lower triangular: Algorithm 1, whose C-step with its 1/C_dd term
    is full-rank ADVI's; only phi (draws and entropy) differs."""

    name = "dsvi-full"

    def __init__(self, dim: int, base: StandardDistribution):
        super().__init__(dim)
        self.base = base

    def noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.base.sample(rng, n, self.dim)

    def entropy(self, theta: np.ndarray) -> float:
        return float(np.sum(np.log(np.abs(np.diag(self._L(theta))))) + self.base.entropy(self.dim))

    def second_moment(self, theta: np.ndarray) -> np.ndarray:
        """E[theta_d^2] = mu_d^2 + Var(z) (C C^T)_dd."""
        scale2 = np.sum(np.tril(self._L(theta)) ** 2, axis=1)
        return theta[: self.dim] ** 2 + self.base.variance() * scale2


class DiagonalScale(FullScale):
    """theta_d = mu_d + c_d z_d (eq. 9): linear in D, for thousands of parameters."""

    name = "dsvi-diag"

    def __init__(self, dim: int, base: StandardDistribution):
        self.dim, self.base = dim, base
        self.size = 2 * dim

    def initial(self, mu0: np.ndarray) -> np.ndarray:
        return np.concatenate([mu0, np.ones(self.dim)])

    def zeta(self, theta: np.ndarray, z: np.ndarray) -> np.ndarray:
        return theta[: self.dim] + z * theta[self.dim :]

    def entropy(self, theta: np.ndarray) -> float:
        return float(np.sum(np.log(np.abs(theta[self.dim :]))) + self.base.entropy(self.dim))

    def grad(self, theta: np.ndarray, z: np.ndarray, g: np.ndarray) -> np.ndarray:
        g_c = (g * z).mean(axis=0) + 1.0 / theta[self.dim :]
        return np.concatenate([g.mean(axis=0), g_c])

    def mean_scale(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return theta[: self.dim].copy(), np.diag(np.abs(theta[self.dim :]))

    def second_moment(self, theta: np.ndarray) -> np.ndarray:
        return theta[: self.dim] ** 2 + self.base.variance() * theta[self.dim :] ** 2
