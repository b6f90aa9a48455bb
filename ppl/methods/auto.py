"""`--method auto`, the default: the deterministic road (mode, then L-BFGS on fixed-draw ELBOs
over growing draw sets: ppl.inference.auto) with gamma families for positive latents, restarts
when it ends nowhere, and its escalation to richer Gaussians (ppl.methods.escalation). With
--optimizer or --no-polish it takes the stochastic road instead (SGVB, or ADVI when every family
is Gaussian); binary latents go to the mixed fit."""

from __future__ import annotations

import copy

import numpy as np

from ppl.diagnostics.psis import USABLE
from ppl.errors import ModelError
from ppl.families.choice import FamilyPolicy
from ppl.families.registry import GAUSSIAN
from ppl.methods.advi import ADVI_MEANFIELD, FULL_RANK
from ppl.methods.base import CompositeMethod, FitOptions, Fitted, Method, fixed_draw_ending
from ppl.methods.escalation import FULL_RANK_MAX_DIM, full_rank_if_better, richer_if_better
from ppl.methods.mixed import MIXED
from ppl.methods.mixture import mixture_if_better
from ppl.methods.reparam import noncentred_if_better
from ppl.methods.svi import SVI_METHOD, gibbs_road

#: ppl.inference.auto.GRADIENT_BUDGET, without importing the road at startup.
GRADIENT_BUDGET = 50_000

#: Data rows from which the default road evaluates the log joint in chunks of draws, gradients
#: included (ppl.inference.full_data.WholeRows), to bound its memory.
MANY_ROWS = 50_000

#: The `how` of the road's fault for a distinct second mode (a mixture q answers it).
SECOND_MODE = "second mode"

#: Fits from new initial points when `auto`'s road ends with a non-finite ELBO.
AUTO_RESTARTS = 3

#: Curvature at the mode under this fraction of the largest makes a direction a candidate for
#: a flat, improper one (checked by stepping along it: flat_direction).
FLAT = 1e-8


def deterministic(options: FitOptions, binary: bool) -> bool:
    """Whether `auto` takes its deterministic road with these options."""
    return options.optimizer is None and options.refine_draws > 0 and not binary


