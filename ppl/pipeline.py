"""The fit: a compiled model's latents by the chosen method (ppl.methods: one module per
--method, behind one table), its options checked once, q's draws checked by PSIS."""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from ppl.diagnostics.trust import check_result, refuse_improper
from ppl.diagnostics.verdict import judge
from ppl.errors import ModelError
from ppl.families.choice import choose_families
from ppl.limits import check_values
from ppl.methods import DEFAULTS, METHODS, FitOptions, Method, method_named, reparam
from ppl.methods.result import FitResult, make_result
from ppl.progress import start_phase
from ppl.runtime.compiler import CompiledModel

#: Options of one method only (FitOptions' names), by their command-line flags.
METHOD_OPTIONS = {"rank": "--rank", "dof": "--student-t", "schedule": "--schedule"}


def fit(model: CompiledModel, method: str = DEFAULTS["method"], **options) -> FitResult:
    """Fit the model's latents with the method `--method method` names; return constrained
    posterior draws. `options` are ppl.methods.base.FitOptions' fields:

    `rank` (full | diag), `dof` (a Student-t standard distribution) and `schedule` are DSVI's;
    so is `stream` (from build_streamed: minibatches from a file read in chunks). `monitor` sees
    q's unconstrained mean at every ELBO evaluation (ADVI and DSVI). `checkpoint`
    (ppl.inference.checkpoint.Checkpointer) saves and resumes the stochastic loops of every
    method, and the passes of auto's default road over Dask partitions or --stream chunks (not
    its in-memory road, which has none). `stream`: `auto` sums every row of the file, a chunk at
    a time. `partitions` (from build_distributed): the rows on Dask workers; `auto` sums every
    row there (its deterministic road on the full-data log joint), `dsvi` draws minibatches
    there.
    """
    how = method_named(method)
    o = FitOptions(**options)
    check_options(model, how, o)
    model = how.prepare(reparam.prepared(model, o), o)
    chosen = choose_families(model, how.families, o.families)
    start = time.perf_counter()
    rng = np.random.default_rng(o.seed)
    init = model.random_init(rng) if o.init is None else np.array(o.init, dtype=float)
    fitted = how.fit(model, chosen, init, rng, o)
    seconds = time.perf_counter() - start
    if o.checkpoint is not None:
        seconds += o.checkpoint.elapsed_before  # before the interruption
    log_joint = fitted.log_joint
    if log_joint is None:
        binary = any(lat.binary for lat in model.latents)
        log_joint = partial(model.log_joint, binary=binary)
    start_phase(o.progress, f"PSIS check of q's {o.draws} draws", "ELBO")
    result = make_result(model, fitted.vi, fitted.how, fitted.chosen, log_joint, rng,
                         draws=o.draws, seed=o.seed, seconds=seconds,
                         refinement=fitted.refinement, elbo_rows=fitted.elbo_rows)  # fmt: skip
    result = how.finish(result, fitted, log_joint, rng, o, fit)
    exact = getattr(result.how, "exact_scalars", None)  # summaries not from draws
    if exact is not None:
        result.diagnostics["not_from_draws"] = exact(result)
    judge(result, log_joint, rng)  # after every method's afterthoughts (ppl.diagnostics.verdict)
    result.iteration_cap = o.iterations
    # what draws.csv's CmdStan configuration lines say (ppl.outputs.cmdstan_config)
    result.fit_settings = {"tol_rel_obj": o.tol_rel_obj, "elbo_samples": o.elbo_samples}
    return result


def check_options(model: CompiledModel, how: Method, o: FitOptions) -> None:
    """Refuse a model or options the method cannot fit, with the reason (a ModelError)."""
    binary = [lat.name for lat in model.latents if lat.binary]
    if binary and not how.takes_binary:
        raise ModelError(
            f"parameter(s) {', '.join(binary)} are binary (int<lower=0, upper=1>); "
            f"method '{how.name}' needs continuous latents. Use --method bbvi (or auto), whose "
            "score-function gradients need no derivatives."
        )
    if model.dim == 0:
        raise ModelError("the model has no parameters to fit")
    check_values(f"--draws {o.draws} of {model.dim} parameters", float(o.draws) * model.dim)
    if o.grad_samples is not None:
        check_values(f"--grad-samples {o.grad_samples} of {model.dim} parameters",
                     float(o.grad_samples) * model.dim)  # fmt: skip
    refuse_improper(model)
    how.check_model(model)
    hyper = [lat for lat in model.latents if lat.hyper]
    if hyper and not how.takes_hyper:
        raise ModelError(
            f"hyperparameter(s) {', '.join(lat.name for lat in hyper)}: point estimates that "
            "maximise the ELBO (type-II ML) are fitted by --method dsvi only"
        )
    if hyper and len(hyper) == len(model.latents):
        raise ModelError("the model has only hyperparameters; declare its latents in parameters")
    if o.batch is not None and not how.takes_batch:
        takers = " or ".join(m.name for m in METHODS.values() if m.takes_batch)
        raise ModelError(f"--batch (data subsampling) works with --method {takers} only")
    for flag, given in (("--stream", o.stream), ("--engine dask", o.partitions)):
        check_rows_elsewhere(how, flag, given is not None, batch=o.batch, optimizer=o.optimizer,
                             refine_draws=o.refine_draws)  # fmt: skip
    given = [flag for name, flag in METHOD_OPTIONS.items()
             if getattr(o, name) is not None and name not in how.own_options]  # fmt: skip
    if given:
        raise ModelError(f"{', '.join(given)}: DSVI's option(s); use them with --method dsvi")
    how.check_options(model, o)


def check_rows_elsewhere(how: Method, flag: str, given: bool, *, batch: int | None,
                         optimizer: str | None, refine_draws: int) -> None:  # fmt: skip
    """`flag` (--stream, --engine dask: rows not in memory) only where the method can read its
    rows there; the CLI calls it before reading the data."""
    if given and not how.rows_elsewhere(batch=batch, optimizer=optimizer,
                                        refine_draws=refine_draws):  # fmt: skip
        raise ModelError(f"{flag} fits by the default road on every row (--method auto) or by "
                         "DSVI's minibatches (--method dsvi --batch B)")  # fmt: skip


def check_finite_result(result: FitResult) -> None:
    """Before a fit is reported: refused when it produced nothing usable, marked NOT converged
    when its own numbers contradict convergence (ppl.diagnostics.trust)."""
    check_result(result)
