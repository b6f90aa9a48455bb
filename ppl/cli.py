"""The `ppl` command: fit, ir, check. User mistakes print a message and exit 2, no traceback."""

from __future__ import annotations

import signal
import sys

#: A Ctrl-C while the command starts (its imports take half a second) is noted here, not a
#: traceback; main() then exits 130. Python's own handler is back once the module is loaded.
_EARLY_INTERRUPT: list[int] = []


def _early_interrupt(signum, frame) -> None:
    _EARLY_INTERRUPT.append(signum)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    try:
        signal.signal(signal.SIGINT, _early_interrupt)
    except ValueError:  # not the main thread: leave it
        pass

import argparse  # noqa: E402 - after the early Ctrl-C handler
import contextlib  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

from ppl import __version__  # noqa: E402
from ppl.errors import FitError, PplError  # noqa: E402
from ppl.inference.checkpoint import Interrupted  # noqa: E402
from ppl.language.includes import default_include_paths, included_files  # noqa: E402
from ppl.limits import LIMITS, Limits, interrupts_noted  # noqa: E402
from ppl.methods import DEFAULTS, METHODS, FitOptions  # noqa: E402

#: Longest line of a message printed as it is; longer ones (a 10^7-character source line) are cut.
MESSAGE_LINE = 300


def printable(message: str) -> str:
    """A message safe for a terminal: control characters from model or data files escaped
    (no terminal escape codes run), long lines cut in the middle."""

    def clean(line: str) -> str:
        line = "".join(c if c.isprintable() or c == "\t" else repr(c)[1:-1] for c in line)
        if len(line) > MESSAGE_LINE:
            half = MESSAGE_LINE // 2
            line = f"{line[:half]} ... [{len(line) - 2 * half} characters] ... {line[-half:]}"
        return line

    return "\n".join(clean(line) for line in message.split("\n"))


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # exit code 2 with a one-line reason, like every other user error
        self.print_usage(sys.stderr)
        sys.stderr.write(f"ppl: error: {message}\n")
        raise SystemExit(2)


def _sets(values: list[str]) -> dict[str, str]:
    out = {}
    for item in values or []:
        if "=" not in item:
            raise PplError(f"--set expects name=value, got '{item}'")
        name, value = item.split("=", 1)
        out[name.strip()] = value.strip()
    return out


def _add_common(p):
    p.add_argument("model", help="model file (.model or .stan)")
    p.add_argument(
        "data", nargs="*", help="data files: .csv (a column per variable) or .json (Stan format)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="give a scalar data value, e.g. --set N=10",
    )
    p.add_argument(
        "--include-paths",
        type=lambda text: [d for d in text.split(",") if d],
        default=[],
        metavar="DIR,...",
        help='directories where `#include "file.stan"` looks after the including file\'s own',
    )
    p.add_argument(
        "--max-loop-iterations",
        type=int,
        metavar="N",
        help="loop iterations (for, while, foreach; a vectorised loop counts its rows) allowed in "
        "one run of a block before it stops with an error "
        f"(default {Limits.max_loop_iterations:.0e})",
    )
    p.add_argument(
        "--max-memory",
        type=float,
        metavar="GB",
        help="memory budget of one array, a data file or the draws, checked before allocating "
        f"(default {Limits.max_bytes / 2**30:g} GiB)",
    )


SUBCOMMANDS: dict[str, argparse.ArgumentParser] = {}


