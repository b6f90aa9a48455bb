"""ppl against PyMC and NumPyro variational inference, side by side, on the same posteriors.

    python benchmarks/peers.py [--only SUBSTR ...] [--iter 10000] [--seed 1] [--draws 1000]
                               [--methods ppl pymc-advi ...] [--json OUT] [--check]

Needs PyMC and NumPyro (`pip install '.[bench]'`, best in a separate virtualenv); they are
imported only when a method needs them. Problems come from benchmarks/peer_problems (registry.py:
the posteriordb posteriors when posteriordb.py is there, Pima logistic regression, the epilepsy
Poisson-gamma model, GPFA), each stated once for ppl, PyMC and NumPyro with Stan's parameter
names, and each with a reference posterior (posteriordb or a stored NUTS run).

Methods, all with the same iteration cap (--iter, default 10000 = ppl's default) and seed:

- `ppl`: ppl's default fit, `build(model, data, seed)` then `fit(model, "auto", seed, draws)`
  (mean-field/gamma families, deterministic polish, full-rank escalation when k-hat flags it).
  ppl may stop before the cap (its relative-ELBO rule); the others run every iteration.
- `pymc-advi`, `pymc-fullrank`: `pm.fit(n=iter, method="advi" | "fullrank_advi",
  random_seed=seed)`, PyMC's defaults otherwise (adagrad_window, 1 Monte Carlo draw per step).
- `numpyro-normal`, `numpyro-mvn`: `SVI(model, AutoNormal | AutoMultivariateNormal, Adam(0.01),
  Trace_ELBO())`, `svi.run(PRNGKey(seed), iter)`, in double precision (`enable_x64`). The step
  size 0.01 is our choice (NumPyro has no default); the guides' defaults are kept (init_to_uniform,
  init_scale 0.1). svi.run is jit-compiled as a whole, ahead of time, so that compilation can be
  timed apart from the iterations.

Columns of the per-problem table:

- `setup s`: everything before the first optimisation step: for ppl, `build` (parse, check,
  compile, read data); for PyMC, building the model plus pm.fit's graph compilation and its first
  step (timed by a callback at the first iteration); for NumPyro, building the model plus the
  ahead-of-time compilation of svi.run. `fit s`: the rest of the fit (for ppl, `fit`, which
  includes its own PSIS check of 1000 draws; for the peers, the iterations only).
- `grad evals`: gradient evaluations of the log joint: ppl's count; iterations x Monte Carlo
  draws per step for the peers (1 for PyMC's ADVI and NumPyro's Trace_ELBO).
- `ELBO`: the same estimator for everyone: the mean over the --draws output draws theta_s ~ q of
  log p(theta_s, y) - log q(theta_s), with each library's own log joint (log-Jacobian included,
  i.e. both densities on the same space). The libraries' log joints drop different additive
  constants (e.g. Stan's `~` drops terms without parameters), so compare ELBOs within a library
  only, never across libraries.
- `max err`, `med err`: max and median over the compared quantities of |mean - reference mean| /
  reference sd; `sd ratio`: median of fitted sd / reference sd. The compared quantities are the
  reference's: parameters by Stan element name, or a problem's `derived` (permutation-invariant)
  quantities.
- `k-hat`: PSIS k-hat of the same log ratios, by ppl.diagnostics.psis.psis for every method (<= 0.5
  good, <= 0.7 usable, > 0.7 not reliable).

A method that fails on a problem (exception, non-finite output) gets its error in its row and the
run goes on. `--json OUT` writes every number (rewritten atomically after each problem).
`--check` does not fit: it evaluates ppl's, PyMC's and NumPyro's log densities of each problem on
the constrained scale (no Jacobians) at a few random points and prints how far their differences
are from a constant (the translations are right when ~1e-10).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.peer_problems.base import Draws, Problem  # noqa: E402
from benchmarks.peer_problems.registry import problems as all_problems  # noqa: E402
from ppl.diagnostics.psis import psis  # noqa: E402
from ppl.outputs.summary import flatten_draws  # noqa: E402

METHODS = ("ppl", "pymc-advi", "pymc-fullrank", "numpyro-normal", "numpyro-mvn")
NUMPYRO_STEP_SIZE = 0.01


@dataclass
class Row:
    """One method's result on one problem (None where it failed before that number)."""

    method: str
    setup_seconds: float | None = None
    fit_seconds: float | None = None
    grad_evals: int | None = None
    elbo: float | None = None
    max_err: float | None = None
    median_err: float | None = None
    median_sd_ratio: float | None = None
    khat: float | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)


