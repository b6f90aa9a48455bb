"""The fit: a compiled model's latents by the chosen method (families from
ppl.families.choice, the algorithms from ppl.inference), checked by PSIS, as constrained draws."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from ppl.data.build import ELBO_ROWS
from ppl.diagnostics.psis import GOOD, USABLE, check_fit
from ppl.diagnostics.trust import check_result, refuse_improper
from ppl.errors import FitError, ModelError, PplError
from ppl.families.choice import choose_families, family_of
from ppl.families.composite import MixedFamily, blocks_of
from ppl.inference.result import VIResult
from ppl.limits import check_values
from ppl.progress import start_phase
from ppl.runtime.compiler import CompiledModel


def elbo_sample_rows(batch: int) -> int:
    """Rows in the fixed sample the ELBO is estimated on under `--batch batch`."""
    return max(ELBO_ROWS, 2 * batch)


#: Curvature at the mode under this fraction of the largest makes a direction a candidate for
#: a flat, improper one (checked by stepping along it: _flat_direction).
FLAT = 1e-8

#: Data rows from which the default road evaluates the log joint in chunks of draws, gradients
#: included (ppl.inference.full_data.WholeRows), to bound its memory.
MANY_ROWS = 50_000

#: `auto` tries a full-rank Gaussian when k-hat > 0.7 up to this many unconstrained parameters.
FULL_RANK_MAX_DIM = 100
#: Fits from new initial points when `auto`'s road ends with a non-finite ELBO.
AUTO_RESTARTS = 3

#: ... and a low-rank-plus-diagonal one above that, up to this many (its result is kept as a
#: dense Cholesky factor for the draws and the PSIS check).
LOW_RANK_MAX_DIM = 1000

METHODS = {
    "auto": "sgvb",
    "advi": "meanfield",
    "meanfield": "meanfield",
    "fullrank": "fullrank",
    "bbvi": "bbvi",
    "dsvi": "dsvi",
}


@dataclass
class FitResult:
    model: CompiledModel
    method: str
    vi: VIResult
    draws: dict[str, np.ndarray]  # name -> (n_draws, *shape) constrained values
    seed: int
    seconds: float
    families: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    refinement: dict | None = None
    elbo_rows: tuple[int, int] | None = None  # (rows, of N) when the ELBO is on a sample of rows
    diagnostics: dict = field(default_factory=dict)  # PSIS k-hat and more (ppl.diagnostics.psis)
    notes: list[str] = field(default_factory=list)  # what `auto` decided, for the user
    description: str | None = None  # how q was made, when the method's name does not say
    doubts: list[str] = field(default_factory=list)  # why a fit is not converged
    # (ppl.diagnostics.trust)
    rule_met: bool | None = None  # the method's own verdict, before ppl.diagnostics.trust's doubts


def fit(
    model: CompiledModel,
    method: str = "advi",
    *,
    iterations: int = 10000,
    seed: int = 0,
    draws: int = 1000,
    tol_rel_obj: float = 0.01,
    eta: float | None = None,
    grad_samples: int | None = None,
    elbo_samples: int = 100,
    refine_draws: int = 64,
    families: dict[str, str] | None = None,
    optimizer: str | None = None,
    estimator: str = "rb+cv",
    batch: int | None = None,
    rank: str | None = None,
    dof: float | None = None,
    schedule: str | None = None,
    stream=None,
    progress: Callable[[int, float | None], None] | None = None,
    monitor: Callable[[int, np.ndarray], None] | None = None,
    checkpoint=None,
    partitions=None,
) -> FitResult:
    """Fit the model's latents with the chosen method; return constrained posterior draws.

    `rank` (full | diag), `dof` (a Student-t standard distribution) and `schedule` are DSVI's;
    so is `stream` (from build_streamed: minibatches from a file read in chunks). `monitor` sees
    q's unconstrained mean at every ELBO evaluation (ADVI and DSVI). `checkpoint`
    (ppl.inference.checkpoint.Checkpointer) saves and resumes the stochastic loops of every method,
    and the
    passes of auto's default road over Dask partitions or --stream chunks (not its in-memory
    road, which has none). `stream`: `auto` sums every row of the file, a chunk at a time.
    `partitions` (from build_distributed): the rows on Dask workers; `auto` sums every row there
    (its deterministic road on the full-data log joint), `dsvi` draws minibatches there.
    """
    if method not in METHODS:
        raise ModelError(f"unknown method '{method}'; choose one of {', '.join(METHODS)}")
    binary = [lat.name for lat in model.latents if lat.binary]
    if binary and method not in ("bbvi", "auto"):
        raise ModelError(
            f"parameter(s) {', '.join(binary)} are binary (int<lower=0, upper=1>); "
            f"method '{method}' needs continuous latents. Use --method bbvi (or auto), whose "
            "score-function gradients need no derivatives."
        )
    if model.dim == 0:
        raise ModelError("the model has no parameters to fit")
    check_values(f"--draws {draws} of {model.dim} parameters", float(draws) * model.dim)
    if grad_samples is not None:
        check_values(f"--grad-samples {grad_samples} of {model.dim} parameters",
                     float(grad_samples) * model.dim)  # fmt: skip
    refuse_improper(model)
    if method == "fullrank":
        check_values(f"a full-rank covariance of {model.dim} parameters", float(model.dim) ** 2)
    hyper = [lat for lat in model.latents if lat.hyper]
    if hyper and method != "dsvi":
        raise ModelError(
            f"hyperparameter(s) {', '.join(lat.name for lat in hyper)}: point estimates that "
            "maximise the ELBO (type-II ML) are fitted by --method dsvi only"
        )
    if hyper and len(hyper) == len(model.latents):
        raise ModelError("the model has only hyperparameters; declare its latents in parameters")
    if batch is not None and method not in ("bbvi", "dsvi"):
        raise ModelError("--batch (data subsampling) works with --method bbvi or dsvi only")
    every_row = method == "auto" and batch is None and optimizer is None and refine_draws > 0
    if stream is not None and not (method == "dsvi" and batch is not None) and not every_row:
        raise ModelError("--stream fits by the default road on every row (--method auto) or by "
                         "DSVI's minibatches (--method dsvi --batch B)")  # fmt: skip
    if (
        partitions is not None
        and not (method == "dsvi" and batch is not None)
        and not every_row
    ):
        raise ModelError("--engine dask fits by the default road on every row (--method auto) "
                         "or by DSVI's minibatches (--method dsvi --batch B)")  # fmt: skip
    dsvi_options = {"rank": rank, "dof": dof, "schedule": schedule}
    given = [f"--{k.replace('dof', 'student-t')}" for k, v in dsvi_options.items() if v is not None]
    if given and method != "dsvi":
        raise ModelError(f"{', '.join(given)}: DSVI's option(s); use them with --method dsvi")
    deterministic = method == "auto" and optimizer is None and refine_draws > 0 and not binary
    if checkpoint is not None and deterministic and partitions is None and stream is None:
        raise ModelError(
            "--checkpoint/--resume: method 'auto' takes its deterministic road here, which has no "
            "stochastic loop to checkpoint; checkpoints work with --method advi, fullrank, bbvi "
            "or dsvi, or auto with --optimizer or --no-polish"
        )
    if (partitions is not None or stream is not None) and method == "auto":
        model = _on_every_row(model, partitions, stream, checkpoint)
    elif deterministic and model.data_rows >= MANY_ROWS:
        model = _in_draw_chunks(model)
    chosen = choose_families(model, method, families)
    vi_method = METHODS[method]
    start = time.perf_counter()
    rng = np.random.default_rng(seed)
    init = model.random_init(rng)
    refine_info = elbo_rows = None
    if vi_method == "bbvi":
        vi = _fit_bbvi(
            model, chosen, init, rng, max_iter=iterations, tol_rel_obj=tol_rel_obj,
            eta=eta, grad_samples=grad_samples or 100, estimator=estimator,
            optimizer=optimizer or "stan", progress=progress, batch=batch, checkpoint=checkpoint,
        )  # fmt: skip
    elif vi_method == "dsvi":
        from ppl.inference.dsvi import closed_forms, fit_dsvi
        from ppl.inference.subsample import (
            Batches,
            StreamBatches,
            SubsampledLogJoint,
            sample_log_joint,
        )

        kwargs = {} if grad_samples is None else {"grad_samples": grad_samples}
        log_joint, minibatch = model.log_joint, None
        if partitions is not None:
            from ppl.distributed.gradient import DistributedLogJoint

            batches = Batches(model, batch, rng, rows=partitions.rows)
            minibatch = DistributedLogJoint(partitions, model, batch, int(rng.integers(2**63)))
            if checkpoint is not None:
                checkpoint.extras["minibatches"] = minibatch
        elif batch is not None:
            batches = (Batches(model, batch, rng) if stream is None
                       else StreamBatches(model, batch, rng, stream))  # fmt: skip
            minibatch = SubsampledLogJoint(batches)
            if checkpoint is not None:
                checkpoint.extras["batches"] = batches
        if batch is not None:
            log_joint, used = sample_log_joint(model, batches, elbo_sample_rows(batch), rng)
            if used < batches.N:
                elbo_rows = (used, batches.N)
        vi = fit_dsvi(
            log_joint, model.dim, rank=rank or "full", dof=dof,
            schedule=schedule or "adaptive", eta=eta, grad_log_joint=minibatch,
            point=[i for lat in hyper for i in range(lat.offset, lat.offset + lat.size)],
            closed=closed_forms(model),
            max_iter=iterations, tol_rel_obj=tol_rel_obj, elbo_samples=elbo_samples, init=init,
            seed=int(rng.integers(2**31)), progress=progress, monitor=monitor,
            checkpoint=checkpoint, **kwargs,
        )  # fmt: skip
    elif binary:
        vi = _fit_mixed(
            model, chosen, init, rng, max_iter=iterations, tol_rel_obj=tol_rel_obj, eta=eta,
            grad_samples=grad_samples or 100, optimizer=optimizer or "stan", progress=progress,
            checkpoint=checkpoint,
        )  # fmt: skip
        vi_method = "mixed"
    elif deterministic:
        from ppl.inference.auto import fit_auto

        blocks = blocks_of(model, chosen)
        vi = fit_auto(model.log_joint, blocks, model.dim, init, rng,
                      seed=int(rng.integers(2**31)), progress=progress)  # fmt: skip
        spent = 0
        for restart in range(1, AUTO_RESTARTS + 1):
            if np.isfinite(vi.elbo):
                break
            # a climb that stalled on a cliff of the density (accel_gp --seed 3: finite only
            # within 1e-8 of the point) leaves q nowhere: another of Stan's initial points, as
            # Pathfinder drops a failed path
            spent += vi.grad_evals
            vi = fit_auto(model.log_joint, blocks, model.dim, model.random_init(rng), rng,
                          seed=int(rng.integers(2**31)), progress=progress)  # fmt: skip
            vi.grad_evals += spent
            vi.polish["restarts"] = restart
        vi_method = "auto"
        sharp = vi.polish.get("gaussian_not_gamma", [])
        chosen = {**chosen, **dict.fromkeys(sharp, "gaussian")}
    elif "gamma" in chosen.values():
        vi, refine_info = _fit_sgvb(
            model, chosen, init, rng, max_iter=iterations, tol_rel_obj=tol_rel_obj,
            grad_samples=grad_samples or 10, elbo_samples=elbo_samples, optimizer=optimizer,
            polish_fit=refine_draws > 0, progress=progress, checkpoint=checkpoint,
        )  # fmt: skip
        vi_method = "sgvb"
    else:
        from ppl.inference.advi import fit_advi
        from ppl.inference.refine import polish

        kwargs = {} if grad_samples is None else {"grad_samples": grad_samples}
        vi = fit_advi(
            model.log_joint,
            model.dim,
            method="meanfield" if vi_method == "sgvb" else vi_method,
            max_iter=iterations,
            tol_rel_obj=tol_rel_obj,
            eta=eta,
            elbo_samples=elbo_samples,
            init=init,
            seed=int(rng.integers(2**31)),
            progress=progress,
            monitor=monitor,
            checkpoint=checkpoint,
            **kwargs,
        )
        if vi_method == "sgvb":
            vi_method = "meanfield"
        if refine_draws > 0:
            vi, refine_info = polish(
                model.log_joint, vi, init, draws=refine_draws, seed=int(rng.integers(2**31))
            )
    seconds = time.perf_counter() - start
    if checkpoint is not None:
        seconds += checkpoint.elapsed_before  # before the interruption
    if vi_method == "dsvi":
        chosen = {lat.name: "point estimate (type-II ML)" if lat.hyper else f"{vi.label} (DSVI)"
                  for lat in model.latents}  # fmt: skip
    if vi_method != "dsvi" or batch is None:
        log_joint = partial(model.log_joint, binary=bool(binary))
    start_phase(progress, f"PSIS check of q's {draws} draws", "ELBO")
    result = _result(model, vi, vi_method, chosen, log_joint, rng, draws=draws, seed=seed,
                     seconds=seconds, refinement=refine_info, elbo_rows=elbo_rows)  # fmt: skip
    polish = vi.polish if vi_method == "auto" else {}
    flat = _flat_direction(model, polish.get("precision"), polish.get("mode"))
    if vi_method == "auto" and vi.polish.get("gaussian_not_gamma"):
        result.notes.append(
            f"auto: {', '.join(vi.polish['gaussian_not_gamma'])}: a Gaussian on the log scale, not "
            "a gamma: the posterior at the mode is too concentrated for the gamma family (a "
            "shape beyond 2.5e7)")  # fmt: skip
    if vi_method == "auto" and vi.polish.get("restarts"):
        result.notes.append(
            f"auto: the road from the initial point ended with a non-finite ELBO; "
            f"{vi.polish['restarts']} restart(s) from other initial points (uniform(-2, 2))")
    if vi_method == "auto" and not families:
        result = _richer_if_better(result, log_joint, rng, seed=int(rng.integers(2**31)),
                                   progress=progress)  # fmt: skip
        if flat:
            result.warnings.append(
                f"the log density is flat at its mode along a combination of {flat}: the "
                "posterior is improper there, or all but (the data and priors do not identify "
                "it), and q's sds in that direction say how far the optimiser went; give these "
                "parameters proper priors")  # fmt: skip
            result.vi.converged = False
        return result
    if (
        method == "auto"
        and not binary
        and not families
        and model.dim <= FULL_RANK_MAX_DIM
        and result.diagnostics["khat"] > USABLE
    ):
        return _full_rank_if_better(result, iterations=iterations, seed=seed, draws=draws,
                                    tol_rel_obj=tol_rel_obj, eta=eta, grad_samples=grad_samples,
                                    elbo_samples=elbo_samples, refine_draws=refine_draws,
                                    progress=progress)  # fmt: skip
    return result


def _on_every_row(model: CompiledModel, partitions=None, stream=None,
                  checkpoint=None) -> CompiledModel:  # fmt: skip
    """The driver's model (on a sample of the rows) with the full-data log joint in place of its
    own: the default road then fits the posterior of every row, its passes summed where the
    rows are, Dask partitions on their workers or a --stream file's chunks one at a time, and
    checkpointed per pass (ppl.inference.full_data)."""
    import copy

    whole = copy.copy(model)
    if partitions is not None:
        from ppl.distributed.gradient import full_data_log_joint

        whole.log_joint = full_data_log_joint(partitions, model, checkpoint)
    else:
        from ppl.inference.full_data import FullDataLogJoint, StreamedRows

        whole.log_joint = FullDataLogJoint(StreamedRows(stream, model), checkpoint)
    return whole


def _flat_direction(model: CompiledModel, precision, mode) -> str | None:
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


def _in_draw_chunks(model: CompiledModel) -> CompiledModel:
    """The model with its log joint evaluated in chunks of draws, gradients and Hessian-vector
    products included (ppl.inference.full_data.WholeRows): memory bounded whatever the rows."""
    import copy

    from ppl.inference.full_data import FullDataLogJoint, WholeRows

    whole = copy.copy(model)
    whole.log_joint = FullDataLogJoint(WholeRows(model.log_joint, model.data_rows))
    return whole


def _checked(vi, log_joint, rng, draws: int):
    """Draws of q on the unconstrained scale and their PSIS check against `log_joint`."""
    zeta = vi.sample(rng, draws)
    diagnostics = check_fit(log_joint, vi.log_q, zeta)
    diagnostics["ended_by"] = "stopping rule" if vi.converged else "iteration cap"
    return zeta, diagnostics


def _result(model, vi, vi_method, chosen, log_joint, rng, *, draws, seed, seconds, refinement=None,
            elbo_rows=None, checked=None) -> FitResult:  # fmt: skip
    """Draws from q, constrained; PSIS k-hat against `log_joint` (or `checked`, from
    _checked); labels: the fit's result."""
    start = time.perf_counter()
    zeta, diagnostics = checked or _checked(vi, log_joint, rng, draws)
    values = model.constrained_draws(zeta, rng)
    for name, arr in values.items():
        symbol = model.checked.symbols.get(name)
        declared_int = symbol is not None and symbol.stype.base == "int"
        if declared_int and arr.dtype.kind == "f" and np.isfinite(arr).all():
            values[name] = arr = arr.astype(np.int64)  # integers in the output, as declared
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr)):
            bad = int(np.sum(~np.isfinite(arr).reshape(arr.shape[0], -1).all(axis=1)))
            vi.warnings.append(f"{bad} of {draws} draws of '{name}' are not finite")
    if diagnostics["khat"] > USABLE:
        vi.warnings.append(
            f"PSIS k-hat = {diagnostics['khat']:.2f} > {USABLE}: the importance ratios "
            "p / q of q's draws have heavy tails, so q is not a reliable approximation of the "
            "posterior (Yao et al. 2018). Try a richer family (--method fullrank or dsvi), more "
            "iterations or a smaller --tol-rel-obj, and compare."
        )
    rejected = int(np.sum(np.isneginf(diagnostics["log_p"])))
    if rejected and model.last_rejection is not None:
        vi.warnings.append(
            f"{rejected} of {len(diagnostics['log_p'])} draws of q were rejected by reject() "
            f"(density zero there; a Gaussian q cannot keep out of a region the model "
            f"rejects), e.g. \"{model.last_rejection.splitlines()[0][:300]}\""
        )
    labels = {lat.name: family_of(lat, vi_method, chosen[lat.name]) for lat in model.latents}
    seconds += time.perf_counter() - start
    return FitResult(model, vi_method, vi, values, seed, seconds, labels, list(vi.warnings),
                     refinement, elbo_rows, diagnostics)  # fmt: skip


