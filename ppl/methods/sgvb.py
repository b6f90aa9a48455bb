"""Gamma SGVB (Knowles 2015): how `auto` (with --optimizer or --no-polish) and ADVI fit a choice
with a reparameterised non-Gaussian family: warm-started by mean-field ADVI, then refined."""

from __future__ import annotations

import numpy as np

from ppl.errors import FitError
from ppl.families.choice import FamilyPolicy
from ppl.methods.base import CompositeMethod, FitOptions, Fitted


class SGVBMethod(CompositeMethod):
    """Not a --method of its own: the fit `auto`'s stochastic road and ADVI turn to."""

    name = fitted_as = "sgvb"
    families = FamilyPolicy()

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        o = options
        vi, refinement = fit_sgvb(
            model, chosen, init, rng, max_iter=o.iterations, tol_rel_obj=o.tol_rel_obj,
            grad_samples=o.grad_samples or 10, elbo_samples=o.elbo_samples,
            optimizer=o.optimizer, polish_fit=o.refine_draws > 0, progress=o.progress,
            checkpoint=o.checkpoint,
        )  # fmt: skip
        return Fitted(vi, self, chosen, refinement)

    def method_text(self, result, rows: str) -> str:
        return f"gamma SGVB ({result.vi.optimizer}, warm-started by mean-field ADVI)"


SGVB = SGVBMethod()


def fit_sgvb(model, chosen, init, rng, *, polish_fit, optimizer, progress, checkpoint,
             **options):  # fmt: skip
    """Gamma SGVB warm-started from mean-field ADVI (moment-matched), then refined.

    ADVI with its deterministic polish puts every latent near its optimum on the log scale; the
    gamma blocks start from the gamma with the same mean and variance of log x, and L-BFGS on the
    fixed-draw ELBO moves them from a lognormal-shaped to a gamma-shaped fit. A stochastic SGVB
    phase runs in between when an optimiser is named, and replaces the L-BFGS refinement when
    the polish is off (``refine_draws=0``). A warm start that failed, fell back to its own start,
    or led the gamma fit to a non-finite ELBO is dropped, with a warning, for a cold start.
    """
    from ppl.families.composite import MixedFamily, blocks_of

    family = MixedFamily(blocks_of(model, chosen), model.dim)
    warm, failure, spent = _warm_start(model, init, rng, polish_fit, progress, checkpoint,
                                       options)  # fmt: skip

    def gamma_phase(theta0, optimizer):
        return _gamma_phase(model, family, init, rng, theta0, optimizer, warm, polish_fit,
                            progress, checkpoint, options)  # fmt: skip

    if warm is not None:
        try:
            result = gamma_phase(family.from_gaussian(warm.mean, warm.sd), optimizer)
        except FitError as exc:
            # e.g. ADVI found a spike where the density is unbounded (gamma shape < 1 at 0)
            failure = f"gamma SGVB from it failed: {str(exc).split('. ')[0]}"
            spent, warm = (warm.iterations, warm.grad_evals), None
    if warm is None:
        # a Gaussian that wanders into overflow need not stop the gamma fit: start it cold, with
        # the paper's AdaDelta (its steps grow with the parameters, Adam's fixed ones do not)
        optimizer = optimizer or "adadelta"
        result = gamma_phase(None, optimizer)
        result.iterations += spent[0]
        result.grad_evals += spent[1]
        result.warnings.insert(
            0,
            f"the mean-field ADVI warm start failed ({failure}); gamma SGVB started from the "
            f"default start with {optimizer}",
        )
    else:
        result.iterations += warm.iterations
        result.grad_evals += warm.grad_evals
        result.warnings = list(warm.warnings) + result.warnings
    return result, _polish_record(result.polish, warm)


def _warm_start(model, init, rng, polish_fit, progress, checkpoint, options):
    """Mean-field ADVI (polished when the fit is), or None with why and what it spent."""
    from ppl.inference.advi import fit_advi
    from ppl.inference.refine import polish

    advi_options = {k: options[k] for k in ("tol_rel_obj", "elbo_samples") if k in options}
    warm, failure = None, None
    try:
        warm = fit_advi(
            model.log_joint,
            model.dim,
            method="meanfield",
            max_iter=options.get("max_iter", 10000),
            init=init,
            seed=int(rng.integers(2**31)),
            progress=progress,
            checkpoint=checkpoint,
            **advi_options,
        )
    except FitError as exc:
        failure = str(exc).split(". ")[0]
    if warm is not None and not warm.elbo > warm.elbo_trace[0][1]:
        # ADVI diverged and fell back to its own start: moment-matching that is no warm start
        failure = "no iteration improved on its start"
        spent, warm = (warm.iterations, warm.grad_evals), None
    else:
        spent = (0, 0)
    if warm is not None and polish_fit:
        warm, _ = polish(model.log_joint, warm, init, seed=int(rng.integers(2**31)))
    return warm, failure, spent


def _gamma_phase(model, family, init, rng, theta0, optimizer, warm, polish_fit, progress,
                 checkpoint, options):  # fmt: skip
    """The composite family's fit from theta0: stochastic SGVB when an optimiser is named or
    the polish is off, then (with the polish) L-BFGS on the fixed-draw ELBO."""
    from ppl.inference.sgvb import fit_sgvb as stochastic_sgvb
    from ppl.inference.sgvb import refine_warm_start

    result = None
    if optimizer is not None or not polish_fit:
        result = stochastic_sgvb(
            model.log_joint,
            family,
            init,
            seed=int(rng.integers(2**31)),
            polish=False,
            optimizer=optimizer or "adam",
            theta0=theta0,
            progress=progress,
            checkpoint=checkpoint,
            **options,
        )
    if polish_fit:
        stochastic = result
        start = theta0 if stochastic is None else stochastic.theta
        result = refine_warm_start(model.log_joint, family, start, seed=int(rng.integers(2**31)))
        result.converged = (warm is not None and warm.converged) or (
            stochastic is not None and stochastic.converged
        )
        if stochastic is not None:
            result.optimizer = f"{stochastic.optimizer}, then L-BFGS"
            result.iterations += stochastic.iterations
            result.grad_evals += stochastic.grad_evals
            result.warnings = stochastic.warnings + result.warnings
            shifted = [(i + stochastic.iterations, e) for i, e in result.elbo_trace[1:]]
            result.elbo_trace = stochastic.elbo_trace + shifted
    if not np.isfinite(result.elbo):
        raise FitError("gamma SGVB ended with a non-finite ELBO estimate")
    return result


def _polish_record(info, warm) -> dict | None:
    """fit.json's record of the L-BFGS refinement, in the polish's terms."""
    if info is None:
        return None
    return {
        "used": info["used"],
        "stages": [{"family": "mixed", "iterations": info["iterations"]}],
        "elbo_advi": info.get("elbo_before", float("nan")),
        "elbo_polished": info.get("elbo_after", float("nan")),
        "gradient_evaluations": info["gradient_evaluations"],
        "draws": info["draws"],
        "warm_start": "none (ADVI failed)" if warm is None
        else "mean-field ADVI, moment-matched to gamma",
    }