@dataclass
class Fitted:
    """What a method hands to the scoring: constrained draws and log p - log q per draw."""

    draws: Draws
    log_ratios: np.ndarray
    setup_seconds: float | None
    fit_seconds: float
    grad_evals: int
    khat: float | None = None  # when the method computed it itself (ppl)
    elbo: float | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- scoring


def compared(problem: Problem, draws: Draws) -> dict[str, np.ndarray]:
    """The reference's quantities, (n_draws,) each, from the draws (and `derived`)."""
    names, matrix = flatten_draws({k: np.asarray(v) for k, v in draws.items()})
    columns = dict(zip(names, matrix.T, strict=True))
    if problem.derived is not None:
        columns.update(problem.derived(draws))
    missing = [n for n in problem.reference if n not in columns]
    if missing:
        raise KeyError(f"draws lack reference quantities {missing[:5]}")
    return {n: columns[n] for n in problem.reference}


def score(problem: Problem, fitted: Fitted, method: str) -> Row:
    """Errors against the reference, the ELBO and k-hat from the log ratios."""
    cols = compared(problem, fitted.draws)
    mat = np.column_stack(list(cols.values()))
    ref_mean = np.array([problem.reference[n]["mean"] for n in cols])
    ref_sd = np.array([problem.reference[n]["sd"] for n in cols])
    err = np.abs(mat.mean(axis=0) - ref_mean) / ref_sd
    ratio = mat.std(axis=0, ddof=1) / ref_sd
    lr = np.asarray(fitted.log_ratios, dtype=float)
    finite = np.isfinite(lr)
    elbo, khat = fitted.elbo, fitted.khat
    notes = list(fitted.notes)
    if khat is None:
        khat = psis(np.where(finite, lr, -np.inf))[1] if finite.sum() >= 2 else math.inf
        elbo = float(lr.mean()) if finite.all() else None
        if not finite.all():
            notes.append(f"{int((~finite).sum())} of {lr.size} draws with non-finite log ratio")
    row = Row(
        method=method,
        setup_seconds=fitted.setup_seconds,
        fit_seconds=fitted.fit_seconds,
        grad_evals=fitted.grad_evals,
        elbo=elbo,
        max_err=float(err.max()),
        median_err=float(np.median(err)),
        median_sd_ratio=float(np.median(ratio)),
        khat=float(khat),
        notes=notes,
    )
    if not (np.isfinite(err).all() and np.isfinite(ratio).all()):
        row.error = "non-finite summaries"
    return row


# ---------------------------------------------------------------- ppl


def fit_ppl(problem: Problem, iters: int, seed: int, n_draws: int) -> Fitted:
    """ppl's default fit (`auto`), as `ppl fit MODEL DATA --seed S` runs it."""
    from ppl.data.build import build
    from ppl.pipeline import fit

    t0 = time.perf_counter()
    model = build(str(problem.model), [str(p) for p in problem.data], seed=seed)
    t1 = time.perf_counter()
    result = fit(model, "auto", iterations=iters, seed=seed, draws=n_draws)
    t2 = time.perf_counter()
    diag = result.diagnostics
    return Fitted(
        draws=result.draws,
        log_ratios=np.zeros(0),
        setup_seconds=t1 - t0,
        fit_seconds=t2 - t1,
        grad_evals=int(result.vi.grad_evals),
        khat=float(diag.get("khat", math.nan)),
        elbo=diag.get("elbo"),
        notes=list(result.notes),
    )


# ---------------------------------------------------------------- PyMC


