"""`--method auto`: the deterministic road to q, and the covariances it adds beyond mean-field.

1. The mode by L-BFGS (ppl.inference.mode), from Stan's initial range.
2. A first q there: each latent's family moment-matched to the Gaussian with the mode as mean
   and 1 / sqrt(-H_ii) as sd (the mean-field optimum for a Gaussian posterior; H from
   Hessian-vector products), unless a plain start (Stan's: the initial point, sd 1) has the
   higher ELBO, as it has on a funnel, where the mode is far down the neck.
3. The ELBO on fixed draws, gamma and Gaussian blocks in one objective, by L-BFGS with the draws
   grown until q settles (ppl.inference.saa).
4. Beyond mean-field (the caller, ppl.methods.escalation, checks PSIS k-hat and keeps the
   higher ELBO): `richer` fits a full-rank Gaussian the same way, from the better of the Laplace
   approximation and q, `low_rank` a low-rank-plus-diagonal one (for models too large for
   full rank); `linear_response` gives q's means with its linear-response covariance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from ppl.families.gamma_quantile import WARM
from ppl.families.gaussian import FullRankGaussian
from ppl.families.lowrank import LowRankGaussian, initial_factor
from ppl.families.registry import FAMILIES
from ppl.inference.draws import fixed_normal_draws
from ppl.inference.family_race import log_scale_choice
from ppl.inference.hessian import hessian_by_hvp
from ppl.inference.mean_field_gap import mean_field_bound
from ppl.inference.mode import find_mode
from ppl.inference.race import Rival
from ppl.inference.result import VIResult
from ppl.inference.saa import (
    FIRST_DRAWS,
    GROWTH,
    Preconditioned,
    elbo_on,
    fit_fixed_draws,
    whitened_draws,
)
from ppl.inference.sgvb import Block, MixedFamily, SGVBResult
from ppl.inference.suspect import second_mode, unbounded
from ppl.progress import start_phase

#: Dense Hessians (from D Hessian-vector products in one batched call) up to this dimension.
MAX_DENSE_DIM = 1000
#: The largest draw set of the full-rank fit (D + D(D+1)/2 parameters: iterations cost more).
FULL_RANK_MAX_DRAWS = 512
#: The fewest draws the linear-response Hessian is taken on.
LR_MIN_DRAWS = 32
#: Probe draws that rank the candidate starts by their ELBO.
PROBE_DRAWS = 64
#: Columns of the low-rank-plus-diagonal family's factor.
LOW_RANK = 8
#: The largest draw set of the low-rank fit.
LOW_RANK_MAX_DRAWS = 512
#: A positive latent whose log has a Laplace sd below this at the mode gets a Gaussian on the
#: log scale instead of its gamma: its gamma would need a shape beyond 1 / sd^2 = 2.5e7, near
#: the family's numerical limit (1e8), where the fit stopped at 1e8 with sds 14x too wide
#: (Poisson counts of 1e9).
GAMMA_MIN_LOG_SD = 2e-4


class CandidateFailed(ArithmeticError):
    """A q beyond mean-field that could not be had after work was spent on it: the work is
    counted in the fit's gradient evaluations all the same."""

    def __init__(self, reason: str, grad_evals: int):
        super().__init__(reason)
        self.grad_evals = grad_evals


def mode_hessian(log_joint: Callable, point: np.ndarray) -> np.ndarray | None:
    """-H at the point (the precision of the Laplace approximation), or None when too large
    or not finite."""
    if len(point) > MAX_DENSE_DIM:
        return None
    try:
        with np.errstate(all="ignore"):
            H = -hessian_by_hvp(log_joint, point)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError, ArithmeticError):
        return None
    return H if np.all(np.isfinite(H)) else None


#: No default fit spends more gradient evaluations than this (mode searches, solves and
#: escalation together; a solve cut short by it is not converged, and says so).
GRADIENT_BUDGET = 50_000
#: The mode search's iteration cap: this many iterations, or one per dimension where that is
#: more (quasi-Newton steps on a quadratic take up to one per distinct curvature; gamma_normal's
#: 1,843 coordinates, a factor model's slow scale ridge, converged after 1,625 iterations, and
#: stopped at 400 its still-climbing search read as an unbounded density).
MODE_MAX_ITER = 400
#: Draws on which the candidate starts' solved fits are compared.
COMPARE_DRAWS = 256
#: Where the mode is a suspect, each start's solve gets 1/SUSPECT_RACE of the gradients left: the
#: escalation after it (a collapse, where the spike integrates away) needs the rest (measurement
#: error's two solves spent 30,000 of the 50,000 gradients and its collapse ran out). The first
#: (the higher on the probe) gets as much as the second: the second stops where it cannot catch
#: the first (ppl.inference.race).
SUSPECT_RACE = 4