def build_parser() -> argparse.ArgumentParser:
    """The `ppl` command's options: fit, ir, check, plot."""
    parser = _Parser(prog="ppl", description="Variational inference for Stan-like models.")
    parser.add_argument("--version", action="version", version=f"ppl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    f = sub.add_parser("fit", help="fit a model to data and summarise the approximate posterior")
    _add_common(f)
    _add_method_options(f)
    _add_run_options(f)
    _add_checkpoint_options(f)
    f.add_argument("--quiet", action="store_true", help="no progress bar")
    f.add_argument("--reparam", choices=("auto", "none", "noncentre"), default="auto",
                   help="non-centring of location-scale statements: auto (the default road "
                   "fits it too where the data inform them weakly, keeps the higher ELBO), none, "
                   "noncentre (always)")  # fmt: skip

    r = sub.add_parser("ir", help="print the model's graph IR")
    _add_common(r)
    fmt = r.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the IR as JSON")
    fmt.add_argument("--dot", action="store_true", help="print the IR as a Graphviz digraph")
    r.add_argument(
        "--method",
        default=DEFAULTS["method"],
        choices=list(METHODS),
    )
    r.add_argument(
        "--passes",
        default="all",
        metavar="all|none|P,...",
        help="the passes to run before printing (default all; none: the program as written): "
        "constant_folding, loop_vectorisation, loop_invariants, sufficient_statistics; "
        "all,noncentre adds the non-centring of location-scale statements",
    )

    c = sub.add_parser(
        "check", help="parse and check the model (and the data, if given) without fitting"
    )
    _add_common(c)
    pl = sub.add_parser(
        "plot", help="PNGs of a fit's ELBO trace and marginals, from `ppl fit --output DIR`"
    )
    pl.add_argument("directory", metavar="DIR", help="the directory `ppl fit --output` wrote")
    pl.add_argument(
        "--reference",
        metavar="FILE",
        help="a reference posterior to draw over the marginals (posteriordb reference.json, "
        "or a JSON file with 'mean' and 'sd' maps)",
    )
    pl.add_argument(
        "--overwrite", action="store_true", help="let the images replace files ppl did not write"
    )
    SUBCOMMANDS.update({"fit": f, "ir": r, "check": c, "plot": pl})
    return parser


def _add_method_options(f) -> None:
    """`ppl fit`'s method and the options of single methods."""
    f.add_argument(
        "--method",
        default=DEFAULTS["method"],
        choices=list(METHODS),
        help="auto (default): gamma family for positive parameters, Gaussian for the rest "
        "(binary parameters: BBVI); advi/meanfield: mean-field Gaussian ADVI for every "
        "parameter; fullrank: full-rank Gaussian ADVI; bbvi: score-function gradients "
        "(Rao-Blackwellised, with control variates), Bernoulli for binary parameters; dsvi: "
        "doubly stochastic VI, theta = C z + mu (Titsias & Lazaro-Gredilla 2014)",
    )
    f.add_argument(
        "--estimator",
        default="rb+cv",
        choices=["rb+cv", "rb", "naive"],
        help="BBVI's gradient estimator: Rao-Blackwellised with control variates (default), "
        "Rao-Blackwellised only, or the plain score function",
    )
    f.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="B",
        help="under --method bbvi or dsvi, subsample B of the data rows per step (scaled by N/B)",
    )
    f.add_argument(
        "--psis",
        action="store_true",
        help="importance-reweight the summaries with Pareto-smoothed weights when k-hat <= 0.7",
    )
    f.add_argument(
        "--stream",
        action="store_true",
        help="read the CSV a chunk at a time: memory bounded by the chunk, whatever the "
        "file's size. The default road sums every row, chunk by chunk, at every pass; with "
        "--method dsvi --batch B the minibatches are drawn from the chunks",
    )
    f.add_argument(
        "--chunk-rows",
        type=int,
        default=20000,
        metavar="R",
        help="rows per chunk under --stream (default 20000)",
    )
    f.add_argument(
        "--local",
        default="gibbs",
        choices=["gibbs", "meanfield"],
        help="under --method svi, the local step: exact Gibbs sweeps (default) or a mean-field "
        "Bernoulli q per binary latent",
    )
    f.add_argument(
        "--local-draws",
        default="auto",
        choices=["auto", "all", "means"],
        help="under --method svi, draws of the local latents (per-row ones): all, or per-row "
        "means only (beyond 10 million values x draws under auto)",
    )
    for flag, kind, default, text in (
        ("--burnin", int, 3, "Gibbs sweeps discarded per batch"),
        ("--samples", int, 3, "Gibbs sweeps kept per batch"),
        ("--kappa", float, 0.75, "the step sizes' decay, rho_t = (t + tau)^-kappa"),
        ("--tau", float, 1.0, "the step sizes' delay, rho_t = (t + tau)^-kappa"),
    ):
        f.add_argument(flag, type=kind, default=default,
                       help=f"under --method svi, {text} (default {default})")  # fmt: skip
    f.add_argument(
        "--rank",
        default=None,
        choices=["full", "diag"],
        help="under --method dsvi, a lower-triangular (default) or diagonal scale matrix C",
    )
    f.add_argument(
        "--student-t",
        type=float,
        default=None,
        metavar="NU",
        dest="dof",
        help="under --method dsvi, z from a Student-t with NU degrees of freedom (default: normal)",
    )
    f.add_argument(
        "--schedule",
        default=None,
        choices=["adaptive", "decay", "robbins-monro"],
        help="under --method dsvi, the learning rates: Stan's adaptive sequence (default), the "
        "paper's eta * 0.95^(t/5000) with 0.1x for C, or eta (1 + t)^-0.7",
    )


