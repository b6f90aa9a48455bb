"""The normalizing flow (ppl.families.flow) fitted on the fixed-draw road, from the best Gaussian
so far: the flow's initial parameters are that Gaussian exactly, so L-BFGS on the fixed-draw
ELBO starts at its ELBO and can only climb from there (ppl.inference.saa grows the draws between
solves as for the Gaussians)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ppl.families.flow import FLOW, CouplingFlow
from ppl.inference.auto import CandidateFailed
from ppl.inference.result import VIResult
from ppl.inference.saa import fit_fixed_draws

#: The draw sets of the flow's solves: 128 -> 512. Its parameters are hundreds (249 in two
#: dimensions): on 64 -> 256 draws a Gaussian posterior's flow fitted the draws, not the
#: posterior (ELBO on fresh draws 3.36 against the exact Gaussian's 3.76, sds 1.26x), and the
#: truncated-normal and 2-D funnel posteriors' flows reached ELBOs 0.09 and 0.65 nats lower.
FLOW_FIRST_DRAWS, FLOW_MAX_DRAWS = 128, 512
#: L-BFGS iterations per solve: the flow's gradients are bounded by about (128 + 512) times
#: this (a Gaussian fit's budget is 50,000).
FLOW_MAX_ITER = 60
#: The fewest iterations per solve worth a try within a budget (at 40 the truncated-normal
#: posterior's sds were 0.81 and 0.90 of the reference's, at 60 0.86 and 0.93).
MIN_ITER = 30
#: Independent draws on which the fitted flow must beat the Gaussian it started from.
CHECK_DRAWS = 1024
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
             budget: int | None = None, progress=None) -> FlowResult:  # fmt: skip
    """The flow started at `start`'s Gaussian (a VIResult or the road's first fit), fitted by
    L-BFGS on fixed draws growing first_draws -> max_draws, then checked on independent draws
    (CandidateFailed when it did not gain). A gate after the first solve would save a Gaussian
    posterior's gradients, but there the flows of the truncated-normal and funnel posteriors had
    not yet gained either (their tails off until the 512-draw solve). `budget`: the gradient
    evaluations it may spend (fewer iterations per solve; CandidateFailed if under MIN_ITER)."""
    mean, L = gaussian_of(start)
    family = CouplingFlow(mean, L, seed=seed)
    if budget is not None:  # each iteration costs up to 1.25 times its draws (line searches)
        max_iter = min(max_iter, int(budget / (1.25 * (first_draws + max_draws))))
        if max_iter < MIN_ITER:
            raise CandidateFailed(f"{budget} gradient evaluations left are too few for it", 0)
    fit = fit_fixed_draws(log_joint, family, family.initial(), seed=seed, first_draws=first_draws,
                          max_draws=max_draws, max_iter=max_iter, progress=progress)  # fmt: skip
    _check_gain(log_joint, family, fit, seed)
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


def _check_gain(log_joint: Callable, family: CouplingFlow, fit, seed: int) -> None:
    """CandidateFailed (with the gradients spent) unless the fitted flow's ELBO on independent
    draws, paired with its start's on the same noise, is higher by more than 2 standard
    errors: a flow fitted to its fixed draws' noise (more parameters than a Gaussian's, no
    fewer draws) or sending its tails where those draws were not is no gain."""
    eps = np.random.default_rng(seed + 104729).standard_normal((CHECK_DRAWS, family.dim))
    terms = []
    for theta in (fit.theta, family.initial()):
        zeta, log_det = family.forward(np.asarray(theta, dtype=float), eps)
        with np.errstate(all="ignore"):
            terms.append(np.asarray(log_joint(np.asarray(zeta)), dtype=float) + log_det)
    diff = terms[0] - terms[1]
    gain = float(np.mean(diff)) if np.all(np.isfinite(diff)) else -np.inf
    error = float(np.std(diff) / np.sqrt(len(diff))) if np.isfinite(gain) else np.inf
    if not gain > 2 * error:
        raise CandidateFailed(f"its ELBO on {CHECK_DRAWS} independent draws was not above the "
                              f"Gaussian's it started from ({gain:+.3g} +- {error:.2g} nats)",
                              fit.grad_evals)  # fmt: skip


def _moment_noise(dim: int) -> np.ndarray:
    return np.random.default_rng(7).standard_normal((MOMENT_DRAWS, dim))
