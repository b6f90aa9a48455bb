"""The mixture of Gaussians `auto`'s road fits where its mode searches found a second, distinct
mode (ppl.inference.mixture_fit), and the Method that describes it when kept: fit.json's method
"mixture", each latent's label, its parameters (per component: weight, means and sds on the
unconstrained scale)."""

from __future__ import annotations

import time

import numpy as np

from ppl.errors import PplError
from ppl.families.choice import FamilyPolicy
from ppl.families.mixture import MIXTURE, MIXTURE_TITLE
from ppl.families.registry import GAUSSIAN
from ppl.methods.base import FitOptions, Method, fixed_draw_ending
from ppl.methods.escalation import FULL_RANK_MAX_DIM
from ppl.methods.result import FitResult, checked_draws, make_result
from ppl.progress import start_phase


class MixtureCandidate(Method):
    """A mixture of full-rank Gaussians, one per mode the road found (ppl.families.mixture)."""

    name = "auto"
    fitted_as = MIXTURE
    families = FamilyPolicy(gaussian=MIXTURE_TITLE)

    def method_text(self, result, rows: str) -> str:
        return result.description + rows

    def ended_by(self, result, met: bool, iterations: int) -> str:
        return fixed_draw_ending(met)

    def gaussian_name(self, vi) -> str:
        return MIXTURE

    def variational_parameters(self, result) -> dict:
        vi = result.vi
        w = vi.family.weights(vi.theta).tolist()
        parts = vi.family.mean_scales(vi.theta)
        out = {}
        for lat in result.model.latents:
            at = slice(lat.offset, lat.offset + lat.size)
            out[lat.name] = {"family": MIXTURE, "weights": w,
                             "mean": [mu[at].tolist() for mu, _ in parts],
                             "sd": [np.sqrt(np.sum(L**2, axis=1))[at].tolist()
                                    for _, L in parts]}  # fmt: skip
        return out


MIXTURE_CANDIDATE = MixtureCandidate()

#: The largest dimension the mixture is tried at: its components are full-rank Gaussians, tried
#: up to the full-rank Gaussian's limit (a K-fold full-rank fit beyond it costs more than the
#: road's budget allows); above it the second-mode fault stands.
MIXTURE_MAX_DIM = FULL_RANK_MAX_DIM

#: How the description of a kept mixture ends.
DESCRIPTION = ("one full-rank component at each mode the mode searches found, L-BFGS on the "
               "stratified ELBO over fixed draws")  # fmt: skip


def mixture_if_better(first: FitResult, log_joint, rng, options: FitOptions, *,
                      max_evals: int) -> FitResult:  # fmt: skip
    """Where the road's mode searches found a distinct second mode (polish["second_mode"]), a
    mixture of Gaussians with one component per mode, kept when its ELBO on independent draws
    is higher than the road's single q's; else `first`, with a note saying why not. The
    caller (ppl.methods.auto) gives the kept mixture the road's faults but the second mode's,
    which the mixture covers."""
    from ppl.inference.auto import CandidateFailed
    from ppl.inference.mixture_fit import MORE_STARTS, fit_mixture, mixture_starts

    if first.model.dim > MIXTURE_MAX_DIM:
        first.notes.append(f"auto: no mixture of Gaussians was tried for the second mode: "
                           f"{first.model.dim} parameters, over {MIXTURE_MAX_DIM}")  # fmt: skip
        return first
    start = time.perf_counter()
    start_phase(options.progress, "a mixture of Gaussians, one per mode found")
    spent = 0
    try:
        with np.errstate(all="ignore"):
            means, scales, weights, spent = mixture_starts(log_joint, first.vi, first.vi.polish,
                                                           rng, max_evals=max_evals // 4,
                                                           progress=options.progress)  # fmt: skip
            q = fit_mixture(log_joint, first.vi, means, scales, weights,
                            seed=options.seed, budget=max_evals - spent,
                            max_iter=options.iterations, progress=options.progress)  # fmt: skip
    except (CandidateFailed, PplError, ArithmeticError, ValueError, np.linalg.LinAlgError) as e:
        spent += getattr(e, "grad_evals", 0)
        first.vi.grad_evals += spent
        first.notes.append(f"auto: a mixture of Gaussians, one per mode found, was not kept "
                           f"after {spent} gradient evaluations: "
                           f"{str(e).splitlines()[0][:200]}")  # fmt: skip
        first.seconds += time.perf_counter() - start
        return first
    q.grad_evals += first.vi.grad_evals + spent
    q.iterations += first.vi.iterations
    last = first.vi.elbo_trace[-1][0] if first.vi.elbo_trace else 0
    q.elbo_trace = list(first.vi.elbo_trace) + [(last + 1 + i, e) for i, e in q.elbo_trace]
    draws = len(next(iter(first.draws.values())))
    checked = checked_draws(q, log_joint, rng, draws)
    gaussian = dict.fromkeys((lat.name for lat in first.model.latents), GAUSSIAN)
    best = make_result(first.model, q, MIXTURE_CANDIDATE, gaussian, log_joint, rng, draws=draws,
                       seed=first.seed, checked=checked, refinement=first.refinement,
                       seconds=first.seconds + time.perf_counter() - start)  # fmt: skip
    best.description = f"auto, then a mixture of {q.family.K} Gaussians ({DESCRIPTION})"
    best.kept = f"mixture of {q.family.K} Gaussians"
    more = q.family.K - 2
    found = f" ({more} more found by {2 * MORE_STARTS} further mode searches)" if more else ""
    weights = ", ".join(f"{w:.3g}" for w in q.polish["weights"])
    best.notes = list(first.notes) + [
        f"auto: a mixture of {q.family.K} Gaussians, one per mode found{found}, was kept "
        f"({q.grad_evals - first.vi.grad_evals} gradient evaluations): its ELBO on independent "
        f"draws is {q.polish['gain']:.3g} nats above the single Gaussian's; weights {weights}"
    ]
    return best