def _richer_if_better(first: FitResult, log_joint, rng, *, seed: int,
                      progress=None) -> FitResult:  # fmt: skip
    """The deterministic road's covariances beyond mean-field. Where k-hat is not good (> 0.5;
    k-hat near 0.7 is too noisy a line between keeping a mean-field q and correcting it):
    D <= FULL_RANK_MAX_DIM, a full-rank Gaussian on a fixed-draw ELBO from the better of the
    Laplace approximation and the mean-field fit (ppl.inference.auto.richer), and when that is
    kept nothing more (its family holds the rest); larger D, after the linear-response
    covariance, a low-rank-plus-diagonal Gaussian started along its leading directions
    (ppl.inference.auto.low_rank), unless that covariance was kept with k-hat <= 0.7 (on the
    104-parameter varying intercepts the low-rank one then had an ELBO 0.1 nats higher but k-hat
    0.90 and one sd 0.76 of NUTS's, for three times the gradients). Where k-hat is not good,
    the linear-response covariance (ppl.inference.auto.linear_response; it keeps the mean-field
    means, which are off where the posterior is skewed, and corrects the sds mean-field
    shrinks). A good k-hat ends the road at the mean-field fit: on the posteriordb posteriors the
    linear-response covariance of such a fit never beat it by more than 0.05 nats (arma11: +0.04
    nats, its k-hat 0.41 -> 0.77; eight schools: 1.5 nats worse), for a fifth of eight schools'
    fit time.
    Each candidate is kept when its ELBO on its own output draws is higher than the best so
    far (all on the same unconstrained space: comparable)."""
    from ppl.inference.auto import linear_response, low_rank, richer
    from ppl.inference.checkpoint import Interrupted

    model = first.model
    gaussian = {lat.name: "gaussian" for lat in model.latents}
    draws = len(next(iter(first.draws.values())))
    best, spent, tried = first, 0, []
    made: dict[str, VIResult] = {}
    if not first.diagnostics["khat"] > GOOD:
        return first
    steps = [(LINEAR_RESPONSE, lambda: linear_response(model.log_joint, first.vi, seed=seed))]
    if model.dim <= FULL_RANK_MAX_DIM:
        steps.insert(0, (FULL_RANK, lambda: richer(model.log_joint, first.vi, seed=seed)))
    elif model.dim <= LOW_RANK_MAX_DIM:

        def factored():
            lr = made.get(LINEAR_RESPONSE)
            covariance = None if lr is None else lr.cov
            return low_rank(model.log_joint, first.vi, seed=seed, covariance=covariance)

        steps.append((LOW_RANK, factored))
    for name, make in steps:
        if FULL_RANK in made and best.vi is made[FULL_RANK]:
            break  # a full-rank Gaussian was kept: its family holds the linear-response one
        if name == LOW_RANK and best is not first and best.diagnostics["khat"] <= USABLE:
            break  # the linear-response covariance made q usable
        start = time.perf_counter()
        start_phase(progress, f"a {name}, and its PSIS check")
        try:
            with np.errstate(all="ignore"):
                q = make()
        except Interrupted:
            raise  # a signal during a candidate's pass (--engine dask checkpoints per pass)
        except (PplError, ArithmeticError, ValueError, np.linalg.LinAlgError) as e:
            lost = getattr(e, "grad_evals", 0)  # ppl.inference.auto.CandidateFailed
            spent += lost
            after = f" after {lost} gradient evaluations" if lost else ""
            tried.append(f"a {name} failed{after} ({str(e).splitlines()[0][:200]})")
            continue
        if q is None:
            continue
        made[name] = q
        spent += q.grad_evals
        checked = _checked(q, log_joint, rng, draws)  # constrained draws only if it is kept
        mine, theirs = best.diagnostics.get("elbo"), checked[1].get("elbo")
        verdict = f"ELBO {_elbo_text(theirs)} vs {_elbo_text(mine)}, k-hat " \
                  f"{checked[1]['khat']:.2f}"  # fmt: skip
        # the full-rank family contains every earlier candidate: an ELBO within Monte Carlo
        # error of theirs is a tie, and its optimum's means are the Gaussian family's own
        errors = [d.get("elbo_mcse") or 0.0 for d in (best.diagnostics, checked[1])]
        slack = 2 * min(errors) if name == FULL_RANK else -1e-6  # not for a rounding error
        if theirs is not None and (mine is None or theirs > mine - slack):
            tried.append(f"a {name} ({q.grad_evals} gradient evaluations) was kept: {verdict}")
            # elbo.csv: the first fit's trace, then the candidate's after it
            last = first.vi.elbo_trace[-1][0] if first.vi.elbo_trace else 0
            q.elbo_trace = list(first.vi.elbo_trace) + [
                (last + 1 + i, e) for i, e in (q.elbo_trace or [(0, theirs)])
            ]
            best = _result(model, q, "fullrank", gaussian, log_joint, rng, draws=draws,
                           seed=first.seed, seconds=time.perf_counter() - start + best.seconds,
                           refinement=first.refinement, checked=checked)  # fmt: skip
            best.description = f"auto, then a {name} ({DESCRIPTIONS[name]})"
        else:
            tried.append(f"a {name} ({q.grad_evals} gradient evaluations) was not better: "
                         f"{verdict}")  # fmt: skip
            best.seconds += time.perf_counter() - start
    if best is not first:
        best.notes[:0] = first.notes  # what was decided before the candidates
    if tried:
        best.vi.grad_evals = first.vi.grad_evals + spent
        if best is not first:
            best.vi.iterations = first.vi.iterations + best.vi.iterations
        k = first.diagnostics["khat"]
        best.notes.append(f"auto: the mean-field fit had PSIS k-hat {k:.2f} > {GOOD}; "
                          + "; ".join(tried))  # fmt: skip
    return best