def _pymc_batched(model) -> Callable[..., list[np.ndarray]]:
    """f(*value vars with a leading draw axis) -> [log joint with Jacobian, constrained values of
    the free RVs and deterministics], vectorised over draws (a per-draw loop as a fallback)."""
    import pytensor
    import pytensor.tensor as pt
    from pytensor.graph.replace import vectorize_graph

    values = model.value_vars
    outs = [model.logp(jacobian=True)] + model.replace_rvs_by_values(
        model.free_RVs + model.deterministics
    )
    try:
        batched = [pt.tensor(v.name, dtype=v.dtype, shape=(None, *v.type.shape)) for v in values]
        replace = dict(zip(values, batched, strict=True))
        fn = pytensor.function(batched, vectorize_graph(outs, replace))
        return lambda *xs: [np.asarray(o) for o in fn(*xs)]
    except Exception:  # noqa: BLE001 - an op without a batched form: evaluate draw by draw
        single = pytensor.function(values, outs)

        def loop(*xs):
            rows = [single(*(x[s] for x in xs)) for s in range(xs[0].shape[0])]
            return [np.stack([np.asarray(r[i]) for r in rows]) for i in range(len(outs))]

        return loop


def fit_pymc(problem: Problem, method: str, iters: int, seed: int, n_draws: int) -> Fitted:
    """pm.fit with PyMC's defaults; q's draws, log q and log p on PyMC's unconstrained space."""
    import pymc as pm

    first_step: list[float] = []

    def at_first_step(approx, losses, i):
        if not first_step:
            first_step.append(time.perf_counter())

    t0 = time.perf_counter()
    model = problem.pymc_model()
    approx = pm.fit(
        n=iters, method=method, random_seed=seed, model=model, progressbar=False,
        callbacks=[at_first_step],
    )  # fmt: skip
    t_end = time.perf_counter()
    t1 = first_step[0] if first_step else t0

    (group,) = approx.groups
    mean = np.asarray(approx.mean.eval(), dtype=float)
    rng = np.random.default_rng(seed + 1)
    eps = rng.standard_normal((n_draws, mean.size))
    if method == "fullrank_advi":
        L = np.asarray(approx.L.eval(), dtype=float)
        z = mean + eps @ L.T
        log_det = np.sum(np.log(np.abs(np.diag(L))))
    else:
        sd = np.asarray(approx.std.eval(), dtype=float)
        z = mean + eps * sd
        log_det = np.sum(np.log(sd))
    log_q = -0.5 * np.sum(eps**2, axis=1) - 0.5 * mean.size * np.log(2 * np.pi) - log_det
    by_name = {name: (sl, shape) for name, sl, shape, _ in group.ordering.values()}
    inputs = [
        z[:, by_name[v.name][0]].reshape((n_draws, *by_name[v.name][1])) for v in model.value_vars
    ]
    log_p, *constrained = _pymc_batched(model)(*inputs)
    names = [rv.name for rv in model.free_RVs + model.deterministics]
    draws = {n: np.asarray(c).reshape((n_draws, *np.shape(c)[1:])) for n, c in zip(
        names, constrained, strict=True)}  # fmt: skip
    return Fitted(
        draws=draws,
        log_ratios=np.asarray(log_p, dtype=float).reshape(n_draws) - log_q,
        setup_seconds=t1 - t0,
        fit_seconds=t_end - t1,
        grad_evals=iters,  # obj_n_mc = 1 draw per step (PyMC's default)
    )


# ---------------------------------------------------------------- NumPyro


def _numpyro_x64() -> None:
    import numpyro

    numpyro.enable_x64()


