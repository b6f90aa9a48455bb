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


#: Antithetic pairs of Stan's initial points (uniform(-2, 2)) from which short mode searches
#: look for modes beyond the two the road found (two modes make more plausible: a third one
#: the mixture missed would leave its verdict "good" on a wrong q).
MORE_STARTS = 3
#: At most this many components.
MAX_COMPONENTS = 4


def mixture_starts(log_joint: Callable, vi, polish: dict, rng: np.random.Generator | None = None,
                   *, max_evals: int | None = None,
                   progress=None) -> tuple[list, list, np.ndarray, int]:  # fmt: skip
    """The components' starts from the road's record: the fitted Gaussian (q's mean and scale)
    on the mode it was built on, and N(point, Laplace covariance there) on each other mode
    found, by the road or (with `rng`) by more_modes (the fitted scale where the Hessian there
    is not positive definite); the weights by the Laplace estimate of each mode's mass,
    p(mode) |L|. Returns (means, scales, weights, gradient evaluations spent)."""
    mean, L = gaussian_of(vi)
    second = polish["second_mode"]
    means, scales, log_mass, spent = [mean], [L], [float(second["log_density"][0])], 0

    def add(point: np.ndarray, lp: float) -> None:
        nonlocal spent
        precision = mode_hessian(log_joint, point)
        spent += 2 * len(point) if precision is not None else 0
        lap = laplace_start(point, precision)
        means.append(point)
        scales.append(L if lap is None else lap.scale_tril)
        log_mass.append(lp)

    add(np.asarray(second["point"], dtype=float), float(second["log_density"][1]))
    if rng is not None:
        left = None if max_evals is None else max_evals - spent
        found, used = more_modes(log_joint, means, scales, log_mass, rng, max_evals=left,
                                 progress=progress)  # fmt: skip
        spent += used
        for point, lp in found:
            add(point, lp)
    log_mass = np.array(log_mass) + [float(np.sum(np.log(np.abs(np.diag(s))))) for s in scales]
    weights = np.exp(log_mass - log_mass.max())
    return means, scales, weights / weights.sum(), spent


def more_modes(log_joint: Callable, means: list, scales: list, log_densities: list,
               rng: np.random.Generator, *, max_evals: int | None = None,
               progress=None) -> tuple[list, int]:  # fmt: skip
    """Modes beyond the known ones (means, with scales' marginal sds): short mode searches from
    MORE_STARTS antithetic pairs of Stan's initial points, each stopped as soon as it enters
    a known mode's basin (within DISTINCT_SDS sds of it); a converged one elsewhere, within
    COMPARABLE_NATS of the best known log density, with a valley between it and the nearest
    known mode, is a new mode. Returns ([(point, log density)], gradient evaluations)."""
    from ppl.inference.mode import find_mode
    from ppl.inference.suspect import COMPARABLE_NATS, DISTINCT_SDS, SECOND_MAX_ITER, VALLEY_NATS

    known = [(np.asarray(m, float), np.sqrt(np.sum(np.asarray(L) ** 2, axis=1)), float(lp))
             for m, L, lp in zip(means, scales, log_densities, strict=True)]  # fmt: skip
    best = max(lp for _, _, lp in known)
    found, spent = [], 0

    def nearest(z: np.ndarray) -> tuple[float, int]:
        return min((float(np.max(np.abs(z - m) / sd)), k) for k, (m, sd, _) in enumerate(known))

    def covered(z: np.ndarray) -> bool:
        return nearest(z)[0] < DISTINCT_SDS

    for _ in range(MORE_STARTS):
        u = rng.uniform(-2.0, 2.0, len(known[0][0]))
        for start in (u, -u):
            left = None if max_evals is None else max_evals - spent
            if len(known) >= MAX_COMPONENTS or (left is not None and left < 2 * SECOND_MAX_ITER):
                return found, spent
            other = find_mode(log_joint, start, rng, until=covered, max_iter=SECOND_MAX_ITER,
                              max_evals=left, progress=progress, ftol=1e-7, gtol=1e-4,
                              label="a mode search for modes the two found leave out")  # fmt: skip
            spent += other.grad_evals
            point, lp = other.point, float(other.log_density)
            if not (other.converged and np.isfinite(lp)) or covered(point) \
                    or lp < best - COMPARABLE_NATS:  # fmt: skip
                continue
            m, sd, lp_m = known[nearest(point)[1]]
            with np.errstate(all="ignore"):  # a valley between them, not a ridge
                middle = float(log_joint(0.5 * (m + point)[None, :])[0])
            if middle < min(lp, lp_m) - VALLEY_NATS:
                found.append((point, lp))
                known.append((point, sd, lp))  # its own sds come with its Hessian, later
    return found, spent


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
