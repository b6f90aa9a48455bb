"""`--method bbvi`: score-function BBVI over every latent (Ranganath et al. 2014),
Rao-Blackwellised by the graph IR's Markov blankets; binary latents welcome."""

from __future__ import annotations

from ppl.errors import ModelError
from ppl.families.choice import FamilyPolicy
from ppl.families.registry import gaussian_first
from ppl.methods.base import CompositeMethod, FitOptions, Fitted


def steps_text(vi) -> str:
    """The step-size sequence of a stochastic fit, in words."""
    return "Stan's step sequence" if vi.optimizer == "stan" else vi.optimizer


class BBVI(CompositeMethod):
    name = fitted_as = "bbvi"
    families = FamilyPolicy(rich=True, gradient="score-function gradient")
    takes_binary = True
    takes_batch = True

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        o = options
        vi = fit_bbvi(
            model, chosen, init, rng, max_iter=o.iterations, tol_rel_obj=o.tol_rel_obj,
            eta=o.eta, grad_samples=o.grad_samples or 100, estimator=o.estimator,
            optimizer=o.optimizer or "stan", progress=o.progress, batch=o.batch,
            checkpoint=o.checkpoint, search=True,
        )  # fmt: skip
        return Fitted(vi, self, chosen)

    def method_text(self, result, rows: str) -> str:
        vi = result.vi
        searched = getattr(vi, "adapt_iterations", 0)
        how = f" (searched in {searched} iterations)" if searched else ""
        return (f"BBVI ({vi.estimator} score-function gradients, {steps_text(vi)}, eta "
                f"{vi.eta:g}{how}, {vi.grad_samples} draws per step)")  # fmt: skip


def fit_bbvi(model, chosen, init, rng, *, batch, estimator, grad_samples, **options):
    """Score-function BBVI over every latent, Rao-Blackwellised by the graph IR's blankets.

    Warm-started families start from a Gaussian fit, moment-matched (see ppl.methods.mixed);
    `batch` subsamples the data rows (ppl.inference.subsample).
    """
    from ppl.families.composite import MixedFamily, blocks_of
    from ppl.inference.bbvi import ScoreObjective, chain, fit_stochastic
    from ppl.inference.estimators import log_joint_terms
    from ppl.inference.stopping import STAN_TOL_REL_OBJ

    gaussian = gaussian_first(chosen)
    family = MixedFamily(blocks_of(model, gaussian), model.dim)
    theta0 = family.initial(init)
    if batch:
        from ppl.inference.subsample import Batches, SubsampledScoreObjective

        if estimator != "rb+cv":
            raise ModelError("--batch works with the rb+cv estimator only")
        batches = Batches(model, batch, rng)
        objective = SubsampledScoreObjective(family, batches, grad_samples, theta0)
        if options.get("checkpoint") is not None:
            options["checkpoint"].extras["batches"] = batches
    else:
        terms = log_joint_terms(model, family.rvs(theta0, rng, 2), rng)
        objective = ScoreObjective(family, terms, estimator, grad_samples)
    first = dict(options)
    if gaussian != chosen and first.get("tol_rel_obj") is None:
        first["tol_rel_obj"] = STAN_TOL_REL_OBJ  # only a warm start: the second stage is judged
    result = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **first)
    if gaussian != chosen:
        rich = MixedFamily(blocks_of(model, chosen), model.dim)
        theta0 = rich.moved_from(family, result.theta)
        if batch:
            objective = SubsampledScoreObjective(rich, objective.batches, grad_samples, theta0,
                                                 like=objective)  # fmt: skip
        else:
            objective = ScoreObjective(rich, objective.terms, estimator, grad_samples)
        second = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
        result = chain(result, second)
    result.estimator = estimator
    result.grad_samples = grad_samples
    result.grad_evals = (result.iterations + result.adapt_iterations) * grad_samples
    return result