def fit_numpyro(problem: Problem, guide_name: str, iters: int, seed: int, n_draws: int) -> Fitted:
    """SVI with an autoguide; q's draws and log densities by tracing the fitted guide."""
    _numpyro_x64()
    import jax
    from numpyro.infer import SVI, Trace_ELBO, autoguide
    from numpyro.optim import Adam

    t0 = time.perf_counter()
    model, kwargs = problem.numpyro_model()
    guide = getattr(autoguide, guide_name)(model)
    svi = SVI(model, guide, Adam(NUMPYRO_STEP_SIZE), Trace_ELBO())
    key = jax.random.PRNGKey(seed)
    notes = []
    try:
        run = jax.jit(lambda k: svi.run(k, iters, progress_bar=False, **kwargs))
        compiled = run.lower(key).compile()
        t1 = time.perf_counter()
        result = jax.block_until_ready(compiled(key))
        setup = t1 - t0
    except Exception as e:  # noqa: BLE001 - not jit-compatible: run svi.run as is, untimed setup
        notes.append(f"svi.run not jit-compilable ({type(e).__name__}); setup included in fit")
        t1 = time.perf_counter()
        result = jax.block_until_ready(svi.run(key, iters, progress_bar=False, **kwargs))
        setup = None
    t2 = time.perf_counter()
    draws, log_p, log_q = numpyro_draws(model, guide, result.params, kwargs, seed + 1, n_draws)
    losses = np.asarray(result.losses)
    if not np.isfinite(losses[-1]):
        notes.append("final SVI loss not finite")
    return Fitted(
        draws=draws,
        log_ratios=log_p - log_q,
        setup_seconds=setup,
        fit_seconds=t2 - t1,
        grad_evals=iters,  # Trace_ELBO(num_particles=1): one gradient draw per step
        notes=notes,
    )


def numpyro_draws(
    model: Callable, guide: Callable, params: dict, kwargs: dict, seed: int, n_draws: int
) -> tuple[Draws, np.ndarray, np.ndarray]:
    """Constrained draws from the fitted guide with log q and the model's log joint at them.

    Both are densities on the constrained space (an autoguide's log density includes the
    Jacobian of its transform to the model's support), so log p - log q is the same ratio as on
    the unconstrained space. Vectorised over draws with jax.vmap.
    """
    import jax
    from numpyro.handlers import seed as seeded
    from numpyro.infer.util import log_density

    def one(key):
        log_q, guide_trace = log_density(seeded(guide, key), (), kwargs, params)
        latent = {
            name: site["value"]
            for name, site in guide_trace.items()
            if site["type"] == "sample" and not site["is_observed"] and not name.startswith("_")
        }
        log_p, model_trace = log_density(model, (), kwargs, latent)
        values = {
            name: site["value"]
            for name, site in model_trace.items()
            if site["type"] in ("sample", "deterministic") and not site.get("is_observed", False)
        }
        return values, log_p, log_q

    keys = jax.random.split(jax.random.PRNGKey(seed), n_draws)
    values, log_p, log_q = jax.jit(jax.vmap(one))(keys)
    draws = {k: np.asarray(v, dtype=float) for k, v in values.items()}
    return draws, np.asarray(log_p, dtype=float), np.asarray(log_q, dtype=float)


# ---------------------------------------------------------------- running


RUNNERS: dict[str, Callable[[Problem, int, int, int], Fitted]] = {
    "ppl": fit_ppl,
    "pymc-advi": lambda p, n, s, d: fit_pymc(p, "advi", n, s, d),
    "pymc-fullrank": lambda p, n, s, d: fit_pymc(p, "fullrank_advi", n, s, d),
    "numpyro-normal": lambda p, n, s, d: fit_numpyro(p, "AutoNormal", n, s, d),
    "numpyro-mvn": lambda p, n, s, d: fit_numpyro(p, "AutoMultivariateNormal", n, s, d),
}


def run_method(problem: Problem, method: str, iters: int, seed: int, n_draws: int) -> Row:
    """One method on one problem; an exception becomes the row's error."""
    try:
        return score(problem, RUNNERS[method](problem, iters, seed, n_draws), method)
    except Exception as e:  # noqa: BLE001 - report it in the row and go on
        return Row(method=method, error=_describe(e))


def _describe(e: Exception) -> str:
    """The exception's type and first line (the traceback too with PEERS_TRACEBACK=1)."""
    if os.environ.get("PEERS_TRACEBACK"):
        traceback.print_exception(e)
    first = (str(e).strip().splitlines() or [""])[0][:120]
    return f"{type(e).__name__}: {first}"


def _fmt(x, spec: str, width: int) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return f"{'-':>{width}}"
    return f"{x:>{width}{spec}}"


HEADER = (f"{'method':<16}{'setup s':>9}{'fit s':>9}{'grad evals':>12}{'ELBO':>13}"
          f"{'max err':>9}{'med err':>9}{'sd ratio':>10}{'k-hat':>8}")  # fmt: skip