def _add_run_options(f) -> None:
    """`ppl fit`'s iterations, seed, draws, output and optimiser."""
    f.add_argument("--iter", type=int, default=DEFAULTS["iterations"],
                   help=f"maximum iterations (default {DEFAULTS['iterations']})")  # fmt: skip
    f.add_argument("--seed", type=int, default=DEFAULTS["seed"],
                   help=f"random seed (default {DEFAULTS['seed']})")  # fmt: skip
    f.add_argument("--draws", type=int, default=DEFAULTS["draws"],
                   help=f"approximate posterior draws (default {DEFAULTS['draws']})")  # fmt: skip
    f.add_argument(
        "--output", metavar="DIR", help="write summary.csv, draws.csv, fit.json, elbo.csv"
    )
    f.add_argument("--max-rows", type=int, default=60, metavar="N",
                   help="rows of the summary table before long vectors and matrices show "
                   "only their first elements (default 60; 0: all); scalars always show",
                   )  # fmt: skip
    f.add_argument("--overwrite", action="store_true",
                   help="let --output and --checkpoint replace files ppl did not write (never "
                   "the fit's inputs)")  # fmt: skip
    f.add_argument(
        "--tol-rel-obj",
        type=float,
        default=DEFAULTS["tol_rel_obj"],
        help="end a stochastic fit by Stan's rule at this relative ELBO change (default: at the "
        "optimum, the iterates stationary; the default road uses 0.01)",
    )
    f.add_argument(
        "--eta",
        type=float,
        default=None,
        help="fixed step size (default: adapted; 1 for binary parameters under auto)",
    )
    f.add_argument(
        "--grad-samples",
        type=int,
        default=None,
        help="Monte Carlo draws per gradient step (vectorised)",
    )
    f.add_argument(
        "--family",
        action="append",
        default=[],
        metavar="NAME=FAMILY",
        help="variational family for one parameter under --method auto: gamma, lognormal, gaussian",
    )
    f.add_argument(
        "--optimizer",
        default=None,
        choices=["adadelta", "adagrad", "rmsprop", "sgd", "adam"],
        help="under --method auto, run a stochastic SGVB phase with this optimiser before the "
        "deterministic refinement (default: none; adam when --no-polish); under --method bbvi, "
        "the optimiser (default: Stan's ADVI step sequence; adagrad is the BBVI paper's)",
    )
    f.add_argument(
        "--no-polish",
        action="store_true",
        help="skip the deterministic L-BFGS polish: stochastic optimisation only, as Stan",
    )


def _add_checkpoint_options(f) -> None:
    """`ppl fit`'s checkpoints and the Dask engine."""
    f.add_argument(
        "--checkpoint",
        metavar="PATH",
        help="under --method advi, meanfield, fullrank or dsvi, save the fit's state to PATH "
        "every --checkpoint-every iterations (written whole, then renamed) and when stopped by "
        "Ctrl-C or SIGTERM",
    )
    f.add_argument(
        "--checkpoint-every",
        type=int,
        default=100,
        metavar="K",
        help="iterations between checkpoints (default 100)",
    )
    f.add_argument(
        "--resume",
        metavar="PATH",
        help="continue the fit saved in PATH (same model, data and options): the result is the "
        "uninterrupted run's; checkpoints go on to PATH unless --checkpoint says otherwise",
    )
    f.add_argument(
        "--engine",
        default="embedded",
        choices=["embedded", "dask"],
        help="where the minibatch gradients are computed: this process (default) or the workers "
        "of a Dask cluster, which hold the data files' partitions (needs pip install "
        "'.[dask]'; with --method dsvi --batch B)",
    )
    f.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="under --engine dask, the scheduler of a running cluster (tcp://host:8786); "
        "without it a local cluster is started for the fit and closed after it",
    )
    f.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="W",
        help="under --engine dask without --scheduler, worker processes of the local cluster "
        "(default: one per core)",
    )