def capped(default: int, max_iter: int | None) -> int:
    """An iteration cap: the stage's own, or --iter when lower."""
    return default if max_iter is None else max(1, min(default, int(max_iter)))


def fit_auto(
    log_joint: Callable,
    blocks: list[Block],
    dim: int,
    init: np.ndarray,
    rng: np.random.Generator,
    *,
    seed: int = 0,
    progress: Callable[[int, float | None], None] | None = None,
    max_iter: int | None = None,
    max_evals: int = GRADIENT_BUDGET,
) -> SGVBResult:
    """Steps 1-3 above; the result's `polish` dict records the road (mode, rounds, Hessian, and
    what made the mode a suspect). `max_iter` caps every L-BFGS run (--iter), `max_evals` the
    gradients of the whole."""
    WARM.clear()  # the gamma quantiles' warm starts: a fit's numbers depend on its seed only
    reserve = min(2 * dim + 16 * FIRST_DRAWS, max_evals // 4)  # a first solve's, the Hessian's
    mode = find_mode(log_joint, init, rng, progress=progress,
                     max_iter=capped(max(MODE_MAX_ITER, dim), max_iter),
                     max_evals=max(1, max_evals - reserve))  # fmt: skip
    suspect = unbounded(mode, log_joint)
    precision = mode_hessian(log_joint, mode.point)
    spent = mode.grad_evals + (2 * dim if precision is not None else 0)
    second = None
    if suspect is None and not mode.spent:
        other, second = second_mode(log_joint, mode, rng, precision, progress=progress,
                                    max_evals=max_evals - spent)  # fmt: skip
        spent += other.grad_evals if other is not None else 0
        if second is not None and second["log_density"][1] > second["log_density"][0]:
            second["log_density"] = second["log_density"][::-1]
            second["point"], mode = mode.point, replace(other, grad_evals=mode.grad_evals)
            precision = mode_hessian(log_joint, mode.point)
            spent += 2 * dim if precision is not None else 0
    curvature = np.diag(precision) if precision is not None else np.ones(dim)
    with np.errstate(divide="ignore"):
        sd = np.where(curvature > 0, 1.0 / np.sqrt(np.abs(curvature)), 1.0)
    blocks, not_gamma, race = log_scale_choice(log_joint, blocks, mode.point, sd, seed + 5,
        GAMMA_MIN_LOG_SD, suspect is None and precision is not None)  # fmt: skip
    family = MixedFamily(blocks, dim)
    starts = {"mode": family.from_gaussian(mode.point, sd),
              "initial point": family.from_gaussian(mode.init, np.ones(dim))}  # fmt: skip
    probe = fixed_normal_draws(PROBE_DRAWS, dim, seed + 3)
    scores = {name: elbo_on(log_joint, family, th, probe) for name, th in starts.items()}
    # a Gaussian q on more draws than dimensions: whitened, they make the fixed-draw ELBO exact
    # for the quadratic part of log p (a posterior near Gaussian is solved in one round; on 8
    # draws a 200,000-row regression's sds were up to 10% off). Not for gamma blocks, whose
    # draws go through the gamma's quantile: GPFA's max error grew 0.57 -> 0.69 on 64 draws
    gaussian = not any(FAMILIES[b.family].pathwise for b in blocks)
    first = max(FIRST_DRAWS, dim + 2) if gaussian else FIRST_DRAWS
    if suspect is not None:
        # the mode is a suspect: both starts are solved, on the same draws, and the higher
        # final ELBO wins (on the measurement-error model the mode's Gaussian ended 140 nats
        # below the plain start's fit); the higher on the probe first (ppl.inference.race)
        names = sorted(["mode", "initial point"], key=lambda k: -scores[k])
    else:
        names = [max(scores, key=lambda k: scores[k])]
    bound, bounded = _condemned(log_joint, mode.point, family.size, first, suspect, precision)
    spent += 2 * dim if bound is not None else 0
    solved = {}
    for name in names:
        share = (max_evals - spent) // (SUSPECT_RACE if suspect else 1)
        if solved and share < 2 * first:
            break
        start_phase(progress, f"the fit from the {name} start")
        coordinates = Preconditioned(family, starts[name], precision)
        rival = Rival(solved[names[0]].polish["rounds"][0]["elbo"]) if solved else None
        result = fit_fixed_draws(log_joint, coordinates, np.zeros(coordinates.size), seed=seed,
                                 first_draws=first, progress=progress, rival=rival, **bounded,
                                 max_iter=capped(1000, max_iter), max_evals=share)  # fmt: skip
        spent += result.grad_evals
        result.polish["coordinates"], result.polish["optimum"] = coordinates, result.theta
        result.family, result.theta = family, np.asarray(coordinates.theta(result.theta))
        solved[name] = result
    eps = whitened_draws(COMPARE_DRAWS, dim, seed + 11) if len(solved) > 1 else None
    compared = {} if eps is None else {n: elbo_on(log_joint, family, solved[n].theta, eps)
                                       for n in starts if n in solved}  # fmt: skip
    chosen = max(compared, key=lambda k: compared[k]) if compared else names[0]
    result = solved[chosen]
    result.grad_evals = spent
    result.polish.update(
        {
            "mode_gradient_evaluations": mode.grad_evals,
            "mode_iterations": mode.iterations,
            "mode_converged": mode.converged,
            "hessian_vector_products": dim if precision is not None else 0,
            "start": chosen,
            "probe_elbo": scores,
            "compared_elbo": compared,
            "hopeless": [n for n, r in solved.items() if r.polish["hopeless"]],
            "suspect": suspect,
            "second_mode": second,
            "budget_spent": spent >= max_evals or mode.spent,
            "mode": mode.point,
            "precision": precision,
            "gaussian_not_gamma": not_gamma,
            "family_race": race,
            "mean_field_bound": bound,
        }
    )
    return result


def _condemned(log_joint: Callable, point: np.ndarray, size: int, first: int, suspect,
               precision) -> tuple[dict | None, dict]:  # fmt: skip
    """Where no mean-field q can be reliable and no richer Gaussian follows (more than
    MAX_DENSE_DIM coordinates, a mode that is no suspect): the bound (mean_field_bound) and
    fit_fixed_draws' options that solve q to the scale of its gap, else (None, {})."""
    if suspect is not None or precision is not None:
        return None, {}
    bound = mean_field_bound(log_joint, point, size, first, GROWTH, MAX_DENSE_DIM)
    if bound is None:
        return None, {}
    return bound, {"stall": bound["stall"], "max_draws": bound["max_draws"]}


def as_gaussian(result: SGVBResult) -> VIResult:
    """q's moments as a mean-field Gaussian on the unconstrained scale (a start for richer q)."""
    mean, sd = result.family.moments(result.theta)
    return VIResult("meanfield", mean, np.diag(sd), [], result.elbo, 0, 0, True, 0.0, 0.0)


def laplace_start(mode: np.ndarray, precision: np.ndarray | None) -> VIResult | None:
    """N(mode, (-H)^-1) when -H is positive definite."""
    if precision is None:
        return None
    try:
        cov = np.linalg.inv(precision)
        L = np.linalg.cholesky(0.5 * (cov + cov.T))
    except np.linalg.LinAlgError:
        return None
    if not np.all(np.isfinite(L)):
        return None
    return VIResult("fullrank", np.array(mode, float), L, [], -np.inf, 0, 0, False, 0.0, 0.0)


def linear_response(log_joint: Callable, first: SGVBResult, *, seed: int = 0,
                    max_evals: int | None = None) -> VIResult | None:  # fmt: skip
    """N(E_q[zeta], Sigma_LR): the first fit's means with its linear-response covariance
    (ppl.inference.linear_response); None when there are too many parameters, CandidateFailed
    (with the gradients spent) when the fixed-draw optimum is not strict. Fewer draws than D
    leave the fixed-draw ELBO nearly flat along some directions of q's parameters, and H^-1
    there is noise; many more make H costly (a gradient per parameter, each over every draw).
    Outside [n, 2n] draws, n = max(D, LR_MIN_DRAWS), the fit is solved once more, from its
    optimum, on n draws (rounded up to a power of 2) first."""
    from ppl.inference.linear_response import MAX_LR_PARAMETERS, lr_covariance

    info = first.polish or {}
    coordinates, optimum = info.get("coordinates"), info.get("optimum")
    if coordinates is None or coordinates.size > MAX_LR_PARAMETERS:
        return None
    objective, counter = info["objective"], info["evaluations"]
    evals_before = counter["evals"]
    n = max(coordinates.dim, LR_MIN_DRAWS)
    cost = n * (coordinates.size + 1) * (2 if not n <= info["rounds"][-1]["draws"] <= 2 * n else 1)
    if max_evals is not None and cost > max_evals:
        raise CandidateFailed(f"it would take about {cost} gradient evaluations, more than the "
                              f"{max_evals} left of the budget", 0)  # fmt: skip
    if not n <= info["rounds"][-1]["draws"] <= 2 * n:
        again = fit_fixed_draws(log_joint, coordinates, optimum, seed=seed, first_draws=n,
                                max_draws=n)  # fmt: skip
        objective, optimum = again.polish["objective"], again.theta
        counter, evals_before = again.polish["evaluations"], 0  # a fresh count, re-solve in it
    try:
        with np.errstate(all="ignore"):
            cov = lr_covariance(objective, coordinates.mean_map, optimum)
            L = np.linalg.cholesky(cov)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError, ArithmeticError):
        L = None
    evals = counter["evals"] - evals_before
    if L is None or not np.all(np.isfinite(L)):
        raise CandidateFailed("the fixed-draw optimum is not strict: the ELBO's Hessian in q's "
                              "parameters is not positive definite", evals)  # fmt: skip
    mean = np.asarray(coordinates.mean_map(optimum), dtype=float)
    return VIResult("fullrank", mean, L, [], first.elbo, 0, evals, True, 0.0, 0.0)


