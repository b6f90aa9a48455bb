"""The fit `auto` turns to for binary latents: score-function gradients for them, pathwise ones
for the rest, in one optimisation (ppl.inference.mixed). Not a --method of its own."""

from __future__ import annotations

from ppl.families.choice import FamilyPolicy
from ppl.families.registry import gaussian_first
from ppl.inference.stopping import STAN_TOL_REL_OBJ
from ppl.methods.base import CompositeMethod, FitOptions, Fitted
from ppl.methods.bbvi import steps_text


class Mixed(CompositeMethod):
    name = fitted_as = "mixed"
    families = FamilyPolicy()  # its labels; auto chose the families

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        o = options
        vi = fit_mixed(
            model, chosen, init, rng, max_iter=o.iterations,
            tol_rel_obj=o.tol_rel_obj or STAN_TOL_REL_OBJ,
            eta=o.eta, grad_samples=o.grad_samples or 100, optimizer=o.optimizer or "stan",
            progress=o.progress, checkpoint=o.checkpoint,
        )  # fmt: skip
        return Fitted(vi, self, chosen)

    def method_text(self, result, rows: str) -> str:
        vi = result.vi
        return (f"binary latents by score-function gradients (rb+cv), the rest pathwise; "
                f"{steps_text(vi)}, eta {vi.eta:g}, {vi.grad_samples} draws per step")  # fmt: skip


MIXED = Mixed()


def fit_mixed(model, chosen, init, rng, *, grad_samples, **options):
    """Binary latents by score-function gradients, the rest pathwise, in one optimisation."""
    from ppl.inference.bbvi import chain, fit_stochastic
    from ppl.inference.mixed import setup_mixed, with_families

    # Gaussian continuous families first; warm-started ones (gamma) are moment-matched from
    # them afterwards (as `auto` does for continuous models), then the joint optimisation goes on
    gaussian = gaussian_first(chosen)
    objective, theta0 = setup_mixed(model, gaussian, init, rng, grad_samples)
    result = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
    if gaussian != chosen:
        objective, theta0 = with_families(objective, result.theta, chosen)
        second = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
        result = chain(result, second)
    result.grad_samples = grad_samples
    result.grad_evals = result.iterations * grad_samples
    return result