def _set_limits(args) -> None:
    """The run's limits: the defaults, or what --max-loop-iterations / --max-memory say."""
    vars(LIMITS).update(vars(Limits()))
    loops, memory = getattr(args, "max_loop_iterations", None), getattr(args, "max_memory", None)
    if loops is not None:
        if loops < 1:
            raise PplError("--max-loop-iterations must be at least 1")
        LIMITS.max_loop_iterations = loops
    if memory is not None:
        if not (memory > 0 and np.isfinite(memory)):
            raise PplError("--max-memory must be a positive number of GiB")
        LIMITS.max_bytes = int(min(memory, 2.0**40) * 2**30)


def _validate_options(args):
    _set_limits(args)
    if getattr(args, "iter", 1) is not None and args.command == "fit":
        if args.iter < 1:
            raise PplError("--iter must be at least 1")
        if args.draws < 1:
            raise PplError("--draws must be at least 1")
        if args.seed < 0:
            raise PplError("--seed must be a non-negative integer")
        if args.tol_rel_obj is not None and args.tol_rel_obj <= 0:
            raise PplError("--tol-rel-obj must be positive")
        if args.eta is not None and not (args.eta > 0 and np.isfinite(args.eta)):
            raise PplError("--eta must be a positive number")
        if args.grad_samples is not None and args.grad_samples < 1:
            raise PplError("--grad-samples must be at least 1")
        _check_rows_elsewhere(args, "--stream", args.stream)
        if args.stream and args.batch is not None and args.chunk_rows < args.batch:
            raise PplError(f"--chunk-rows {args.chunk_rows} must be at least --batch {args.batch}")
        if args.checkpoint_every < 1:
            raise PplError("--checkpoint-every must be at least 1")
        _check_not_an_input(args)
        if args.engine == "dask":
            _check_rows_elsewhere(args, "--engine dask", True)
            if args.stream:
                raise PplError("--engine dask reads the files on the workers; leave out --stream")
        elif args.scheduler or args.workers is not None:
            raise PplError("--scheduler and --workers are options of --engine dask")
        if args.workers is not None and (args.workers < 1 or args.scheduler):
            raise PplError("--workers must be at least 1, and is for the local cluster only "
                           "(not with --scheduler)")  # fmt: skip


def _check_rows_elsewhere(args, flag: str, given: bool) -> None:
    """ppl.pipeline's check of --stream and --engine dask, before the data are read."""
    from ppl.pipeline import check_rows_elsewhere

    check_rows_elsewhere(METHODS[args.method], flag, given, batch=args.batch,
                         optimizer=args.optimizer, refine_draws=_refine_draws(args))  # fmt: skip


def _refine_draws(args) -> int:
    """The polish's draws: none under --no-polish."""
    return 0 if args.no_polish else FitOptions.refine_draws


#: A terminal shows the fit's phases once it has run this long (seconds): a quicker fit shows
#: nothing. In a log, a line per phase from LOG_AFTER seconds on.
BAR_DELAY = 0.5
LOG_AFTER = float(os.environ.get("PPL_LOG_AFTER", "10"))  # the docs tests: inf, as a quick run


def _progress_lines(quiet: bool):
    """The fit's phases on stderr (ppl.progress.StatusLines), or none with --quiet."""
    if quiet:
        return None, lambda: None
    from ppl.progress import StatusLines

    lines = StatusLines(sys.stderr, sys.stderr.isatty(), delay=BAR_DELAY, log_after=LOG_AFTER)
    return lines, lines.close


def cmd_fit(args) -> int:
    _reuse_freed_arrays()
    with contextlib.ExitStack() as stack:  # a Dask cluster, when one is started, closes with it
        return _fit_and_report(args, stack)