def richer(log_joint: Callable, first: SGVBResult, *, seed: int = 0,
           max_evals: int | None = None, max_iter: int | None = None) -> VIResult:  # fmt: skip
    """A full-rank Gaussian by L-BFGS on a fixed-draw ELBO with growing draws, in coordinates
    relative to the better (by ELBO on probe draws) of the Laplace approximation and the first
    fit, so that theta = 0 is that start."""
    info = first.polish or {}
    start = as_gaussian(first)
    candidates = [start]
    lap = laplace_start(info.get("mode", start.mean), info.get("precision"))
    if lap is not None:
        candidates.append(lap)
    probe = fixed_normal_draws(PROBE_DRAWS, start.dim, seed + 7)
    families = [FullRankGaussian(q.mean, q.scale_tril) for q in candidates]
    scores = [elbo_on(log_joint, f, f.initial(), probe) for f in families]
    family = families[int(np.argmax(scores))]
    first_draws = max(FIRST_DRAWS, 2 * start.dim)
    return _gaussian_fit(log_joint, family, seed=seed, first_draws=first_draws,
                         max_draws=FULL_RANK_MAX_DRAWS, max_evals=max_evals,
                         max_iter=max_iter)  # fmt: skip


def low_rank(log_joint: Callable, first: SGVBResult, *, seed: int = 0,
             covariance: np.ndarray | None = None, max_evals: int | None = None,
             max_iter: int | None = None) -> VIResult:  # fmt: skip
    """A low-rank-plus-diagonal Gaussian (ppl.families.lowrank) by L-BFGS on a fixed-draw ELBO
    with growing draws, from the first fit's means and sds, its factor started along the
    leading directions of `covariance` (e.g. the linear-response one) or, without it, of the
    Laplace approximation's, whichever the probe draws rank higher."""
    info = first.polish or {}
    start = as_gaussian(first)
    rank = max(1, min(LOW_RANK, start.dim - 1))
    lap = laplace_start(info.get("mode", start.mean), info.get("precision"))
    covariances = [c for c in (covariance, None if lap is None else lap.cov) if c is not None]
    families = [LowRankGaussian(start.mean, start.sd, initial_factor(start.sd, c, rank, seed))
                for c in covariances or [None]]  # fmt: skip
    probe = fixed_normal_draws(PROBE_DRAWS, families[0].dim, seed + 7)
    scores = [elbo_on(log_joint, f, f.initial(), probe) for f in families]
    if not np.isfinite(max(scores)):
        # no solve starts from a non-finite ELBO (the edge partition model: 2,048 gradients on
        # 1,024 draws to find that out)
        raise CandidateFailed("its start has a non-finite ELBO on the probe draws", 0)
    family = families[int(np.argmax(scores))]
    return _gaussian_fit(log_joint, family, seed=seed, first_draws=family.dim + 2,
                         max_draws=LOW_RANK_MAX_DRAWS, max_evals=max_evals,
                         max_iter=max_iter)  # fmt: skip


def _gaussian_fit(log_joint: Callable, family, *, seed: int, first_draws: int,
                  max_draws: int, max_evals: int | None = None,
                  max_iter: int | None = None) -> VIResult:  # fmt: skip
    """A Gaussian family fitted on fixed draws, as a full-covariance VIResult."""
    fit = fit_fixed_draws(log_joint, family, family.initial(), seed=seed, first_draws=first_draws,
                          max_draws=max_draws, max_iter=capped(500, max_iter),
                          max_evals=max_evals)  # fmt: skip
    mean, L = family.mean_scale(fit.theta)
    q = VIResult("fullrank", mean, L, fit.elbo_trace, fit.elbo, fit.iterations, fit.grad_evals,
                 fit.converged, 0.0, fit.seconds, list(fit.warnings))  # fmt: skip
    q.grad_samples = fit.grad_samples
    return q
