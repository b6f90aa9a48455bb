"""The fitted Gaussian approximation in the unconstrained space, shared by Gaussian VI backends."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ppl.families.gaussian import covariance, marginal_sd


@dataclass
class VIResult:
    """Gaussian q(zeta) = N(mean, scale_tril scale_tril^T) plus everything needed to judge the fit.

    The ELBO trace, warnings and counters are kept on the result (not only logged) because users of
    Stan/PyMC repeatedly ask to "inspect the ELBO" after the fact (pymc#2031, stan#3207).
    """

    method: str  # "meanfield" | "fullrank"
    mean: np.ndarray  # (D,)
    scale_tril: np.ndarray  # (D, D) lower triangular; diagonal for meanfield
    elbo_trace: list[tuple[int, float]]  # (iteration, ELBO) every eval_elbo iterations, from 0
    elbo: float  # ELBO of the returned (mean, scale_tril), from elbo_samples draws
    iterations: int  # main-loop iterations (excludes step-size adaptation)
    grad_evals: int  # log-joint gradient evaluations, S per vectorised call, adaptation included
    converged: bool
    eta: float  # base step size, chosen by adaptation or given (Stan's "eta")
    seconds: float
    warnings: list[str] = field(default_factory=list)
    # eta after back-offs (the ELBO fell) and NaN-recovery halvings
    eta_final: float = float("nan")
    grad_samples: int = 1  # S, Monte Carlo draws per gradient
    adapt_iterations: int = 0  # gradient iterations spent in step-size adaptation (0 if eta given)
    eta_trials: list[tuple[float, float]] = field(default_factory=list)  # (eta, ELBO) tried
    averaged: bool = False  # True if mean/scale are the average of the last window of iterates
    lp_evals: int = 0  # log-joint evaluations without gradient (ELBO estimates), per draw
    dropped_draws: int = 0  # draws whose log-joint or gradient was non-finite and were dropped
    stopped_by: str = ""  # the test that ended the loop: "optimum", "relative ELBO", "" (cap)

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    @property
    def sd(self) -> np.ndarray:
        """Marginal standard deviations of q in the unconstrained space."""
        return marginal_sd(self.scale_tril)

    @property
    def cov(self) -> np.ndarray:
        return covariance(self.scale_tril)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """(n, D) independent draws from q."""
        eps = rng.standard_normal((n, self.dim))
        return self.mean + eps @ self.scale_tril.T

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        """log q(zeta) for the PSIS check; coordinates with zero scale (point estimates: DSVI's
        hyperparameters) are conditioned on, as the log joint is."""
        free = np.diag(self.scale_tril) != 0
        if free.all():
            return self.log_density(zeta)
        fixed = dataclasses.replace(
            self, mean=self.mean[free], scale_tril=self.scale_tril[np.ix_(free, free)]
        )
        return fixed.log_density(np.atleast_2d(zeta)[:, free])

    def standardise(self, zeta: np.ndarray) -> tuple[np.ndarray, float]:
        """z with zeta = mean + scale_tril z, and log |det scale_tril|."""
        zeta = np.atleast_2d(zeta)
        z = _solve_lower(self.scale_tril, (zeta - self.mean).T).T
        return z, float(np.sum(np.log(np.abs(np.diag(self.scale_tril)))))

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        """log q(zeta) for zeta of shape (n, D); needed for importance weights / PSIS."""
        z, logdet = self.standardise(zeta)
        return -0.5 * np.sum(z**2, axis=1) - logdet - 0.5 * self.dim * np.log(2 * np.pi)


#: Above this dimension a triangular solve (scipy.linalg, imported on demand: 0.05 s at start-up
#: that most fits do not need) beats numpy's general one.
_GENERAL_SOLVE_MAX_DIM = 1000


def _solve_lower(L: np.ndarray, B: np.ndarray) -> np.ndarray:
    """L^-1 B for lower-triangular L."""
    if np.count_nonzero(L - np.diag(np.diag(L))) == 0:
        return B / np.diag(L)[:, None]
    if len(L) <= _GENERAL_SOLVE_MAX_DIM:
        return np.linalg.solve(L, B)
    from scipy.linalg import solve_triangular

    return solve_triangular(L, B, lower=True)