def _reuse_freed_arrays() -> None:
    """glibc hands every freed block above 128 KB back to the kernel and the next array of that
    size faults its pages in again: a fit on 10^6 rows spent 10 of its 57 s in the kernel. Up to
    32 MB (the draws x rows chunks of ppl.inference.full_data) freed arrays stay with the
    process for the next ones (a 10^6-row fit: 57 -> 49 s). A no-op without glibc; the CLI's
    process only, never a notebook's."""
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
    libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)


def _inputs(args) -> list[str]:
    """The files the fit reads: the model, the data (globs expanded), the --resume checkpoint."""
    import glob

    data = [f for p in args.data for f in (sorted(glob.glob(p)) if glob.has_magic(p) else [p])]
    return [args.model, *data, *([args.resume] if args.resume else [])]


def _check_not_an_input(args) -> None:
    """--checkpoint and --output must not replace a file the fit reads, nor (without
    --overwrite) one ppl did not write: checked before the fit, and again when writing."""
    from ppl.inference.checkpoint import check_target
    from ppl.outputs.files import NAMES, OPTIONAL, check_output

    inputs = _inputs(args)
    if args.checkpoint:
        resumed = os.path.realpath(args.resume) if args.resume else None
        others = [f for f in inputs if os.path.realpath(f) != resumed]  # it goes on there
        check_target(args.checkpoint, others, args.overwrite)
    if args.output:  # local_means.csv too, unless the locals will be drawn (a long fit lost)
        names = (*NAMES, *(OPTIONAL if getattr(args, "local_draws", "auto") != "all" else ()))
        check_output(args.output, [*inputs, args.checkpoint], args.overwrite, names)


def _checkpointer(args):
    """--checkpoint / --resume: where to save, and the state to resume from (checked to belong
    to this model, data and options)."""
    from pathlib import Path

    from ppl.inference.checkpoint import Checkpointer, file_fingerprint, load, stop_on_signals

    path = args.checkpoint or args.resume
    if path is None:
        return None, contextlib.nullcontext()
    files = list(args.data)
    if args.engine == "dask":
        from ppl.distributed.partitions import expand

        rows, others = expand(args.data)
        files = rows + others
    shaping = ("method", "batch", "seed", "tol_rel_obj", "eta", "grad_samples", "rank", "dof",
               "schedule", "stream", "chunk_rows", "engine", "set", "family", "optimizer",
               "estimator", "no_polish")  # fmt: skip
    fingerprint = {"model": file_fingerprint(args.model)}
    included = included_files(args.model)  # with no #include, as before: old checkpoints resume
    if included:
        fingerprint["includes"] = [(f, file_fingerprint(f)) for f in included]
    fingerprint["data"] = [(os.path.basename(f), file_fingerprint(f)) for f in files]
    fingerprint.update({name: getattr(args, name) for name in shaping})
    resume = load(Path(args.resume), fingerprint) if args.resume else None
    checkpointer = Checkpointer(Path(path), args.checkpoint_every, fingerprint, resume)
    return checkpointer, stop_on_signals(checkpointer)


@contextlib.contextmanager
def _pointing_to(checkpointer):
    """A fit that fails after writing a checkpoint says where to resume from."""
    try:
        yield
    except Interrupted:
        raise
    except PplError as e:
        if checkpointer is None or not checkpointer.written:
            raise
        e.args = (f"{e}\nthe last checkpoint, {checkpointer.path}, is whole: continue the fit "
                  f"with the same command and --resume {checkpointer.path}",)  # fmt: skip
        raise