class Auto(CompositeMethod):
    name = fitted_as = "auto"
    families = FamilyPolicy(rich=True, pathwise="{how}, fixed draws")
    takes_binary = True

    def rows_elsewhere(self, *, batch, optimizer, refine_draws) -> bool:
        return batch is None and optimizer is None and refine_draws > 0  # every row, summed

    def check_options(self, model, options: FitOptions) -> None:
        road = deterministic(options, any(lat.binary for lat in model.latents))
        if options.checkpoint is not None and road and options.partitions is None \
                and options.stream is None:  # fmt: skip
            raise ModelError(
                "--checkpoint/--resume: method 'auto' takes its deterministic road here, which "
                "has no stochastic loop to checkpoint; checkpoints work with --method advi, "
                "fullrank, bbvi or dsvi, or auto with --optimizer or --no-polish"
            )

    def prepare(self, model, options: FitOptions):
        if options.partitions is not None or options.stream is not None:
            return on_every_row(model, options.partitions, options.stream, options.checkpoint)
        binary = any(lat.binary for lat in model.latents)
        if deterministic(options, binary) and model.data_rows >= MANY_ROWS:
            return in_draw_chunks(model)
        return model

    def fit(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        if any(lat.binary for lat in model.latents):
            if options.optimizer is None and gibbs_road(model, rng):
                return SVI_METHOD.fit(model, chosen, init, rng, options)
            return MIXED.fit(model, chosen, init, rng, options)
        if not deterministic(options, False):
            return ADVI_MEANFIELD.fit(model, chosen, init, rng, options)
        return self._road(model, chosen, init, rng, options)

    def _road(self, model, chosen, init, rng, options: FitOptions) -> Fitted:
        """The deterministic road, restarted from other initial points when it ends with a
        non-finite ELBO."""
        from ppl.families.composite import blocks_of
        from ppl.inference.auto import fit_auto

        progress = options.progress
        blocks = blocks_of(model, chosen)
        vi = fit_auto(model.log_joint, blocks, model.dim, init, rng,
                      seed=int(rng.integers(2**31)), progress=progress,
                      max_iter=options.iterations)  # fmt: skip
        spent = 0
        for restart in range(1, AUTO_RESTARTS + 1):
            if np.isfinite(vi.elbo) or spent + vi.grad_evals >= GRADIENT_BUDGET:
                break
            # a climb that stalled on a cliff of the density (accel_gp --seed 3: finite only
            # within 1e-8 of the point) leaves q nowhere: another of Stan's initial points, as
            # Pathfinder drops a failed path
            spent += vi.grad_evals
            vi = fit_auto(model.log_joint, blocks, model.dim, model.random_init(rng), rng,
                          seed=int(rng.integers(2**31)), progress=progress,
                          max_iter=options.iterations,
                          max_evals=GRADIENT_BUDGET - spent)  # fmt: skip
            vi.grad_evals += spent
            vi.polish["restarts"] = restart
        sharp = vi.polish.get("gaussian_not_gamma", [])
        return Fitted(vi, self, {**chosen, **dict.fromkeys(sharp, GAUSSIAN)})

    def finish(self, result, fitted: Fitted, log_joint, rng, options: FitOptions, refit):
        if fitted.how is self:
            return self._after_road(result, log_joint, rng, options, refit)
        binary = any(lat.binary for lat in result.model.latents)
        if (not binary and not options.families and result.model.dim <= FULL_RANK_MAX_DIM
                and result.diagnostics["khat"] > USABLE):  # fmt: skip
            o = options
            return full_rank_if_better(
                result, refit, iterations=o.iterations, seed=o.seed, draws=o.draws,
                tol_rel_obj=o.tol_rel_obj, eta=o.eta, grad_samples=o.grad_samples,
                elbo_samples=o.elbo_samples, refine_draws=o.refine_draws, progress=o.progress,
            )  # fmt: skip
        return result

    def _after_road(self, result, log_joint, rng, options: FitOptions, refit=None):
        """The road's notes, its richer Gaussians, and the warning of a flat direction."""
        polish = result.vi.polish
        flat = flat_direction(result.model, polish.get("precision"), polish.get("mode"))
        from ppl.inference.family_race import log_scale_notes

        result.notes.extend(log_scale_notes(polish))  # which positive latents are not gamma
        if polish.get("restarts"):
            result.notes.append(
                f"auto: the road from the initial point ended with a non-finite ELBO; "
                f"{polish['restarts']} restart(s) from other initial points (uniform(-2, 2))"
            )
        faults = road_faults(result.model, polish, result.notes)
        polish.setdefault("faults", []).extend(faults)
        if not options.families:
            # a non-centred refit that wins has been through its own road (and escalation)
            noncentred = noncentred_if_better(result, refit, rng, options)
            if noncentred is not result:
                return noncentred
            mixed = result
            if polish.get("second_mode"):  # one Gaussian per mode found, if that is better
                left = GRADIENT_BUDGET - result.vi.grad_evals
                mixed = mixture_if_better(result, log_joint, rng, options, max_evals=left)
            if mixed is not result:  # it covers both modes: that fault is answered
                result, faults = mixed, [f for f in faults if f["how"] != SECOND_MODE]
            else:
                result = richer_if_better(result, log_joint, rng, CANDIDATE,
                                          seed=int(rng.integers(2**31)),
                                          progress=options.progress,
                                          max_evals=GRADIENT_BUDGET - result.vi.grad_evals,
                                          max_iter=options.iterations)  # fmt: skip
        mine = getattr(result.vi, "polish", None)
        if mine is not polish:  # a candidate was kept: the faults found on the way go with it
            if isinstance(mine, dict):
                answered = mine.get("answers", [])
                mine.setdefault("faults", []).extend(f for f in faults if f["how"] not in answered)
            else:
                result.vi.polish = {"faults": list(faults)}
        mode = polish.get("mode") if polish.get("mode_converged") else None
        runaway = ran_away(result.model, result.vi, mode)
        if runaway:
            result.vi.converged = False
            result.vi.polish["faults"].append(runaway)
            result.warnings.append(runaway["detail"])
        if result.vi.grad_evals >= GRADIENT_BUDGET or polish.get("budget_spent"):
            result.vi.converged = False
            result.warnings.append(
                f"the gradient budget of the default road ({GRADIENT_BUDGET} evaluations) ended "
                f"the fit after {result.vi.grad_evals}: q is NOT converged; --method advi or "
                "fullrank with more --iter, or a simpler model, may get further")  # fmt: skip
        if flat:
            result.warnings.append(
                f"the log density is flat at its mode along a combination of {flat}: the "
                "posterior is improper there, or all but (the data and priors do not identify "
                "it), and q's sds in that direction say how far the optimiser went; give these "
                "parameters proper priors")  # fmt: skip
            result.vi.converged = False
        return result

    def method_text(self, result, rows: str) -> str:
        road = result.vi.polish or {}
        sets = " -> ".join(str(r["draws"]) for r in road.get("rounds", []))
        return (f"auto (mode by L-BFGS in {road.get('mode_gradient_evaluations', 0)} gradients, "
                f"then L-BFGS on the ELBO over fixed draws: {sets} draws{rows})")  # fmt: skip

    def ended_by(self, result, met: bool, iterations: int) -> str:
        return fixed_draw_ending(met)


class RoadCandidate(Method):
    """A full-rank Gaussian the road kept over its mean-field fit (ppl.methods.escalation)."""

    name = "auto"
    fitted_as = "fullrank"
    families = FULL_RANK

    def method_text(self, result, rows: str) -> str:
        return result.description + rows

    def ended_by(self, result, met: bool, iterations: int) -> str:
        return fixed_draw_ending(met)


AUTO = Auto()
CANDIDATE = RoadCandidate()


def on_every_row(model, partitions=None, stream=None, checkpoint=None):
    """The driver's model (on a sample of the rows) with the full-data log joint in place of its
    own: the default road then fits the posterior of every row, its passes summed where the
    rows are, Dask partitions on their workers or a --stream file's chunks one at a time, and
    checkpointed per pass (ppl.inference.full_data)."""
    whole = copy.copy(model)
    if partitions is not None:
        from ppl.distributed.gradient import full_data_log_joint

        whole.log_joint = full_data_log_joint(partitions, model, checkpoint)
    else:
        from ppl.inference.full_data import FullDataLogJoint, StreamedRows

        whole.log_joint = FullDataLogJoint(StreamedRows(stream, model), checkpoint)
    return whole


def in_draw_chunks(model):
    """The model with its log joint evaluated in chunks of draws, gradients and Hessian-vector
    products included (ppl.inference.full_data.WholeRows): memory bounded whatever the rows."""
    from ppl.inference.full_data import FullDataLogJoint, WholeRows

    whole = copy.copy(model)
    whole.log_joint = FullDataLogJoint(WholeRows(model.log_joint, model.data_rows))
    return whole


def flat_direction(model, precision, mode) -> str | None:
    """The latents along which the log density does not change at all from its mode (a
    non-identified, improper posterior such as `y ~ normal(a + b, 1)` without priors), or None.
    A direction whose curvature is tiny against the largest is a candidate (unscaled predictors
    or a funnel's end give those too); it is flat if a step of 1000 times the mode's size along
    it leaves the log density unchanged to 1e-9."""
    if precision is None or mode is None or not np.all(np.isfinite(precision)):
        return None
    values, vectors = np.linalg.eigh(precision)
    size = np.abs(values)
    k = int(np.argmin(size))
    if size[k] > FLAT * size.max():
        return None
    point = np.asarray(mode, dtype=float)
    step = 1e3 * (1.0 + np.max(np.abs(point))) * vectors[:, k]
    with np.errstate(all="ignore"):
        lp = np.asarray(model.log_joint(np.stack([point, point + step, point - step])), float)
    if not np.all(np.isfinite(lp)) or np.max(np.abs(lp[1:] - lp[0])) > 1e-9 * (1 + abs(lp[0])):
        return None
    weight = vectors[:, k] ** 2
    names = [lat.name for lat in model.latents
             if weight[lat.offset : lat.offset + lat.size].sum() > 0.05]  # fmt: skip
    return ", ".join(names) or None


def road_faults(model, polish: dict, notes: list[str]) -> list[dict]:
    """What the road found wrong with the mode, as notes and as faults for the verdict
    (ppl.diagnostics.verdict): an unbounded density q ended on, a distinct second mode."""
    faults = []
    suspect, second = polish.get("suspect"), polish.get("second_mode")
    if suspect:
        names = _latents_at(model, suspect["coordinates"])
        compared = polish.get("compared_elbo") or {}
        scores = ", ".join(f"{k} {v:.6g}" for k, v in compared.items())
        if suspect["how"] == "unbounded density":
            what = (
                f"the mode search was still climbing after {polish['mode_iterations']} "
                f"iterations (+{suspect['gain']:.3g} nats in its last "
                f"{suspect['iterations']}) along {', '.join(names)}: the log density grows "
                "without bound there (e.g. a scale going to 0), so the mode is no start"
            )
        else:
            what = (
                f"the mode search did not converge in {polish['mode_iterations']} "
                "iterations, so the mode is a suspect start"
            )
        if polish.get("hopeless"):  # ppl.inference.race
            notes.append(f"auto: {what}; the fits from the mode and from Stan's plain start (the "
                         f"initial point, sd 1) were raced on the same first draws, and the "
                         f"{polish['hopeless'][0]} start's was stopped there, unable to catch "
                         f"the {polish['start']} start's (ELBO {scores})")  # fmt: skip
        else:
            notes.append(f"auto: {what}; the fits from the mode and from Stan's plain start (the "
                         f"initial point, sd 1) were both solved, and the {polish['start']} "
                         f"start had the higher ELBO ({scores})")  # fmt: skip
        if suspect["how"] == "unbounded density" and polish["start"] == "mode":
            faults.append({"parameters": names, "how": "unbounded density",
                           "detail": f"{what}; q was built on that spike, not on the "
                                     "posterior's mass"})  # fmt: skip
    if second:
        names = _latents_at(model, second["coordinates"])
        lp = second["log_density"]
        faults.append({"parameters": names, "how": SECOND_MODE,
                       "detail": f"a second mode search (beyond a valley on the line from the mode "
                                 f"through the antithetic start) ended at a "
                                 f"distinct mode of {', '.join(names)} (log density {lp[1]:.4g} "
                                 f"vs {lp[0]:.4g} at the mode q was built on): q covers one "
                                 "mode only"})  # fmt: skip
        notes.append(f"auto: a second mode of {', '.join(names)} (log density {lp[1]:.4g} vs "
                     f"{lp[0]:.4g}); the first q is built on the higher one")  # fmt: skip
    return faults


def _latents_at(model, coordinates) -> list[str]:
    """The latents holding these unconstrained coordinates, in the model's order."""
    return [lat.name for lat in model.latents
            if any(lat.offset <= j < lat.offset + lat.size for j in coordinates)]  # fmt: skip


#: q's mean this far (unconstrained units) from the mode, and RUNAWAY_SDS of q's sds ...
RUNAWAY = 15.0
RUNAWAY_SDS = 5.0


def ran_away(model, vi, mode) -> dict | None:
    """A fault when q's mean ran off from the mode by more than RUNAWAY unconstrained units and
    RUNAWAY_SDS of q's own sds: the ELBO kept rising as q moved out, the signature of an
    improper posterior (`y ~ cauchy(mu, s)` with flat priors and 2 observations: s = 1.3e14).
    A heavy but proper tail moves q's mean by about its sd (Gamma(0.01, 1.01): log lambda's
    mean is 96 from the mode, with sd 100), not by many; and a mode search that stopped short
    (earnings: an intercept of 5 for a posterior mean of -61,000, sd 9,500) leaves q's mean at
    a higher density than the 'mode', where a runaway q's is lower."""
    if mode is None:
        return None
    try:
        if getattr(vi, "family", None) is not None and hasattr(vi.family, "moments"):
            mean, sd = vi.family.moments(vi.theta)
        else:
            mean, sd = vi.mean, vi.sd
    except (AttributeError, ValueError, TypeError):
        return None
    mean, sd = np.asarray(mean, float), np.asarray(sd, float)
    with np.errstate(all="ignore"):
        off = np.abs(mean - np.asarray(mode, float))
        far = (off > RUNAWAY) & (off > RUNAWAY_SDS * sd)
    names = _latents_at(model, np.flatnonzero(far))
    if not names:
        return None
    with np.errstate(all="ignore"):  # q went out to lower density (not to a mode L-BFGS missed)
        lp = np.asarray(model.log_joint(np.stack([np.asarray(mode, float), mean])), float)
    if not (np.isfinite(lp[0]) and lp[1] < lp[0] - 1.0):
        return None
    return {"parameters": names, "how": "improper posterior",
            "detail": f"q's mean of {', '.join(names)} ran {float(off[far].max()):.3g} units "
                      "(unconstrained scale) from the mode, the ELBO still rising as it moved "
                      "out: the posterior is probably improper there; give these parameters "
                      "proper priors. q is NOT converged"}  # fmt: skip
