"""`--method svi`: stochastic VI with a local step (Hoffman et al. 2013), Gibbs-SSVI by default
(Shah, Knowles & Ghahramani 2015): binary latents, the slabs they switch and the per-row latents
drawn by exact Gibbs sweeps given the globals, the global q (mean-field Gaussian) stepped by the
natural gradient with rho_t = (t + tau)^-kappa (ppl.inference.local_global, ppl.inference.gibbs)."""

from __future__ import annotations

from ppl.errors import ModelError
from ppl.families.choice import FamilyPolicy
from ppl.families.registry import GAUSSIAN
from ppl.methods.base import CompositeMethod, FitOptions, Fitted

#: What q is for a latent the local step draws (binary latents, their slabs, per-row latents).
GIBBS_DRAWN = "Gibbs draws given the rest (no density of its own)"


def _families(model, vi) -> dict[str, str]:
    """The truth about q per latent: the mean-field Gaussian of the global step where all of a
    latent's coordinates are in it, else Gibbs draws (whatever the method's policy proposed)."""
    inside = set(int(c) for c in vi.q_columns)
    return {lat.name: GAUSSIAN if all(c in inside for c in range(lat.offset, lat.offset + lat.size))
            else GIBBS_DRAWN for lat in model.latents}  # fmt: skip


class SVI(CompositeMethod):
    name = fitted_as = "svi"
    families = FamilyPolicy(gradient="natural gradient")
    takes_binary = True
    takes_batch = True

    def check_options(self, model, options: FitOptions) -> None:
        o = options
        if o.local not in ("gibbs", "meanfield"):
            raise ModelError(f"--local {o.local}: choose gibbs or meanfield")
        if o.burnin < 0 or o.samples < 1:
            raise ModelError("--burnin must be >= 0 and --samples >= 1")
        if o.checkpoint is not None:
            raise ModelError("--checkpoint/--resume: --method svi has no checkpoints yet")
        if o.local_draws not in ("auto", "all", "means"):
            raise ModelError(f"--local-draws {o.local_draws}: choose auto, all or means")
        if not 0.5 < o.kappa <= 1.0 or o.tau < 0:
            raise ModelError("--kappa must be in (0.5, 1] and --tau >= 0 (Robbins-Monro)")

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        from ppl.inference.local_global import fit_local_global
        from ppl.inference.local_rows import summarise_locals

        o = options
        vi = fit_local_global(
            model, init, rng, gibbs_step=o.local == "gibbs", batch=o.batch, burnin=o.burnin,
            samples=o.samples, kappa=o.kappa, tau=o.tau, max_iter=o.iterations,
            tol_rel_obj=o.tol_rel_obj, progress=o.progress,
        )  # fmt: skip
        vi.summarised = summarise_locals(vi, o.draws, o.local_draws)
        return Fitted(vi, self, _families(model, vi))

    def method_text(self, result, rows: str) -> str:
        vi = result.vi
        local = "Gibbs sweeps" if vi.gibbs else "mean-field Bernoulli q"
        batch = f", batches of {vi.batch} rows" if vi.batch else ""
        return (f"SVI with a local step ({local}: {vi.burnin} burn-in + {vi.samples} samples"
                f"{batch}), natural-gradient global steps rho_t = (t + {vi.tau:g})^-"
                f"{vi.kappa:g}; its ELBO figure is not a bound (the Gibbs part has no "
                "density)")  # fmt: skip

    def ended_by(self, result, met: bool, iterations: int) -> str:
        if not met:
            return f"the iteration cap (--iter {iterations})"
        return ("the stopping rule (relative change of the windowed log joint < --tol-rel-obj)"
                if result.vi.tol_rel_obj else "the optimum: the iterates stationary and two "
                "successive averages of q within their noise")  # fmt: skip

    def variational_parameters(self, result) -> dict:
        return result.vi.describe()

    def exact_summaries(self, result, weighted: bool = False):
        return None


SVI_METHOD = SVI()

#: Global binary coordinates (each its own model call per sweep) beyond which `auto` keeps the
#: mixed fit: BPFA written with a flat Z[N K] (models/bpfa/bpfa.model) would need 8,192 calls per
#: sweep; its per-row form (bpfa_patches.model) does its rows in parallel.
MAX_GLOBAL_UNITS = 256


def gibbs_road(model, rng) -> bool:
    """Whether `auto` fits this model with binary latents by Gibbs-SSVI: when two binary
    coordinates share a term (ppl.inference.gibbs.coupled), so that their posterior is dependent
    and the mixed fit's factorised q(z) would commit to one configuration; and when a sweep is
    affordable (at most MAX_GLOBAL_UNITS binary coordinates outside the rows)."""
    from ppl.inference.gibbs import coupled, plan_gibbs
    from ppl.inference.local_global import rows_of

    rows = rows_of(model, None, rng)
    if len(plan_gibbs(model, rows.local, rows.B).globals_) > MAX_GLOBAL_UNITS:
        return False  # a sweep would be one model call per global binary: the mixed fit
    return coupled(model, rng)