def _fit_and_report(args, stack: contextlib.ExitStack) -> int:
    from ppl.api import Model
    from ppl.outputs.local_means import local_means_line
    from ppl.outputs.report import diagnostics_lines, header_lines, summaries_text
    from ppl.outputs.summary import fit_summary, format_table

    checkpointer, signals = _checkpointer(args)
    model = Model.from_file(args.model)
    compiled, stream, partitions = _compiled(args, model, stack)
    progress, close = _progress_lines(args.quiet)
    try:
        with signals, _pointing_to(checkpointer):
            result = model.run(
                compiled,
                method=args.method,
                iterations=args.iter,
                seed=args.seed,
                draws=args.draws,
                tol_rel_obj=args.tol_rel_obj,
                eta=args.eta,
                grad_samples=args.grad_samples,
                families=_sets(args.family),
                optimizer=args.optimizer,
                estimator=args.estimator,
                batch=args.batch,
                rank=args.rank,
                dof=args.dof,
                schedule=args.schedule,
                local=args.local,
                local_draws=args.local_draws,
                burnin=args.burnin,
                samples=args.samples,
                kappa=args.kappa,
                tau=args.tau,
                stream=stream,
                refine_draws=_refine_draws(args),
                progress=progress,
                checkpoint=checkpointer,
                partitions=partitions,
                reparam=args.reparam,
            )
    finally:
        close()
    done = model.fitted(result, data=args.data, iterations=args.iter, psis=args.psis,
                        engine=args.engine)  # fmt: skip
    rows = result.how.rows_text(result, batch=args.batch, stream=stream, partitions=partitions,
                                chunk_rows=args.chunk_rows)  # fmt: skip
    print(f"model: {args.model}")
    for line in header_lines(result, iterations=args.iter, rows=rows):
        print(line)
    if checkpointer is not None:
        resumed = " (resumed from it)" if args.resume else ""
        print(f"checkpoint: {checkpointer.path}, every {checkpointer.every} iterations{resumed}")
    for line in diagnostics_lines(result):
        print(line)
    summaries = summaries_text(result, done.log_weights)
    if summaries:
        print(summaries)
    for name, fam in result.families.items():
        print(f"  q({name}): {fam}")
    print()
    where = (os.path.join(args.output, "summary.csv") if args.output else
             "summary.csv with --output DIR") + "; all rows here with --max-rows 0"  # fmt: skip
    print(format_table(fit_summary(result, done.log_weights), args.max_rows, where))
    if args.output:
        files = done.save(args.output, args.overwrite, [*_inputs(args), args.checkpoint])
        print(f"\nwrote {', '.join(str(f) for f in files)}")
    said = local_means_line(result, args.output)
    if said:
        print(said)
    if result.warnings:
        print("\nwarnings:", file=sys.stderr)
        for w in result.warnings:
            print(f"  - {w}", file=sys.stderr)
    return 0


def _compiled(args, model, stack: contextlib.ExitStack):
    """The model on the data: in memory, or on a sample of the rows with the --stream file's
    chunks or the Dask partitions that hold them all."""
    from ppl.methods.dsvi import elbo_sample_rows

    if args.stream:
        from ppl.data.build import build_streamed

        compiled, stream = build_streamed(
            args.model, args.data, _sets(args.set), seed=args.seed, chunk_rows=args.chunk_rows,
            keep=elbo_sample_rows(args.batch or 0), binary=args.batch is None,
        )  # fmt: skip
        return compiled, stream, None
    if args.engine == "dask":
        from ppl.distributed.build import build_distributed
        from ppl.distributed.cluster import connect

        client = stack.enter_context(connect(args.scheduler, args.workers))
        compiled, partitions = build_distributed(
            args.model, args.data, _sets(args.set), args.seed, client,
            keep=elbo_sample_rows(args.batch or 0),
        )  # fmt: skip
        return compiled, None, partitions
    return model.compile(args.data, sets=_sets(args.set), seed=args.seed), None, None


def cmd_ir(args) -> int:
    from ppl.data.specs import read_data
    from ppl.ir.graph import build_graph
    from ppl.ir.passes import lowered, parse
    from ppl.language.frontend import load_model
    from ppl.runtime.compiler import CompiledModel

    checked = load_model(args.model)
    program = lowered(checked, parse(args.passes))
    model = None
    if args.data or args.set:
        model = CompiledModel(program, read_data(checked, args.data, _sets(args.set)))
    graph = build_graph(program, model, METHODS[args.method])
    if args.json:
        print(graph.to_json())
    elif args.dot:
        print(graph.to_dot(), end="")
    else:
        print(graph.to_text(), end="")
    return 0