def format_row(r: Row) -> str:
    line = (
        f"{r.method:<16}{_fmt(r.setup_seconds, '.2f', 9)}{_fmt(r.fit_seconds, '.2f', 9)}"
        f"{_fmt(r.grad_evals, 'd', 12)}{_fmt(r.elbo, '.6g', 13)}{_fmt(r.max_err, '.3f', 9)}"
        f"{_fmt(r.median_err, '.3f', 9)}{_fmt(r.median_sd_ratio, '.3f', 10)}"
        f"{_fmt(r.khat, '.2f', 8)}"
    )
    if r.error:
        line += f"  FAILED: {r.error}"
    return line


def print_problem(problem: Problem, rows: list[Row]) -> None:
    print(f"\n== {problem.name}: {len(problem.reference)} compared quantities; reference: "
          f"{problem.reference_source}")  # fmt: skip
    print(HEADER)
    print("-" * len(HEADER))
    for r in rows:
        print(format_row(r))
    for r in rows:
        for note in r.notes:
            print(f"  note ({r.method}): {note}")
    for note in problem.notes:
        print(f"  note: {note}")
    sys.stdout.flush()


def print_summary(results: list[dict]) -> None:
    """Per problem: max |mean error| / sd and fit seconds of ppl and the mean-field peers."""
    cols = ("ppl", "pymc-advi", "numpyro-normal")
    head = f"{'problem':<36}" + "".join(f"{c + ' err':>20}{'s':>8}" for c in cols)
    print("\nsummary: max |mean error| / reference sd and fit seconds")
    print(head)
    print("-" * len(head))
    for res in results:
        by = {r["method"]: r for r in res["rows"]}
        line = f"{res['problem']:<36}"
        for c in cols:
            r = by.get(c, {})
            line += _fmt(r.get("max_err"), ".3f", 20) + _fmt(r.get("fit_seconds"), ".1f", 8)
        print(line)


FOOTNOTE = """\
err = |mean - reference mean| / reference sd (max and median over the compared quantities);
sd ratio = median of fitted sd / reference sd; k-hat = PSIS k-hat (ppl.diagnostics.psis.psis) of
log p - log q over the output draws; ELBO = mean of log p(theta, y) - log q(theta) over the same
draws, from each library's own log joint: the libraries' additive constants differ, so compare
ELBOs within a library only. setup s = model build and compilation before the first step;
grad evals = ppl's count, iterations x 1 Monte Carlo draw for PyMC and NumPyro."""


