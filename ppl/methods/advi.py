"""`--method advi` (meanfield) and `--method fullrank`: Stan's ADVI, then the deterministic
polish (ppl.inference.refine). A choice with a reparameterised non-Gaussian family (--family
x=gamma) is fitted by SGVB instead (ppl.methods.sgvb)."""

from __future__ import annotations

from ppl.families.choice import FamilyPolicy
from ppl.families.registry import pathwise_non_gaussian
from ppl.limits import check_values
from ppl.methods.base import FitOptions, Fitted, Method
from ppl.methods.sgvb import SGVB


class ADVI(Method):
    """Stan's ADVI with a Gaussian of `structure` ("meanfield" or "fullrank", the Gaussian's
    covariance: ppl.inference.advi), polished by L-BFGS on a fixed-draw ELBO."""

    def __init__(self, name: str, structure: str, families: FamilyPolicy, dense: bool) -> None:
        self.name, self.fitted_as, self.structure = name, structure, structure
        self.families, self.dense = families, dense

    def check_model(self, model) -> None:
        if self.dense:
            check_values(f"a full-rank covariance of {model.dim} parameters",
                         float(model.dim) ** 2)  # fmt: skip

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        if pathwise_non_gaussian(chosen):
            return SGVB.fit(model, chosen, init, rng, options)
        from ppl.inference.advi import fit_advi
        from ppl.inference.refine import polish

        o = options
        kwargs = {} if o.grad_samples is None else {"grad_samples": o.grad_samples}
        vi = fit_advi(
            model.log_joint,
            model.dim,
            method=self.structure,
            max_iter=o.iterations,
            tol_rel_obj=o.tol_rel_obj,
            eta=o.eta,
            elbo_samples=o.elbo_samples,
            init=init,
            seed=int(rng.integers(2**31)),
            progress=o.progress,
            monitor=o.monitor,
            checkpoint=o.checkpoint,
            **kwargs,
        )
        refinement = None
        if o.refine_draws > 0:
            vi, refinement = polish(
                model.log_joint, vi, init, draws=o.refine_draws, seed=int(rng.integers(2**31))
            )
        return Fitted(vi, self, chosen, refinement)


MEAN_FIELD = FamilyPolicy()
FULL_RANK = FamilyPolicy(gaussian="full-rank Gaussian")

ADVI_MEANFIELD = ADVI("advi", "meanfield", MEAN_FIELD, dense=False)
MEANFIELD = ADVI("meanfield", "meanfield", MEAN_FIELD, dense=False)
FULLRANK = ADVI("fullrank", "fullrank", FULL_RANK, dense=True)