def cmd_check(args) -> int:
    from ppl.data.specs import read_data
    from ppl.language.frontend import load_model
    from ppl.runtime.compiler import CompiledModel

    checked = load_model(args.model)
    print(f"{args.model}: model OK")
    if args.data or args.set:
        model = CompiledModel(checked, read_data(checked, args.data, _sets(args.set)))
        if any(lat.binary for lat in model.latents):  # the log joint needs continuous latents
            print("note: binary parameters; the log density was not evaluated", file=sys.stderr)
        elif model.dim:
            # the initial point of `ppl fit` with its default seed: U(-2, 2) on the unconstrained
            # scale; a statement whose density or gradient is not finite there is reported with
            # its line (a warning: the model and data are valid, the fit may still fail)
            problem = model.diagnose(model.random_init(np.random.default_rng(1)))
            if problem is not None:
                print(f"warning: {problem}", file=sys.stderr)
        print(f"data OK: {len(model.data)} values, {model.dim} unconstrained parameters")
    return 0


def cmd_plot(args) -> int:
    from ppl.outputs.plots import plot_fit

    for path in plot_fit(args.directory, args.reference, args.overwrite):
        print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    start = time.perf_counter()
    try:
        with interrupts_noted(replacing=_early_interrupt):  # no Ctrl-C lost (ppl.limits)
            if _EARLY_INTERRUPT:
                raise KeyboardInterrupt
            return _main(argv, start)
    except KeyboardInterrupt:
        return _interrupted(start)
    finally:
        _EARLY_INTERRUPT.clear()


def _interrupted(start: float) -> int:
    output = sys.modules.get("ppl.outputs.files")
    done = list(getattr(output, "written_paths", []))
    what = (f"the output files were written whole ({', '.join(str(p) for p in done)})"
            if done else "nothing was written")  # fmt: skip
    print(f"\ninterrupted after {time.perf_counter() - start:.1f} s; {what}", file=sys.stderr)
    return 130


def _main(argv: list[str] | None, start: float) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        # options and data files may come in any order (`ppl fit M --set J=8 data.csv`)
        args = SUBCOMMANDS[argv[0]].parse_intermixed_args(argv[1:])
        args.command = argv[0]
    else:
        args = parser.parse_args(argv)
    try:
        _validate_options(args)
        handler = {"fit": cmd_fit, "ir": cmd_ir, "check": cmd_check, "plot": cmd_plot}[args.command]
        with warnings.catch_warnings(), default_include_paths(getattr(args, "include_paths", [])):
            # numpy's and autograd's warnings are not for the user: what matters reaches them as
            # a fit's warnings or an error
            warnings.simplefilter("ignore")
            return handler(args)
    except Interrupted as e:
        print(f"\nstopped: {e}", file=sys.stderr)
        return e.exit_code
    except PplError as e:
        message = str(e)
        model = getattr(args, "model", None)
        if isinstance(e, FitError) and model and model not in message:
            message = f"{model}: {message}"  # a fit's trouble belongs to its model
        print(f"error: {printable(message)}", file=sys.stderr)
        return e.exit_code
    except BrokenPipeError:  # `ppl fit ... | head`: the reader left; not an error of ours
        sys.stderr.close()
        return 0
    except RecursionError:
        from ppl.language.parser import TOO_DEEP

        where = f"{args.model}: " if getattr(args, "model", None) else ""
        print(f"error: {where}{TOO_DEEP}", file=sys.stderr)
        return 2
    except MemoryError:  # a size no check foresaw: still the input's size, not a bug
        print(f"error: out of memory after {time.perf_counter() - start:.1f} s: the model, data "
              "or options need more memory than the machine has; reduce the sizes or --draws",
              file=sys.stderr)  # fmt: skip
        return 2
    except Exception as e:  # noqa: BLE001 - a bug of ours: say so in one line, no traceback
        if os.environ.get("PPL_DEBUG"):
            raise
        print(
            f"internal error: {type(e).__name__}: {e}\n(this is a bug in ppl; rerun with "
            "PPL_DEBUG=1 for the traceback and please report it)",
            file=sys.stderr,
        )
        return 1


_COMMAND = __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "ppl"
if signal.getsignal(signal.SIGINT) is _early_interrupt and not _COMMAND:
    # imported, not the command: Python's handler is back (the command's main() replaces the
    # early handler with its own, so that no Ctrl-C falls between the two)
    signal.signal(signal.SIGINT, signal.default_int_handler)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
