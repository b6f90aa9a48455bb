"""Lowered program (ppl.ir.lowering, after ppl.ir.passes) + data -> a compiled model: an autograd
log joint over the unconstrained latents.

`CompiledModel.log_joint(zeta)` takes an (S, D) array of S unconstrained draws and returns the S
log joint densities, log-Jacobians of the constraining transforms included. The same code, run
on plain numpy arrays, gives the constrained draws, transformed parameters and generated
quantities for the output.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import autograd.numpy as anp
import numpy as np
from autograd.tracer import isbox

import ppl.runtime.linalg_vjps  # noqa: F401 - registers faster autograd VJPs (Cholesky)
from ppl.errors import FitError, ModelError
from ppl.ir.passes import ALL, lowered
from ppl.ir.program import Program
from ppl.language import ast
from ppl.language.checker import CheckedProgram, decl_type
from ppl.language.parser import format_location, locate
from ppl.language.types import SType, fast_ndim, fast_shape, sum_to_batch0
from ppl.library.transforms import Identity, LowerBound, make_transform, transform_kind
from ppl.runtime.evaluator import Evaluator
from ppl.runtime.signals import Devectorise, NeedsPerSample, Rejected
from ppl.runtime.values import ElementList

#: Draws x data rows in one value-only log-joint call: a larger call only moves more memory
#: (a 200,000-row logistic regression's PSIS check: 4.5 s in calls of 200 draws, 1.5 s in 20)
ROW_BUDGET = 4_000_000


#: types whose values transformed data must satisfy (Stan's check_simplex, check_ordered, ...)
_CONSTRAINED = (
    "simplex", "ordered", "positive_ordered", "unit_vector", "sum_to_zero_vector", "cov_matrix",
    "corr_matrix", "cholesky_factor_cov", "cholesky_factor_corr",
)  # fmt: skip


@dataclass
class Latent:
    """A parameter-block variable and where it lives in the unconstrained vector."""

    name: str
    decl: ast.Decl
    stype: SType
    shape: tuple[int, ...]
    ushape: tuple[int, ...]
    offset: int
    size: int
    kind: str  # transform kind
    support: str
    binary: bool = False
    fixed_transform: object = None  # built once when the bounds depend on data only
    bound_names: set[str] = field(default_factory=set)

    @property
    def hyper(self) -> bool:
        """A hyperparameter: a point estimate maximising the ELBO (type-II ML), no q."""
        return self.decl.hyper


def _dependent_support(kind: str, spec: ast.TypeSpec) -> str:
    """Support of a parameter whose bounds involve other parameters (known only at run time)."""
    if kind == "lower_upper":
        return "interval"
    if kind == "lower":
        lower = spec.bounds["lower"]
        return "positive" if isinstance(lower, ast.Num) and lower.value == 0 else "lower"
    if kind == "upper":
        return "upper"
    return "real"


def _names(node) -> set[str]:
    return {e.name for e in ast.iter_exprs(node) if isinstance(e, ast.Var)}


class CompiledModel:
    def __init__(
        self,
        source: CheckedProgram | Program,
        data: dict[str, np.ndarray],
        seed: int = 0,
        vectorise: bool = True,
        passes: tuple[str, ...] = ALL,
    ):
        """`source`: a checked program (lowered here, with `passes`) or a lowered one (another
        model's `ir`: the same statements). `vectorise=False` runs every `for` loop one index at a
        time (testing, debugging)."""
        self.ir = source if isinstance(source, Program) else lowered(source, passes)
        self.checked = checked = self.ir.checked
        self.vectorise = vectorise
        self.program = self.ir.ast  # the statements the log joint runs
        self.devectorised: set = set()
        self.per_sample = False
        self.last_rejection: str | None = None  # the message of the last draw reject() reached
        self.data = dict(data)
        rng = np.random.default_rng(seed)
        ev = Evaluator(
            self.program,
            self.data,
            rng=rng,
            devectorised=self.devectorised,
            vectorise=self.vectorise,
        )
        self._run_block(ev, self.program.transformed_data, "transformed data")
        for name in checked.names_in("transformed_data"):
            v = self.data.get(name)
            if isinstance(v, ElementList):
                v = self.data[name] = v.materialise()
            if v is not None:
                self.data[name] = _without_unit_batch(v, checked.symbols[name].stype)
        self._check_bounds_block(self.program.transformed_data, "transformed data")
        self._check_constrained_transformed_data()
        self._check_transformed_data_finite(data)
        self.latents = self._layout()
        self.dim = sum(lat.size for lat in self.latents)
        #: the longest data array's length: what one draw's evaluation costs grows with
        self.data_rows = max([np.shape(v)[0] for v in self.data.values() if np.ndim(v) > 0] or [1])
        # ... or its largest local (a GP's N x N covariance: 164,000 numbers per draw, where
        # calls of 200 draws moved 1.3 GB per array and ran at 9 ms a draw, 4.6 in calls of 24)
        per_draw = max(self.data_rows, self._largest_local())
        self.draws_per_call = max(1, ROW_BUDGET // max(per_draw, 1))

    def _largest_local(self) -> int:
        """Elements of the largest local or transformed parameter the log joint declares (0
        where a shape is not known before it runs)."""
        largest = 0
        for _, decl in self.ir.statements(("transformed_parameters", "model")):
            if not isinstance(decl, ast.Decl) or decl.spec is None:
                continue
            try:
                largest = max(largest, int(np.prod(self.shape_of(decl.spec))))
            except Exception:  # noqa: BLE001 - a size set by a parameter, say: not counted
                continue
        return largest

    def shape_of(self, spec: ast.TypeSpec) -> tuple[int, ...]:
        """The concrete shape a declaration has with this model's data."""
        return Evaluator(self.program, dict(self.data)).shape_of(spec)

    # ---- set-up
    def _run_block(self, ev: Evaluator, stmts, label: str) -> None:
        while True:
            try:
                ev.run(stmts)
                return
            except Devectorise as d:
                self.devectorised.add(d.loop)
            except NeedsPerSample:
                ev.vectorise = False
                ev.run(stmts)
                return
            except Rejected as r:
                raise ModelError(f"{self.program.filename}: reject() in {label}: {r}") from None

    def _check_transformed_data_finite(self, data: dict) -> None:
        """Transformed data with NaN where the data had none is an error at its declaration (a
        cholesky_decompose of a matrix that is not positive definite, 0 / 0, log of a negative
        number): Stan stops there, where NaN would otherwise flow into every draw."""

        def nan_in(v) -> bool:
            v = np.asarray(getattr(v, "_value", v))
            return v.dtype.kind == "f" and bool(np.isnan(v).any())

        if any(nan_in(v) for v in data.values()):
            return  # NaN given on purpose (Stan's not_a_number in data)
        for s in self.program.transformed_data:
            if isinstance(s, ast.Decl) and nan_in(self.data.get(s.name, 0.0)):
                raise self._decl_error(
                    s, f"transformed data '{s.name}' has NaN values (a cholesky_decompose of a "
                    "matrix that is not positive definite, 0 / 0, the log of a negative "
                    "number ...)")  # fmt: skip

    def _check_constrained_transformed_data(self) -> None:
        """Transformed data of a constrained type (simplex, ordered, cov_matrix, ...) must satisfy
        it, as Stan checks at the end of the block and as data of these types are checked."""
        for s in self.program.transformed_data:
            if not isinstance(s, ast.Decl) or s.spec.kind not in _CONSTRAINED:
                continue
            value = np.asarray(getattr(self.data.get(s.name), "_value", self.data.get(s.name)))
            if value.dtype == object or value.size == 0:
                continue
            shape = value.shape[-2:] if s.spec.kind == "cholesky_factor_cov" else None
            t = make_transform(s.spec.kind, shape=shape)
            for idx in np.ndindex(*value.shape[: value.ndim - t.core_ndim]):
                if not t.in_support(value[idx]):
                    at = f"[{', '.join(str(i + 1) for i in idx)}]" if idx else ""
                    raise self._decl_error(
                        s, f"transformed data '{s.name}{at}' is not a valid {s.spec.kind}; Stan "
                        "checks constrained transformed data as it checks data")  # fmt: skip

    def _check_bounds_block(self, stmts, label):
        for s in stmts:
            if isinstance(s, ast.Decl) and s.spec.bounds and s.name in self.data:
                self._check_value_bounds(s, self.data[s.name], self.data, label)

    def _check_value_bounds(self, decl, value, env, label):
        ev = Evaluator(self.program, dict(env))
        for which in ("lower", "upper"):
            e = decl.spec.bounds.get(which)
            if e is None:
                continue
            bound = np.asarray(ev.expr(e), dtype=float)
            v = np.asarray(value, dtype=float)
            bad = v < bound if which == "lower" else v > bound
            if np.any(bad):
                raise ModelError(
                    f"{self._where(decl)}: {label} variable '{decl.name}' breaks its {which} bound"
                )

    def _layout(self) -> list[Latent]:
        latents = []
        offset = 0
        env = dict(self.data)
        ev = Evaluator(self.program, env)
        param_names: set[str] = set()
        for d in self.program.parameters:
            try:
                shape = ev.shape_of(d.spec, d.name)
            except ModelError:
                raise
            stype = decl_type(d.spec)
            kind = transform_kind(d.spec)
            binary = d.spec.kind == "int"
            bound_names = _names(list(d.spec.bounds.values()))
            fixed = None
            if binary:
                ushape, support = shape, "binary"
            else:
                bounds = {}
                if not (bound_names & param_names):
                    for bname, bexpr in d.spec.bounds.items():
                        bounds[bname] = self._aligned_bound(ev.expr(bexpr), bexpr.type, stype)
                        self._check_bound_shape(d, bname, bounds[bname], tuple(shape))
                        if np.any(np.isnan(np.asarray(bounds[bname], dtype=float))):
                            raise self._decl_error(d, f"the {bname} bound of '{d.name}' is NaN")
                    try:
                        fixed = make_transform(kind, **bounds) if kind != "identity" \
                            else make_transform("identity")  # fmt: skip
                    except (ModelError, ValueError) as e:  # an infinite or crossed bound
                        raise self._decl_error(d, f"'{d.name}': {str(e).splitlines()[0]}") from None
                    t = fixed
                else:  # bounds depend on other parameters: the layout only needs the kind
                    t = (
                        make_transform(
                            kind, **{k: 0.0 if k != "upper" else 1.0 for k in d.spec.bounds}
                        )
                        if kind != "identity"
                        else make_transform("identity")
                    )
                ushape = tuple(t.unconstrained_shape(shape))
                support = t.support if fixed is not None else _dependent_support(kind, d.spec)
            size = int(np.prod(ushape, dtype=int))
            latents.append(
                Latent(
                    d.name,
                    d,
                    stype,
                    tuple(shape),
                    ushape,
                    offset,
                    size,
                    kind,
                    support,
                    binary,
                    fixed,
                    bound_names,
                )
            )
            offset += size
            param_names.add(d.name)
        return latents

    def _check_bound_shape(self, d: ast.Decl, bname: str, value, shape: tuple[int, ...]) -> None:
        """A container bound must have the parameter's own dimensions (scalars broadcast)."""
        bshape = tuple(np.shape(getattr(value, "_value", value)))
        try:
            ok = np.broadcast_shapes(bshape, shape) == shape
        except ValueError:
            ok = False
        if not ok:
            raise self._decl_error(
                d,
                f"the {bname} bound of '{d.name}' has dimensions {list(bshape)} but '{d.name}' "
                f"has dimensions {list(shape)}",
            )

    def _decl_error(self, d: ast.Decl, message: str) -> ModelError:
        """A ModelError located at a declaration, with its source line and a caret."""
        return ModelError(
            format_location(
                self.program.filename, self.program.source, d.pos.line, d.pos.col, message
            )
        )

    @staticmethod
    def _aligned_bound(value, btype: SType, ptype: SType):
        value = value if not isinstance(value, int | float) else float(value)
        nd = anp.ndim(value)
        b = nd - btype.ndim
        if btype.ndim < ptype.ndim and nd:
            shape = anp.shape(value)
            value = anp.reshape(value, shape[:b] + (1,) * (ptype.ndim - btype.ndim) + shape[b:])
        return value

    # ---- the log joint
    def _constrain(self, zeta, env, ev: Evaluator, binary: bool = False):
        S = fast_shape(zeta)[0]
        log_jac = 0.0
        for lat in self.latents:
            u = self._slice(zeta, lat, S)
            if lat.binary:
                if not binary:
                    raise FitError(
                        f"parameter '{lat.name}' is binary; this method needs continuous latents"
                    )
                env[lat.name] = u  # the 0/1 values themselves
                continue
            t = lat.fixed_transform
            if t is None:
                bounds = {
                    k: self._aligned_bound(ev.expr(e), e.type, lat.stype)
                    for k, e in lat.decl.spec.bounds.items()
                }
                t = make_transform(lat.kind, check=False, **bounds)
            # with terms kept, each element's log-Jacobian is its own term
            event_ndim = len(lat.shape) if ev.terms is None else t.core_ndim
            try:
                x, lj = _forward(t, u, event_ndim)
            except ValueError as e:
                raise self._decl_error(
                    lat.decl, f"cannot apply the bounds of '{lat.name}': {e}"
                ) from None
            env[lat.name] = x
            if lat.hyper:
                continue  # a point estimate of the marginal likelihood: no change of density
            if lj is not None and ev.terms is not None:
                ev.terms.append((lat.decl, lj))
                lj = sum_to_batch0(lj)
            if lj is not None:
                if ev.on_statement is not None:
                    ev.on_statement(lat.decl, lj)
                log_jac = _accumulate(log_jac, lj)
        return log_jac

    @staticmethod
    def _slice(zeta, lat: Latent, S: int):
        """The latent's block of zeta as (S, *ushape), with no reshape node when none is needed."""
        if lat.ushape == ():
            return zeta[:, lat.offset]
        u = zeta[:, lat.offset : lat.offset + lat.size]
        if lat.ushape == (lat.size,):
            return u
        return anp.reshape(u, (S,) + lat.ushape)

    def _evaluate(
        self, zeta, with_model: bool = True, rng=None, on_statement=None, terms=None, binary=False
    ):
        env = dict(self.data)
        ev = Evaluator(
            self.program, env, rng=rng, devectorised=self.devectorised, vectorise=self.vectorise
        )
        ev.on_statement = on_statement
        ev.terms = terms
        ev.draws_may_fail = True
        ev.draws_hint = int(zeta.shape[0])  # a vectorised loop's batch is its rows times these
        log_jac = self._constrain(zeta, env, ev, binary=binary or terms is not None)
        ev.run(self.program.transformed_parameters)
        if with_model:
            ev.run(self.program.model)
        if ev.rejected is not None:
            self.last_rejection = ev.rejected
        return env, ev.target, log_jac

    def log_joint(self, zeta, binary: bool = False):
        """Log joint density (up to the data's normalising constant) of S unconstrained draws.

        `binary=True` lets binary latents take their 0/1 values (score-function methods only).
        """
        S = fast_shape(zeta)[0]
        if S > self.draws_per_call and not isbox(zeta):
            k = self.draws_per_call
            return np.concatenate([self.log_joint(zeta[i : i + k], binary) for i in range(0, S, k)])
        if not self.per_sample:
            while True:
                try:
                    _, target, log_jac = self._evaluate(zeta, binary=binary)
                    return _total(target, log_jac, S)
                except Devectorise as d:
                    self.devectorised.add(d.loop)
                except NeedsPerSample:
                    self.per_sample = True
                    break
                except Rejected as r:
                    self.last_rejection = str(r)
                    if S == 1:
                        return anp.full(1, -np.inf)
                    # some draw of this batch was rejected: each half on its own, down to the
                    # rejected draws (a few bad draws cost a few more calls, not S of them)
                    half = S // 2
                    return anp.concatenate([self.log_joint(zeta[:half], binary),
                                            self.log_joint(zeta[half:], binary)])  # fmt: skip
        out = []
        for s in range(S):
            try:
                _, target, log_jac = self._evaluate(zeta[s : s + 1], binary=binary)
                out.append(target + log_jac + anp.zeros(1))
            except Rejected as r:
                self.last_rejection = str(r)
                out.append(anp.full(1, -np.inf))
            except Devectorise as d:
                self.devectorised.add(d.loop)
                return self.log_joint(zeta, binary)
        return anp.concatenate(out)

    def log_joint_scaled(self, zeta, scales: dict[int, float]):
        """The log joint with each statement whose id is in `scales` weighted by it.

        A minibatch of B of N rows gives an unbiased, differentiable estimate with the per-row
        statements weighted N / B (ppl.inference.subsample). Evaluated for all draws at once.
        """
        return self._weighted(zeta, scales, rest=True)

    def log_joint_part(self, zeta, weights: dict[int, float]):
        """Only the statements whose ids are in `weights`, each times its weight: a partition's
        per-row terms, which a Dask worker adds up (ppl.distributed). All draws at once."""
        return self._weighted(zeta, weights, rest=False)

    def _weighted(self, zeta, weights: dict[int, float], rest: bool):
        """The weighted statements, plus (`rest`) everything else at weight 1."""
        S = fast_shape(zeta)[0]
        extra: list = []

        def record(statement, lp):
            weight = weights.get(id(statement))
            if weight is not None:
                extra.append((weight - 1.0) * lp if rest else weight * lp)

        while True:
            extra.clear()
            try:
                _, target, log_jac = self._evaluate(zeta, on_statement=record)
            except Devectorise as d:
                self.devectorised.add(d.loop)
                continue
            except (NeedsPerSample, Rejected) as exc:
                raise ModelError(
                    "--batch needs a model that can be evaluated for all draws at once"
                ) from exc
            total = _total(target, log_jac, S) if rest else anp.zeros(S)
            for lp in extra:
                total = total + lp
            return total

    def log_terms(self, zeta: np.ndarray) -> tuple[np.ndarray, list[tuple[object, np.ndarray]]]:
        """The log joint of S draws (binary latents allowed) and its terms, kept apart.

        Terms, in execution order: (declaration, elementwise log-Jacobian) for each constrained
        latent, then (statement, elementwise log density) for each run of a `~` or `target +=`
        statement. Score-function methods (BBVI) need only these values, no gradients; Markov
        blankets pick the terms each latent element appears in. Raises NeedsPerSample when the
        model cannot be evaluated for all draws at once.
        """
        S = zeta.shape[0]
        while True:
            terms: list = []
            try:
                _, target, log_jac = self._evaluate(zeta, terms=terms)
                return np.asarray(_total(target, log_jac, S), dtype=float), terms
            except Devectorise as d:
                self.devectorised.add(d.loop)

    # ---- diagnostics (`ppl check`)
    def diagnose(self, zeta: np.ndarray) -> str | None:
        """Where the log density or its gradient first stops being finite at one point.

        Evaluates the log density at `zeta` (shape (D,)) with each statement's contribution (and
        each parameter's log-Jacobian) kept apart, differentiates every contribution, and returns a
        message naming the first statement, in execution order, whose contribution or gradient is
        not finite; None when everything is finite.
        """
        from autograd import grad

        def contributions(z):
            parts: dict = {}

            def record(node, lp):
                parts[node] = parts[node] + anp.sum(lp) if node in parts else anp.sum(lp)

            while True:
                parts.clear()
                try:
                    self._evaluate(anp.reshape(z, (1, -1)), on_statement=record)
                    return parts
                except Devectorise as d:
                    self.devectorised.add(d.loop)

        z0 = np.asarray(zeta, dtype=float)
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # autograd: "output seems independent of input"
                parts = contributions(z0)
                for k, (node, value) in enumerate(parts.items()):
                    value = float(np.asarray(getattr(value, "_value", value)))
                    what, text = self._describe_node(node)
                    if not np.isfinite(value):
                        return (
                            f"{self._where(node)}: {what} is {value:g} at the initial point{text}"
                        )
                    # differentiate this contribution alone: a zero cotangent on another one
                    # would still turn its infinite partial derivatives into NaN
                    g = grad(lambda z, k=k: list(contributions(z).values())[k])(z0)
                    if not np.all(np.isfinite(g)):
                        return (
                            f"{self._where(node)}: the gradient of {what} is not finite at the "
                            f"initial point{text}"
                        )
        except Rejected as e:
            return f"{self.program.filename}: reject() was reached at the initial point: {e}"
        except NeedsPerSample:
            return None
        return None

    def _where(self, node) -> str:
        """`file:line` of a node (in the included file it came from: ppl.language.includes)."""
        return locate(self.program.filename, self.program.source, node.pos.line)

    def _describe_node(self, node) -> tuple[str, str]:
        if isinstance(node, ast.Decl):
            return f"the log-Jacobian of '{node.name}'", f": {self._statement_text(node)}"
        return "the log density", f": {self._statement_text(node)}"

    def _statement_text(self, node) -> str:
        """The statement's source text from its position to its `;`, on one line."""
        lines = self.program.source.splitlines()
        line, col = node.pos.line, node.pos.col
        if not 0 < line <= len(lines):
            return ""
        text = lines[line - 1][max(col - 1, 0) :]
        k = line
        while ";" not in text and k < len(lines):
            text += " " + lines[k].strip()
            k += 1
        text = text.split(";")[0]
        return " ".join(text.split())

    # ---- outputs
    def constrained_draws(
        self, zeta: np.ndarray, rng: np.random.Generator
    ) -> dict[str, np.ndarray]:
        """Parameters, transformed parameters and generated quantities for each row of zeta."""
        S = zeta.shape[0]
        try:
            env, _, _ = self._evaluate(zeta, with_model=False, binary=True)
            env = self._materialise(env)
        except (NeedsPerSample, Rejected):
            return self._per_draw_outputs(zeta, rng)
        out = {}
        for name in self.checked.names_in("parameters") + self.checked.names_in(
            "transformed_parameters"
        ):
            out[name] = self._with_sample_axis(env[name], self.checked.symbols[name].stype, S)
        if self.program.generated_quantities:
            ev = Evaluator(
                self.program, env, rng=rng, devectorised=self.devectorised, vectorise=self.vectorise
            )
            try:
                self._run_block(ev, self.program.generated_quantities, "generated quantities")
            except NeedsPerSample:
                return self._per_draw_outputs(zeta, rng)
            env = self._materialise(env)
            for name in self.checked.names_in("generated_quantities"):
                out[name] = self._with_sample_axis(env[name], self.checked.symbols[name].stype, S)
        return out

    def parameter_values(self, zeta: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
        """The named parameters' constrained values for each row of zeta, without the
        transformed parameters or the model block: cheap enough to run per block of rows."""
        env = dict(self.data)
        ev = Evaluator(self.program, env, devectorised=self.devectorised, vectorise=self.vectorise)
        ev.draws_hint = int(zeta.shape[0])
        self._constrain(zeta, env, ev, binary=True)
        env = self._materialise(env)
        S = zeta.shape[0]
        return {n: self._with_sample_axis(env[n], self.checked.symbols[n].stype, S) for n in names}

    def _per_draw_outputs(self, zeta, rng):
        rows = []
        for s in range(zeta.shape[0]):
            model = self
            env, _, _ = model._evaluate(zeta[s : s + 1], with_model=False, binary=True)
            env = self._materialise(env)
            ev = Evaluator(self.program, env, rng=rng, vectorise=False)
            try:
                ev.run(self.program.generated_quantities)
            except Rejected as r:
                raise FitError(f"reject() in generated quantities: {r}") from None
            env = self._materialise(env)
            names = (
                self.checked.names_in("parameters")
                + self.checked.names_in("transformed_parameters")
                + self.checked.names_in("generated_quantities")
            )
            rows.append(
                {n: self._with_sample_axis(env[n], self.checked.symbols[n].stype, 1) for n in names}
            )
        return {n: np.concatenate([r[n] for r in rows]) for n in rows[0]}

    @staticmethod
    def _materialise(env):
        return {k: (v.materialise() if isinstance(v, ElementList) else v) for k, v in env.items()}

    @staticmethod
    def _with_sample_axis(value, stype: SType, S: int) -> np.ndarray:
        arr = np.asarray(getattr(value, "_value", value))
        b = arr.ndim - stype.ndim
        if b == 0:
            arr = arr[None]
        elif b > 1:
            arr = (
                arr.reshape((arr.shape[0],) + arr.shape[b:])
                if all(s == 1 for s in arr.shape[1:b])
                else arr
            )
        return np.broadcast_to(arr, (S,) + arr.shape[1:]).copy()

    def random_init(self, rng: np.random.Generator, radius: float = 2.0) -> np.ndarray:
        """Stan's default initialisation: uniform(-2, 2) on the unconstrained scale."""
        return rng.uniform(-radius, radius, size=self.dim)


def _without_unit_batch(value, stype: SType):
    """A transformed-data value as data: its type axes only. A vectorised loop that fills it
    leaves a leading axis of size 1 (the draws axis), which would make the array look per-draw
    where it is used, e.g. as a multi-index."""
    nd = np.ndim(value)
    if nd <= stype.ndim or any(k != 1 for k in np.shape(value)[: nd - stype.ndim]):
        return value
    return np.reshape(value, np.shape(value)[nd - stype.ndim :])


def _is_zero(b) -> bool:
    v = getattr(b, "_value", b)
    return isinstance(v, float | int | np.ndarray) and np.ndim(v) == 0 and float(v) == 0.0


def _forward(t, u, event_ndim: int):
    """`t.forward(u, event_ndim)` with the log-Jacobian None when it is identically zero, and
    without the nodes that add zero (`exp(u) + 0`, `u + zeros`) for the common transforms: the
    values are the same, the graph that autograd differentiates is smaller."""
    cls = type(t)
    if cls is Identity and event_ndim >= t.core_ndim:
        return u, None
    if cls is LowerBound and not t._mixed and _is_zero(t.lower) and event_ndim >= t.core_ndim:
        nd = fast_ndim(u)
        if event_ndim > nd:
            raise ValueError(f"cannot sum {event_ndim} event axes of an array with {nd} axes")
        lj = anp.sum(u, axis=tuple(range(nd - event_ndim, nd))) if event_ndim else u
        return anp.exp(u), lj
    return t.forward(u, event_ndim)


def _accumulate(total, term):
    """total + term, without a `0.0 + term` node for the first term."""
    if total.__class__ is float and total == 0.0 and fast_ndim(term) >= 1:
        return term
    return total + term


def _total(target, log_jac, S: int):
    """target + log_jac as an (S,) float array (the zeros add only when broadcasting is needed)."""
    if not (log_jac.__class__ is float and log_jac == 0.0):
        target = _accumulate(target, log_jac)
    dtype = getattr(target, "dtype", None)
    if dtype is not None and dtype.kind == "f" and fast_shape(target) == (S,):
        return target
    return target + anp.zeros(S)
