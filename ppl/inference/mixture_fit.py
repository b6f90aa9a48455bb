"""A mixture of Gaussians (ppl.families.mixture) fitted on the fixed-draw road where the mode
searches found a second, distinct mode: one component per mode, started there, the stratified
ELBO maximised by L-BFGS over fixed draws growing as for the Gaussians (ppl.inference.saa), and
kept only when its ELBO on independent draws beats the single Gaussian's."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import autograd.numpy as anp
import numpy as np

from ppl.families.mixture import MIXTURE, GaussianMixture
from ppl.inference.auto import CandidateFailed, capped, laplace_start, mode_hessian
from ppl.inference.flow_fit import gaussian_of
from ppl.inference.result import VIResult
from ppl.inference.saa import FIRST_DRAWS, fit_fixed_draws

#: The largest draw set per component (the log joint sees K times as many rows).
MIXTURE_MAX_DRAWS = 256
#: L-BFGS iterations per solve.
MIXTURE_MAX_ITER = 500
#: Independent draws (per component) on which the mixture must beat the single Gaussian.
CHECK_DRAWS = 1024


@dataclass
class MixtureResult(VIResult):
    """A fitted mixture as a VIResult: `mean` and `scale_tril` are the mixture's exact mean and
    the Cholesky factor of its covariance, for whatever reads q's moments; `sample` and `log_q`
    are the mixture's own, exact (PSIS and the verdict use them unchanged)."""

    family: GaussianMixture | None = None
    theta: np.ndarray | None = None
    polish: dict = field(default_factory=dict)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.family.sample(self.theta, rng, n)

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        return self.family.log_q(self.theta, zeta)

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        return self.log_q(zeta)


class _Rows:
    """The mixture as ppl.inference.saa sees a family: its draws are rows (zeta | K w_k), whose
    last column _Weighted multiplies the log density by, so that saa's plain mean over the rows
    is the stratified sum_k w_k E_{q_k}[log p]; the entropy is the stratified one."""

    def __init__(self, family: GaussianMixture):
        self.family, self.dim = family, family.dim

    def draws(self, theta, eps: np.ndarray):
        zeta, factor, entropy = self.family.stratified(theta, eps)
        return anp.concatenate([zeta, anp.reshape(factor, (-1, 1))], axis=1), entropy

    def changes(self, before, after) -> np.ndarray:
        return self.family.changes(before, after)


class _Weighted:
    """log p of each row's first D columns, times its last."""

    def __init__(self, log_joint: Callable, dim: int):
        self.log_joint, self.dim = log_joint, dim

    def __call__(self, rows):
        return self.log_joint(rows[:, : self.dim]) * rows[:, self.dim]


def mixture_starts(log_joint: Callable, vi, polish: dict) -> tuple[list, list, np.ndarray, int]:
    """The components' starts from the road's record: the fitted Gaussian (q's mean and scale)
    on the mode it was built on, and N(point, Laplace covariance there) on each other mode
    found (the fitted scale where the Hessian there is not positive definite); the weights by
    the Laplace estimate of each mode's mass, p(mode) |L|. Returns (means, scales, weights,
    gradient evaluations spent on Hessians)."""
    mean, L = gaussian_of(vi)
    second = polish["second_mode"]
    means, scales, spent = [mean], [L], 0
    point = np.asarray(second["point"], dtype=float)
    precision = mode_hessian(log_joint, point)
    spent += 2 * len(point) if precision is not None else 0
    lap = laplace_start(point, precision)
    means.append(point)
    scales.append(L if lap is None else lap.scale_tril)
    log_mass = np.array(second["log_density"], dtype=float)
    log_mass += [float(np.sum(np.log(np.abs(np.diag(s))))) for s in scales]
    weights = np.exp(log_mass - log_mass.max())
    return means, scales, weights / weights.sum(), spent