FULL_RANK = "full-rank Gaussian"
LOW_RANK = "low-rank-plus-diagonal Gaussian"
LINEAR_RESPONSE = "linear-response covariance"
DESCRIPTIONS = {
    LINEAR_RESPONSE: "the mean-field fit's means with J H^-1 J' as covariance",
    FULL_RANK: "L-BFGS on the ELBO over fixed draws",
    LOW_RANK: "L-BFGS on the ELBO over fixed draws",
}


def _elbo_text(value) -> str:
    return "non-finite" if value is None else f"{value:.6g}"


def _full_rank_if_better(first: FitResult, **options) -> FitResult:
    """`auto`'s answer to a k-hat above 0.7: mean-field families miss the posterior's
    correlations, so fit a full-rank Gaussian too and keep whichever has the higher ELBO (both
    on the same unconstrained space, estimated on their 1000 output draws: comparable)."""
    try:
        second = fit(first.model, "fullrank", **options)
    except PplError as e:
        first.notes.append(
            f"auto: PSIS k-hat {first.diagnostics['khat']:.2f} > {USABLE}; a full-rank Gaussian "
            f"fit was tried too and failed ({str(e).splitlines()[0][:200]}); kept the first fit"
        )
        return first
    mine, theirs = first.diagnostics.get("elbo"), second.diagnostics.get("elbo")
    k1, k2 = first.diagnostics["khat"], second.diagnostics["khat"]
    first_elbo, second_elbo = _elbo_text(mine), _elbo_text(theirs)
    if theirs is not None and (mine is None or theirs > mine):
        second.notes.append(
            f"auto: the {first.method} fit had PSIS k-hat {k1:.2f} > {USABLE}, so a full-rank "
            f"Gaussian was fitted too and kept: ELBO {theirs:.6g} vs {first_elbo}, k-hat {k2:.2f}"
        )
        second.seconds += first.seconds
        return second
    first.notes.append(
        f"auto: a full-rank Gaussian was fitted too (PSIS k-hat {k1:.2f} > {USABLE}) but its "
        f"ELBO was not higher ({second_elbo} vs {first_elbo}); kept the first fit"
    )
    first.seconds += second.seconds
    return first


