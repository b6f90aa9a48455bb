"""CmdStanPy's habits at a point: initial values (`inits=`), the mode (`model.optimize`) and
draws from the Gaussian at the mode (`model.laplace_sample`), with CmdStanPy's names and
meanings.

`jacobian` as in CmdStan: False (optimize's default) maximises the model's target on the
constrained scale (the penalised MLE / MAP of the density as written); True maximises the density
of the unconstrained parameters, log-Jacobians of the constraining transforms included: the mode
of the distribution that Laplace sampling approximates (laplace_sample's default)."""

from __future__ import annotations

import json
import os
import time
import warnings
from collections.abc import Mapping
from pathlib import Path

import autograd.numpy as anp
import numpy as np

from ppl.diagnostics.verdict import judge
from ppl.errors import PplError, PplWarning
from ppl.families.registry import GAUSSIAN
from ppl.inference.auto import laplace_start
from ppl.inference.hessian import hessian_by_hvp
from ppl.inference.mode import Mode, find_mode
from ppl.library.transforms import make_transform
from ppl.limits import check_values
from ppl.methods.advi import FULL_RANK
from ppl.methods.base import Method
from ppl.methods.result import make_result
from ppl.outputs.summary import flatten_draws
from ppl.runtime.compiler import CompiledModel, _forward, _total
from ppl.runtime.evaluator import Evaluator
from ppl.runtime.signals import Devectorise, NeedsPerSample, Rejected

#: CmdStan's optimize default: at most 2000 L-BFGS iterations.
OPTIMIZE_ITERATIONS = 2000
#: Stan's default initial values: uniform(-2, 2) on the unconstrained scale.
INIT_RADIUS = 2.0


# ---- constrained values -> the unconstrained vector -------------------------------------------


def unconstrained(model: CompiledModel, values: Mapping[str, np.ndarray], fill: np.ndarray,
                  what: str = "inits") -> np.ndarray:  # fmt: skip
    """The (S, D) unconstrained rows of S draws of constrained `values` (name -> (S, *shape)),
    each checked against its declaration (shape, finite, inside its constraint: a PplError
    naming the parameter and `what`); latents not in `values` keep `fill`'s coordinates (their
    constrained values are what bounds of later parameters see, as in the log joint)."""
    zeta = np.array(fill, dtype=float)
    S = zeta.shape[0]
    env = dict(model.data)
    ev = Evaluator(model.program, env)
    for lat in model.latents:
        part = slice(lat.offset, lat.offset + lat.size)
        given = values.get(lat.name)
        if given is not None:
            given = _checked_value(model, lat, given, S, what)
        if lat.binary:
            if given is not None:
                if not np.all((given == 0) | (given == 1)):
                    raise PplError(f"{what}: '{lat.name}' is binary; give it 0 or 1")
                zeta[:, part] = given.reshape(S, -1)
            env[lat.name] = zeta[:, part].reshape((S, *lat.ushape))
            continue
        t = lat.fixed_transform
        if t is None:
            bounds = {k: model._aligned_bound(ev.expr(e), e.type, lat.stype)
                      for k, e in lat.decl.spec.bounds.items()}  # fmt: skip
            t = make_transform(lat.kind, check=False, **bounds)
        if given is None:
            x, _ = _forward(t, zeta[:, part].reshape((S, *lat.ushape)), len(lat.shape))
            env[lat.name] = np.asarray(x)
            continue
        with np.errstate(all="ignore"):
            u = np.asarray(t.inverse(given), dtype=float).reshape(S, -1)
        if not t.in_support(given) or not np.all(np.isfinite(u)):
            raise PplError(
                f"{what}: '{lat.name}' is outside its declared constraint ({_declared(model, lat)}"
                f"; line {lat.decl.pos.line}): on its boundary or beyond"
            )
        zeta[:, part] = u
        env[lat.name] = given
    return zeta


def _declared(model: CompiledModel, lat) -> str:
    text = model._statement_text(lat.decl)
    return text if text else f"{lat.kind}, support {lat.support}"


def _checked_value(model, lat, value, S: int, what: str) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise PplError(f"{what}: '{lat.name}' is not numeric") from None
    if arr.shape == tuple(lat.shape) and S == 1:
        arr = arr[None]
    if arr.shape[1:] != tuple(lat.shape) or arr.shape[0] != S:
        got = arr.shape[1:] if arr.shape[:1] == (S,) else arr.shape
        raise PplError(f"{what}: '{lat.name}' has shape {tuple(got)}; the model declares "
                       f"{tuple(lat.shape)} with this data")  # fmt: skip
    if not np.all(np.isfinite(arr)):
        raise PplError(f"{what}: '{lat.name}' is not finite")
    return arr


