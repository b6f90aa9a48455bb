"""The normalizing flow (ppl.families.flow) fitted on the fixed-draw road, from the best Gaussian
so far: the flow's initial parameters are that Gaussian exactly, so L-BFGS on the fixed-draw
ELBO starts at its ELBO and can only climb from there (ppl.inference.saa grows the draws between
solves as for the Gaussians)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ppl.families.flow import FLOW, CouplingFlow
from ppl.inference.result import VIResult
from ppl.inference.saa import fit_fixed_draws

#: The draw sets of the flow's solves: 64 -> 256 (its parameters are a few hundred per
#: coordinate's group: fewer draws let the solve fit the draws, not the posterior).
FLOW_FIRST_DRAWS, FLOW_MAX_DRAWS = 64, 256
#: L-BFGS iterations per solve.
FLOW_MAX_ITER = 200
#: Draws from which the result's mean and covariance are estimated (a few ms).
MOMENT_DRAWS = 8192


@dataclass
class FlowResult(VIResult):
    """A fitted flow as a VIResult: `mean` and `scale_tril` are q's mean and the Cholesky factor
    of its covariance (estimated on MOMENT_DRAWS draws), for whatever reads q's moments;
    `sample` and `log_q` are the flow's own, exact."""

    family: CouplingFlow | None = None
    theta: np.ndarray | None = None
    polish: dict = field(default_factory=dict)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        eps = rng.standard_normal((n, self.dim))
        return np.asarray(self.family.forward(self.theta, eps)[0])

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        return self.family.log_q(self.theta, zeta)

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        return self.log_q(zeta)


def gaussian_of(vi) -> tuple[np.ndarray, np.ndarray]:
    """The mean and Cholesky factor of a fit's q: a Gaussian's own, else (the road's composite
    mean-field q) its blocks' moments as a mean-field Gaussian."""
    if isinstance(vi, VIResult):
        return np.asarray(vi.mean, dtype=float), np.asarray(vi.scale_tril, dtype=float)
    mean, sd = vi.family.moments(vi.theta)
    return np.asarray(mean, dtype=float), np.diag(np.asarray(sd, dtype=float))


def fit_flow(log_joint: Callable, start, *, seed: int = 0, first_draws: int = FLOW_FIRST_DRAWS,
             max_draws: int = FLOW_MAX_DRAWS, max_iter: int = FLOW_MAX_ITER,
             progress=None) -> FlowResult:  # fmt: skip
    """The flow started at `start`'s Gaussian (a VIResult or the road's first fit), fitted by
    L-BFGS on fixed draws growing first_draws -> max_draws."""
    mean, L = gaussian_of(start)
    family = CouplingFlow(mean, L, seed=seed)
    fit = fit_fixed_draws(log_joint, family, family.initial(), seed=seed, first_draws=first_draws,
                          max_draws=max_draws, max_iter=max_iter, progress=progress)  # fmt: skip
    zeta = np.asarray(family.forward(fit.theta, _moment_noise(family.dim))[0])
    q_mean = zeta.mean(axis=0)
    cov = np.atleast_2d(np.cov(zeta, rowvar=False))
    try:
        scale = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        scale = np.diag(np.sqrt(np.maximum(np.diag(cov), 0.0)))
    q = FlowResult(FLOW, q_mean, scale, fit.elbo_trace, fit.elbo, fit.iterations, fit.grad_evals,
                   fit.converged, 0.0, fit.seconds, list(fit.warnings), family=family,
                   theta=np.asarray(fit.theta, dtype=float))  # fmt: skip
    q.grad_samples = fit.grad_samples
    q.polish = {"rounds": (fit.polish or {}).get("rounds", []), "parameters": family.size}
    return q


def _moment_noise(dim: int) -> np.ndarray:
    return np.random.default_rng(7).standard_normal((MOMENT_DRAWS, dim))