def _fit_sgvb(model, chosen, init, rng, *, polish_fit, optimizer, progress, checkpoint,
              **options):  # fmt: skip
    """Gamma SGVB warm-started from mean-field ADVI (moment-matched), then refined.

    ADVI with its deterministic polish puts every latent near its optimum on the log scale; the
    gamma blocks start from the gamma with the same mean and variance of log x, and L-BFGS on the
    fixed-draw ELBO moves them from a lognormal-shaped to a gamma-shaped fit. A stochastic SGVB
    phase runs in between when an optimiser is named, and replaces the L-BFGS refinement when
    the polish is off (``refine_draws=0``). A warm start that failed, fell back to its own start,
    or led the gamma fit to a non-finite ELBO is dropped, with a warning, for a cold start.
    """
    from ppl.inference.advi import fit_advi
    from ppl.inference.refine import polish
    from ppl.inference.sgvb import fit_sgvb, refine_warm_start

    advi_options = {k: options[k] for k in ("tol_rel_obj", "elbo_samples") if k in options}
    family = MixedFamily(blocks_of(model, chosen), model.dim)
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

    def gamma_phase(theta0, optimizer):
        result = None
        if optimizer is not None or not polish_fit:
            result = fit_sgvb(
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
            result = refine_warm_start(
                model.log_joint, family, start, seed=int(rng.integers(2**31))
            )
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
    info = result.polish
    if info is not None:
        info = {
            "used": info["used"],
            "stages": [{"family": "mixed", "iterations": info["iterations"]}],
            "elbo_advi": info.get("elbo_before", float("nan")),
            "elbo_polished": info.get("elbo_after", float("nan")),
            "gradient_evaluations": info["gradient_evaluations"],
            "draws": info["draws"],
            "warm_start": "none (ADVI failed)"
            if warm is None
            else "mean-field ADVI, moment-matched to gamma",
        }
    return result, info


def _fit_bbvi(model, chosen, init, rng, *, batch, estimator, grad_samples, **options):
    """Score-function BBVI over every latent, Rao-Blackwellised by the graph IR's blankets.

    Gamma blocks start from a Gaussian fit, moment-matched (see _fit_mixed); `batch` subsamples
    the data rows (ppl.inference.subsample).
    """
    from ppl.inference.bbvi import ScoreObjective, chain, fit_stochastic
    from ppl.inference.estimators import log_joint_terms

    gaussian = {name: ("gaussian" if fam == "gamma" else fam) for name, fam in chosen.items()}
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
    result = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
    if gaussian != chosen:
        gamma = MixedFamily(blocks_of(model, chosen), model.dim)
        theta0 = gamma.moved_from(family, result.theta)
        if batch:
            objective = SubsampledScoreObjective(gamma, objective.batches, grad_samples, theta0,
                                                 like=objective)  # fmt: skip
        else:
            objective = ScoreObjective(gamma, objective.terms, estimator, grad_samples)
        second = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
        result = chain(result, second)
    result.estimator = estimator
    result.grad_samples = grad_samples
    result.grad_evals = result.iterations * grad_samples
    return result


def _fit_mixed(model, chosen, init, rng, *, grad_samples, **options):
    """Binary latents by score-function gradients, the rest pathwise, in one optimisation."""
    from ppl.inference.bbvi import chain, fit_stochastic
    from ppl.inference.mixed import setup_mixed, with_families

    # Gaussian continuous families first; gamma blocks are moment-matched from them afterwards
    # (as `auto` does for continuous models), then the joint optimisation continues
    gaussian = {name: ("gaussian" if fam == "gamma" else fam) for name, fam in chosen.items()}
    objective, theta0 = setup_mixed(model, gaussian, init, rng, grad_samples)
    result = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
    if gaussian != chosen:
        objective, theta0 = with_families(objective, result.theta, chosen)
        second = fit_stochastic(objective, theta0, seed=int(rng.integers(2**31)), **options)
        result = chain(result, second)
    result.grad_samples = grad_samples
    result.grad_evals = result.iterations * grad_samples
    return result


def check_finite_result(result: FitResult) -> None:
    """Before a fit is reported: refused when it produced nothing usable, marked NOT converged
    when its own numbers contradict convergence (ppl.diagnostics.trust)."""
    check_result(result)