def fit_mixture(log_joint: Callable, single, means, scales, weights=None, *, seed: int = 0,
                budget: int | None = None, max_iter: int | None = None,
                progress=None) -> MixtureResult:  # fmt: skip
    """A mixture of full-rank Gaussians started at (means, scales, weights), fitted by L-BFGS
    on the stratified ELBO over fixed draws, then checked against `single` (the road's q, any
    fit with `log_q`) on independent draws: CandidateFailed (with the gradients spent) unless
    higher. `budget`: the gradient evaluations it may spend (each costs K log-joint rows)."""
    family = GaussianMixture(means, scales, weights)
    K, D = family.K, family.dim
    max_evals = None if budget is None else budget // K
    first = max(FIRST_DRAWS, 2 * D)
    if max_evals is not None and max_evals < 4 * first:
        raise CandidateFailed(f"{budget} gradient evaluations left are too few for it", 0)
    fit = fit_fixed_draws(_Weighted(log_joint, D), _Rows(family), family.initial(), seed=seed,
                          first_draws=first, max_draws=max(MIXTURE_MAX_DRAWS, first),
                          max_iter=capped(MIXTURE_MAX_ITER, max_iter), progress=progress,
                          max_evals=max_evals)  # fmt: skip
    spent = K * fit.grad_evals
    theta = np.asarray(fit.theta, dtype=float)
    gain, error = _gain(log_joint, family, theta, single, seed)
    if not gain > 2 * error:
        raise CandidateFailed(f"its ELBO on {CHECK_DRAWS} independent draws was not above the "
                              f"single Gaussian's ({gain:+.3g} +- {error:.2g} nats)",
                              spent)  # fmt: skip
    mean, cov = family.mean_cov(theta)
    try:
        scale = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        scale = np.diag(np.sqrt(np.maximum(np.diag(cov), 0.0)))
    q = MixtureResult(MIXTURE, mean, scale, fit.elbo_trace, fit.elbo, fit.iterations, spent,
                      fit.converged, 0.0, fit.seconds, list(fit.warnings), family=family,
                      theta=theta)  # fmt: skip
    q.grad_samples = K * fit.grad_samples
    q.polish = {"rounds": (fit.polish or {}).get("rounds", []), "parameters": family.size,
                "weights": family.weights(theta).tolist(), "gain": gain}  # fmt: skip
    return q


def _gain(log_joint: Callable, family: GaussianMixture, theta, single, seed: int):
    """The mixture's ELBO less the single q's, on CHECK_DRAWS fresh noise rows eps, each row's
    terms paired: sum_k w_k (log p - log q)(mu_k + L_k eps) against (log p - log q) at the
    single q's draw for eps; the mean gain and its standard error."""
    eps = np.random.default_rng(seed + 104729).standard_normal((CHECK_DRAWS, family.dim))
    zeta, _, _ = family.stratified(theta, eps)
    zeta = np.asarray(zeta)
    with np.errstate(all="ignore"):
        mine = np.asarray(log_joint(zeta), dtype=float) - family.log_q(theta, zeta)
        mine = family.weights(theta) @ np.reshape(mine, (family.K, CHECK_DRAWS))
        other = _draws_of(single, eps)
        theirs = np.asarray(log_joint(other), dtype=float) - np.asarray(single.log_q(other))
    diff = mine - theirs
    if not np.all(np.isfinite(diff)):
        return -np.inf, np.inf
    return float(np.mean(diff)), float(np.std(diff) / np.sqrt(len(diff)))


def _draws_of(vi, eps: np.ndarray) -> np.ndarray:
    """The draws of a fit's q for standard-normal noise eps: a Gaussian's mean + L eps, the
    road's composite q through its family."""
    if isinstance(vi, VIResult) and getattr(vi, "family", None) is None:
        return vi.mean + eps @ vi.scale_tril.T
    if isinstance(vi, VIResult):  # a flow, a mixture: its own draws
        return vi.sample(np.random.default_rng(0), len(eps))
    return np.asarray(vi.family.draws(vi.theta, eps)[0])