def write_json(path: Path, payload: dict) -> None:
    """Write atomically: a temporary file in the same folder, then rename."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, default=float) + "\n")
    tmp.replace(path)


# ---------------------------------------------------------------- --check


def check_problem(problem: Problem, seed: int, points: int = 5) -> dict[str, float]:
    """Max deviation from a constant of (peer - ppl) constrained log densities at random points.

    The points are ppl's random inits (uniform(-2, 2) on ppl's unconstrained scale) mapped to
    constrained values; each library evaluates its log joint there without Jacobians.
    """
    from ppl.data.build import build
    from ppl.runtime.compiler import _total

    model = build(str(problem.model), [str(p) for p in problem.data], seed=seed)
    rng = np.random.default_rng(seed)
    zeta = rng.uniform(-2.0, 2.0, size=(points, model.dim))
    params = model.checked.names_in("parameters")
    draws = {k: v for k, v in model.constrained_draws(zeta, rng).items() if k in params}
    _, target, _ = model._evaluate(zeta)
    ppl_lp = np.asarray(_total(target, 0.0, points), dtype=float).reshape(points)
    out: dict[str, float] = {}
    for peer, density in (("pymc", _pymc_density), ("numpyro", _numpyro_density)):
        try:
            diff = density(problem, draws, points) - ppl_lp
            out[peer] = float(np.max(np.abs(diff - diff.mean())))
            out[f"{peer}_offset"] = float(diff.mean())
        except Exception as e:  # noqa: BLE001 - report and go on
            out[peer] = math.nan
            out[f"{peer}_error"] = _describe(e)
    out["ppl_spread"] = float(np.ptp(ppl_lp))
    return out


def _pymc_density(problem: Problem, draws: Draws, points: int) -> np.ndarray:
    from pymc.model.transform.conditioning import remove_value_transforms

    model = remove_value_transforms(problem.pymc_model())
    logp = model.compile_logp(jacobian=False)
    names = [v.name for v in model.value_vars]
    return np.array([float(logp({n: draws[n][s] for n in names})) for s in range(points)])


def _numpyro_density(problem: Problem, draws: Draws, points: int) -> np.ndarray:
    _numpyro_x64()
    import jax
    from numpyro.infer.util import log_density

    model, kwargs = problem.numpyro_model()

    def one(values):
        return log_density(model, (), kwargs, values)[0]

    return np.asarray(jax.vmap(one)({k: jax.numpy.asarray(v) for k, v in draws.items()}))


def run_checks(problems: list[Problem], seed: int) -> dict:
    print(f"{'problem':<36}{'pymc dev':>12}{'numpyro dev':>13}{'ppl spread':>14}"
          f"{'max rel dev':>13}")  # fmt: skip
    results = {}
    for p in problems:
        r = check_problem(p, seed)
        results[p.name] = r
        r["max_relative"] = max(r["pymc"], r["numpyro"]) / max(r["ppl_spread"], 1.0)
        print(f"{p.name:<36}{r['pymc']:>12.2e}{r['numpyro']:>13.2e}{r['ppl_spread']:>14.4g}"
              f"{r['max_relative']:>13.1e}")  # fmt: skip
        for k in ("pymc_error", "numpyro_error"):
            if k in r:
                print(f"  {k}: {r[k]}")
    print(
        "dev = max |(peer - ppl) - mean(peer - ppl)| of the constrained log joints at 5 random "
        "points;\nspread = range of ppl's log joint there; rel dev = dev / max(spread, 1)"
    )
    return results


def _versions() -> dict[str, str | None]:
    """Installed versions of the compared libraries (None when absent), for the JSON."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for name in ("ppl", "pymc", "pytensor", "numpyro", "jax"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    out["python"] = sys.version.split()[0]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--only", nargs="+", default=None, help="run only problems whose name contains one of these"
    )
    ap.add_argument("--iter", type=int, default=10000, help="iteration cap for every method")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--draws", type=int, default=1000, help="output draws of q per method")
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--json", type=Path, default=None, help="write all numbers to this file")
    ap.add_argument(
        "--check",
        action="store_true",
        help="compare the three log densities per problem instead of fitting",
    )
    args = ap.parse_args(argv)

    problems = [p for p in all_problems() if not args.only or any(o in p.name for o in args.only)]
    if not problems:
        print("no problem matches", file=sys.stderr)
        return 1
    if args.check:
        checks = run_checks(problems, args.seed)
        if args.json:
            write_json(args.json, {"check": checks, "seed": args.seed})
        return 0

    settings = {
        "iter": args.iter,
        "seed": args.seed,
        "draws": args.draws,
        "methods": args.methods,
        "numpyro_step_size": NUMPYRO_STEP_SIZE,
        "versions": _versions(),
    }
    print(f"iter={args.iter} seed={args.seed} draws={args.draws} methods={' '.join(args.methods)}")
    results: list[dict] = []
    for problem in problems:
        if not problem.reference:
            print(f"\n== {problem.name}: no reference posterior stored; skipped")
            continue
        rows = [run_method(problem, m, args.iter, args.seed, args.draws) for m in args.methods]
        print_problem(problem, rows)
        results.append({
            "problem": problem.name,
            "model": str(problem.model.relative_to(ROOT)),
            "data": [str(p.relative_to(ROOT)) for p in problem.data],
            "reference_source": problem.reference_source,
            "compared": len(problem.reference),
            "notes": problem.notes,
            "rows": [asdict(r) for r in rows],
        })  # fmt: skip
        if args.json:
            write_json(args.json, {"settings": settings, "footnote": FOOTNOTE, "problems": results})
    print_summary(results)
    print("\n" + FOOTNOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