def initial_point(model: CompiledModel, inits, rng: np.random.Generator) -> np.ndarray | None:
    """The unconstrained start `inits` asks for: None (the method's own: Stan's uniform(-2, 2)),
    a number x (uniform(-x, x) on the unconstrained scale, as CmdStan's `init=x`; 0 is the
    origin), a dict of parameter values on the constrained scale (the others uniform(-2, 2)),
    or the path of a JSON file holding one."""
    if inits is None:
        return None
    if isinstance(inits, (str, os.PathLike)):
        try:
            inits = json.loads(Path(inits).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise PplError(f"inits: cannot read {inits}: {e}") from None
    if isinstance(inits, (int, float)) and not isinstance(inits, bool):
        if not np.isfinite(inits) or inits < 0:
            raise PplError(f"inits={inits}: a radius must be a number >= 0")
        return rng.uniform(-inits, inits, size=model.dim) if inits > 0 else np.zeros(model.dim)
    if not isinstance(inits, Mapping):
        raise PplError(f"inits: a dict of parameter values, a number or a JSON file, not "
                       f"{type(inits).__name__}")  # fmt: skip
    params = [lat.name for lat in model.latents]
    others = set(model.checked.names_in("transformed_parameters"))
    others |= set(model.checked.names_in("generated_quantities"))
    unknown = [k for k in inits if k not in params and k not in others]
    if unknown:
        raise PplError(f"inits: {', '.join(repr(k) for k in unknown)} not a parameter of the "
                       f"model; its parameters are {', '.join(params)}")  # fmt: skip
    given = {k: v for k, v in inits.items() if k in params}
    fill = rng.uniform(-INIT_RADIUS, INIT_RADIUS, size=(1, model.dim))
    return unconstrained(model, given, fill)[0]


# ---- the log density without the Jacobian --------------------------------------------------


def target_density(model: CompiledModel, jacobian: bool):
    """The row-vectorised log density optimize maximises: the model's log joint on the
    unconstrained scale (`jacobian`), or its target alone (the constraining transforms'
    log-Jacobians left out: the density of the constrained parameters as written)."""
    if jacobian:
        return model.log_joint
    decls = {id(lat.decl) for lat in model.latents}

    def without_jacobian(zeta):
        S = zeta.shape[0]
        while True:
            jac: list = []

            def record(statement, lp, jac=jac):
                if id(statement) in decls:
                    jac.append(lp)

            try:
                _, target, log_jac = model._evaluate(zeta, on_statement=record)
            except Devectorise as d:
                model.devectorised.add(d.loop)
                continue
            except NeedsPerSample:
                if S == 1:
                    raise
                return anp.concatenate([without_jacobian(zeta[s : s + 1]) for s in range(S)])
            except Rejected:
                return anp.full(S, -np.inf)
            total = _total(target, log_jac, S)
            for lp in jac:
                total = total - lp
            return total

    return without_jacobian


# ---- optimize ---------------------------------------------------------------------------------


class Optimum:
    """The mode `model.optimize` found (CmdStanPy's CmdStanMLE): every Stan variable at it
    (transformed parameters and generated quantities evaluated there), the log density there
    (`lp`, CmdStan's lp__), and how the search went."""

    def __init__(self, compiled: CompiledModel, found, *, jacobian: bool, seed: int) -> None:
        self.compiled, self.jacobian, self.seed = compiled, jacobian, seed
        self.unconstrained = np.asarray(found.point, dtype=float)
        self.init = np.asarray(found.init, dtype=float)  # the unconstrained start
        self.lp = float(found.log_density)
        self.converged = bool(found.converged)
        self.iterations, self.gradient_evaluations = int(found.iterations), int(found.grad_evals)
        rng = np.random.default_rng(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            values = compiled.constrained_draws(self.unconstrained[None, :], rng)
        self._values = {name: np.asarray(v)[0] for name, v in values.items()}

    def stan_variable(self, var: str) -> np.ndarray | float:
        """One variable at the mode, with its Stan shape (a float for a scalar)."""
        if var not in self._values:
            raise PplError(f"no variable '{var}' in the fit; it has {', '.join(self._values)}")
        value = self._values[var]
        return value.item() if value.ndim == 0 else value.copy()

    def stan_variables(self) -> dict[str, np.ndarray | float]:
        return {name: self.stan_variable(name) for name in self._values}

    @property
    def optimized_params_dict(self) -> dict[str, float]:
        """lp__ and every scalar by Stan's element name (`theta[1]`), as CmdStanPy's."""
        names, matrix = flatten_draws({k: v[None] for k, v in self._values.items()})
        return {"lp__": self.lp, **{n: float(x) for n, x in zip(names, matrix[0], strict=True)}}

    @property
    def optimized_params_np(self) -> np.ndarray:
        return np.array(list(self.optimized_params_dict.values()))

    @property
    def optimized_params_pd(self):
        import pandas as pd

        return pd.DataFrame([self.optimized_params_dict])

    def __repr__(self) -> str:
        state = "converged" if self.converged else "NOT converged"
        return (f"<ppl.Optimum lp__ {self.lp:.6g} (jacobian={self.jacobian}), {state} after "
                f"{self.iterations} iterations>")  # fmt: skip


def optimize(compiled: CompiledModel, *, jacobian: bool = False, inits=None, seed: int = 1,
             iterations: int = OPTIMIZE_ITERATIONS, progress=None) -> Optimum:  # fmt: skip
    """The mode by L-BFGS from `inits` (Stan's uniform(-2, 2) start without them)."""
    if compiled.dim == 0:
        raise PplError("the model has no parameters to optimize")
    rng = np.random.default_rng(seed)
    start = initial_point(compiled, inits, rng)
    density = target_density(compiled, jacobian)
    if start is None:
        start = compiled.random_init(rng, INIT_RADIUS)
    else:
        with np.errstate(all="ignore"):
            at = float(np.asarray(density(start[None, :]))[0])
        if not np.isfinite(at):
            raise PplError(f"inits: the model's log density is {at} at the initial values; "
                           "start where it is finite")  # fmt: skip
    found = find_mode(density, start, rng, max_iter=iterations, progress=progress,
                      label="optimize: mode by L-BFGS")  # fmt: skip
    if not np.isfinite(found.log_density):
        raise PplError("optimize: the log density is not finite anywhere L-BFGS went")
    return Optimum(compiled, found, jacobian=jacobian, seed=seed)


# ---- laplace_sample ---------------------------------------------------------------------------


class LaplaceSampling(Method):
    """How a Laplace sample describes itself in the fit's report and fit.json: q = N(mode,
    (-H)^-1) on the unconstrained scale, H the Hessian of the log density optimize climbed."""

    name = fitted_as = "laplace"
    families = FULL_RANK  # the summary's labels, as --method fullrank's

    def __init__(self, jacobian: bool, supplied: bool) -> None:
        self.jacobian, self.supplied = jacobian, supplied

    def method_text(self, result, rows: str) -> str:
        jac = "with" if self.jacobian else "without"
        return (f"Laplace approximation, N(mode, inverse of minus the Hessian) on the "
                f"unconstrained scale ({jac} the Jacobian)")  # fmt: skip

    def ended_by(self, result, met: bool, iterations: int) -> str:
        if self.supplied:
            return "the mode given (laplace_sample(mode=...))"
        return ("the mode search (L-BFGS met its tolerance)" if met
                else "the mode search's iteration cap (the mode may be off)")  # fmt: skip


def laplace_result(compiled: CompiledModel, mode: Optimum, *, jacobian: bool, draws: int,
                   seed: int, supplied: bool, started: float):  # fmt: skip
    """The FitResult of draws from N(mode, (-H)^-1), judged by PSIS against the model as any
    fit is (ppl.diagnostics.verdict)."""
    if mode.jacobian != jacobian:
        warnings.warn(f"laplace_sample(jacobian={jacobian}) at a mode found with "
                      f"jacobian={mode.jacobian}: the Gaussian is not at its density's mode",
                      PplWarning, stacklevel=4)  # fmt: skip
    density = target_density(compiled, jacobian)
    # D Hessian-vector products at once, each as large as the model's gradient
    check_values(f"the Hessian of {compiled.dim} parameters", float(compiled.dim) ** 2)
    with np.errstate(all="ignore"):
        hessian = hessian_by_hvp(density, mode.unconstrained)
    vi = laplace_start(mode.unconstrained, -hessian) if np.all(np.isfinite(hessian)) else None
    if vi is None:
        raise PplError("laplace_sample: the Hessian at the mode is not negative definite (a "
                       "saddle, a flat direction or no mode): no Gaussian there")  # fmt: skip
    vi.iterations, vi.converged = mode.iterations, mode.converged
    vi.grad_evals = (0 if supplied else mode.gradient_evaluations) + compiled.dim
    how = LaplaceSampling(jacobian, supplied)
    rng = np.random.default_rng(seed)
    chosen = {lat.name: GAUSSIAN for lat in compiled.latents}
    result = make_result(compiled, vi, how, chosen, compiled.log_joint, rng, draws=draws,
                         seed=seed, seconds=time.perf_counter() - started)  # fmt: skip
    vi.elbo = float(result.diagnostics["elbo"])
    vi.elbo_trace = [(0, vi.elbo)]
    judge(result, compiled.log_joint, rng)
    return result


def optimum_at(compiled: CompiledModel, values: dict, *, jacobian: bool, seed: int) -> Optimum:
    """An Optimum at given parameter values (laplace_sample(mode={...})): every parameter
    needed, none searched for."""
    missing = [lat.name for lat in compiled.latents if lat.name not in values]
    if missing:
        raise PplError(f"laplace_sample: mode lacks {', '.join(missing)}")
    point = initial_point(compiled, values, np.random.default_rng(seed))
    with np.errstate(all="ignore"):
        lp = float(np.asarray(target_density(compiled, jacobian)(point[None, :]))[0])
    return Optimum(compiled, Mode(point, lp, point, 0, 0, True), jacobian=jacobian, seed=seed)
