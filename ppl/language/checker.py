"""Name resolution and type checking: annotates every expression with its static type.

Errors name the variable or function and its types, at file:line:col, before any data is read.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from ppl.errors import ModelError
from ppl.language import ast, user_functions
from ppl.language.parser import format_location
from ppl.language.types import INT, MATRIX, REAL, ROW_VECTOR, SPEC_KIND, VECTOR, SType
from ppl.library.distributions import get_distribution
from ppl.library.functions import CONSTANTS, SignatureError, lookup, matmul_type
from ppl.library.ode import SOLVERS
from ppl.library.stan_index import STAN_FUNCTIONS

BLOCKS = (
    "data",
    "transformed_data",
    "parameters",
    "transformed_parameters",
    "model",
    "generated_quantities",
)

DIST_SUFFIXES = ("_lpdf", "_lpmf", "_lupdf", "_lupmf", "_log", "_rng")


#: a cholesky_factor_cov[M, N] has M >= N (Stan's check_cholesky_factor)
CHOLESKY_ROWS = "cholesky_factor_cov[M, N] needs M >= N, got M = {} and N = {}"


@dataclass
class Symbol:
    name: str
    stype: SType
    block: str  # one of BLOCKS, or "local" / "loop"
    decl: ast.Decl | None = None
    readonly: bool = False


@dataclass
class CheckedProgram:
    program: ast.Program
    symbols: dict[str, Symbol] = field(default_factory=dict)  # block-level variables
    #: the program lowered and optimised, by the passes that ran (ppl.ir.passes.lowered)
    lowered: dict[tuple[str, ...], object] = field(default_factory=dict, repr=False,
                                                   compare=False)  # fmt: skip

    def names_in(self, block: str) -> list[str]:
        return [s.name for s in self.symbols.values() if s.block == block]


def decl_type(spec: ast.TypeSpec) -> SType:
    base = "int" if spec.kind == "int" else "real"
    return SType(base, SPEC_KIND[spec.kind], len(spec.array_sizes))


def is_distribution_name(name: str) -> bool:
    """True for a distribution's own name in any capitalisation (`poisson_log`, `Gamma`)."""
    from ppl.library.distributions import DISTRIBUTIONS

    key = name.lower().replace("_", "")
    return any(key == n.replace("_", "") for n in DISTRIBUTIONS)


def split_dist_call(name: str) -> tuple[str, str] | None:
    """`normal_lpdf` -> ("normal", "_lpdf"); None if `name` is not a distribution function."""
    if is_distribution_name(name):
        return None
    for suffix in DIST_SUFFIXES:
        if name.endswith(suffix):
            base = name[: -len(suffix)]
            if get_distribution(base) is not None and lookup(name) is None:
                return base, suffix
    return None


def _index_type(t: SType, items: list[ast.IndexItem], item_types: list[SType | None]) -> SType:
    dims = ["a"] * t.adims + {
        "scalar": [],
        "vector": ["v"],
        "row_vector": ["r"],
        "matrix": ["mr", "mc"],
    }[t.kind]
    if len(items) > len(dims):
        raise SignatureError(f"too many indexes ({len(items)}) for a value of type {t}")
    kept = []
    for i, d in enumerate(dims):
        if i >= len(items):
            kept.append(d)
            continue
        item, it = items[i], item_types[i]
        if item.kind == "single" and it is not None and it.is_scalar:
            continue  # dimension dropped
        kept.append(d)
    adims = kept.count("a")
    rest = [d for d in kept if d != "a"]
    kind = {
        (): "scalar",
        ("v",): "vector",
        ("r",): "row_vector",
        ("mr", "mc"): "matrix",
        ("mr",): "vector",
        ("mc",): "row_vector",
    }[tuple(rest)]
    return SType(t.base, kind, adims)


class Checker:
    def __init__(self, program: ast.Program):
        self.program = program
        self.scopes: list[dict[str, Symbol]] = [{}]
        self.block = "data"
        self.loop_depth = 0
        self.user_functions: dict[str, user_functions.Signature] = {}
        self.returns: SType | None = None  # the return type of the function being checked
        self._statement_call = False  # the call being checked is a statement (a void function)

    # ---- errors and scopes
    def error(self, node, message: str) -> ModelError:
        pos = getattr(node, "pos", None) or ast.Pos(0, 0)
        return ModelError(
            format_location(self.program.filename, self.program.source, pos.line, pos.col, message)
        )

    def lookup(self, name: str) -> Symbol | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def declare(self, node, name: str, stype: SType, block: str, decl=None, readonly=False):
        if self.lookup(name) is not None:
            raise self.error(node, f"'{name}' is already declared")
        if lookup(name) is not None or get_distribution(name) is not None:
            if name not in ("e",):
                pass  # shadowing a function name is allowed, as in Stan 2.33+
        sym = Symbol(name, stype, block, decl, readonly)
        self.scopes[-1][name] = sym
        return sym

    def all_names(self) -> list[str]:
        return [n for scope in self.scopes for n in scope]

    # ---- program
    def check(self) -> CheckedProgram:
        prog = self.program
        out = CheckedProgram(prog)
        user_functions.declare_functions(self, prog.functions)
        for block in BLOCKS:
            self.block = block
            stmts = getattr(prog, block)
            for stmt in stmts:
                if block in ("data", "parameters"):
                    self.check_decl(stmt, toplevel=True)
                else:
                    self.check_stmt(stmt, toplevel=True)
        out.symbols = dict(self.scopes[0])
        return out

    # ---- statements
    def check_decl(self, d: ast.Decl, toplevel: bool = False):
        spec = d.spec
        for size in spec.sizes + spec.array_sizes:
            t = self.expr(size)
            if not (t.is_int and t.is_scalar):
                raise self.error(size, f"the size of '{d.name}' must be an integer, not {t}")
        rows_cols = [getattr(e, "value", None) for e in spec.sizes]
        if spec.kind == "cholesky_factor_cov" and len(rows_cols) == 2 and None not in rows_cols:
            if rows_cols[0] < rows_cols[1]:  # Stan's rule; sizes from data: ppl.runtime
                raise self.error(spec.sizes[0], CHOLESKY_ROWS.format(*rows_cols))
        for bname, bexpr in spec.bounds.items():
            t = self.expr(bexpr)
            if t.ndim and bname in ("lower", "upper"):
                pass  # container bounds are allowed, matched elementwise
        stype = decl_type(spec)
        if self.block == "parameters" and spec.kind == "int":
            lo, hi = spec.bounds.get("lower"), spec.bounds.get("upper")
            binary = (
                isinstance(lo, ast.Num)
                and lo.value == 0
                and isinstance(hi, ast.Num)
                and hi.value == 1
            )
            if not binary:
                raise self.error(
                    d,
                    f"integer parameter '{d.name}' must be binary: declare it "
                    "int<lower=0, upper=1> (other discrete latents are not supported)",
                )
        if d.init is not None:
            if self.block in ("data", "parameters"):
                raise self.error(
                    d.init, f"'{d.name}' cannot be given a value in the {self.block} block"
                )
            rt = self.expr(d.init)
            self.check_assignable(d.init, stype, rt, d.name)
        block = self.block if toplevel else "local"
        readonly = self.block in ("data", "parameters")
        self.declare(d, d.name, stype, block, d, readonly)

    def check_assignable(self, node, target: SType, value: SType, name: str):
        ok = (
            target.kind == value.kind
            and target.adims == value.adims
            and not (target.is_int and not value.is_int)
        )
        if not ok:
            raise self.error(
                node, f"cannot assign a value of type {value} to '{name}' of type {target}"
            )

    def check_stmt(self, s: ast.Stmt, toplevel: bool = False):
        if isinstance(s, ast.Decl):
            self.check_decl(s, toplevel)
        elif isinstance(s, ast.Assign):
            self.check_assign(s)
        elif isinstance(s, ast.Tilde):
            self.check_tilde(s)
        elif isinstance(s, ast.TargetInc):
            if self.block != "model" and not user_functions.in_lp_function(self.block):
                raise self.error(
                    s, "'target +=' is only allowed in the model block and _lp functions"
                )
            self.expr(s.expr)
        elif isinstance(s, ast.For):
            for e in (s.lo, s.hi):
                t = self.expr(e)
                if not (t.is_int and t.is_scalar):
                    raise self.error(e, f"loop bounds must be integers, not {t}")
            self.scopes.append({})
            self.declare(s, s.var, INT, "loop", readonly=True)
            self.loop_depth += 1
            self.check_scoped(s.body)
            self.loop_depth -= 1
            self.scopes.pop()
        elif isinstance(s, ast.ForEach):
            t = self.expr(s.iterable)
            if t.is_scalar:
                raise self.error(s.iterable, f"cannot loop over a value of type {t}")
            self.scopes.append({})
            self.declare(
                s,
                s.var,
                t.element() if t.adims else t.with_base(t.base).__class__(t.base, "scalar"),
                "loop",
                readonly=True,
            )
            self.loop_depth += 1
            self.check_scoped(s.body)
            self.loop_depth -= 1
            self.scopes.pop()
        elif isinstance(s, ast.While):
            self.scalar_condition(s.cond)
            self.loop_depth += 1
            self.check_scoped(s.body)
            self.loop_depth -= 1
        elif isinstance(s, ast.If):
            self.scalar_condition(s.cond)
            self.check_scoped(s.then)
            if s.otherwise is not None:
                self.check_scoped(s.otherwise)
        elif isinstance(s, ast.Block):
            self.scopes.append({})
            for inner in s.stmts:
                self.check_stmt(inner)
            self.scopes.pop()
        elif isinstance(s, ast.Return):
            user_functions.check_return(self, s)
        elif isinstance(s, ast.Print | ast.Reject):
            if isinstance(s, ast.Print) and self.block != "transformed_data":
                raise self.error(
                    s,
                    f"print() is supported in transformed data only, not in the "
                    f"{self.block.replace('_', ' ')} block: there ppl evaluates statements on "
                    "batches of draws at every optimisation step, where Stan prints once per "
                    "evaluation; remove it",
                )
            for a in s.args:
                if not isinstance(a, ast.Str):
                    self.expr(a)
        elif isinstance(s, ast.Break | ast.Continue):
            if not self.loop_depth:
                raise self.error(s, "'break' and 'continue' must be inside a loop")
        elif isinstance(s, ast.CallStmt):
            self._statement_call = True
            self.expr(s.call)
            sig = self.user_functions.get(s.call.name)
            if sig is None or sig.returns is not None:
                raise self.error(
                    s, f"'{s.call.name}' returns a value: only void functions can be statements"
                )
        else:  # pragma: no cover - the parser builds nothing else
            raise self.error(s, f"unsupported statement {type(s).__name__}")

    def check_scoped(self, s: ast.Stmt):
        self.scopes.append({})
        self.check_stmt(s)
        self.scopes.pop()

    def scalar_condition(self, e: ast.Expr):
        t = self.expr(e)
        if not t.is_scalar:
            raise self.error(e, f"a condition must be a scalar, not {t}")

    def check_assign(self, s: ast.Assign):
        lhs = s.lhs
        base = lhs
        while isinstance(base, ast.Index):
            base = base.base
        if not isinstance(base, ast.Var):
            raise self.error(
                lhs, "the left side of an assignment must be a variable, optionally indexed"
            )
        sym = self.lookup(base.name)
        if sym is None and base.name == "jacobian" and s.op == "+=":
            raise self.error(
                lhs, "`jacobian +=` (user-defined change of variables) is not supported"
            )
        if sym is None:
            raise self.error(base, self.undefined_message(base.name))
        if sym.readonly:
            what = {"loop": "loop variable"}.get(
                sym.block, f"{sym.block.replace('_', ' ')} variable"
            )
            raise self.error(lhs, f"cannot assign to {what} '{base.name}'")
        if sym.block != "local" and sym.block != self.block:
            raise self.error(
                lhs,
                f"cannot assign to '{base.name}' outside the block that declares it "
                f"({sym.block.replace('_', ' ')})",
            )
        lt = self.expr(lhs)
        rt = self.expr(s.rhs)
        if s.op == "=":
            self.check_assignable(s.rhs, lt, rt, base.name)
        else:
            op = s.op[:-1]
            result = self.binop_type(s, op, lt, rt)
            self.check_assignable(s.rhs, lt, result, base.name)

    def check_tilde(self, s: ast.Tilde):
        if self.block != "model" and not user_functions.in_lp_function(self.block):
            raise self.error(s, "'~' statements are only allowed in the model block")
        sig = user_functions.tilde_function(self, s)
        if sig is not None:
            user_functions.check_user_tilde(self, s, sig)
            return
        dist = get_distribution(s.dist) if is_distribution_name(s.dist) else None
        if dist is None:
            raise self.error(s, self.unknown_distribution(s.dist))
        lt = self.expr(s.lhs)
        arg_types = [self.expr(a) for a in s.args]
        self.check_dist_args(s, dist, lt, arg_types)
        if s.truncation is not None:
            self.check_truncation(s, dist, lt)

    def check_truncation(self, s: ast.Tilde, dist, value_type: SType):
        from ppl.library.distributions.cdfs import CDFS

        if dist.value_ndim or dist.name not in CDFS:
            raise self.error(
                s,
                f"truncation T[lower, upper] needs a univariate distribution with a CDF; "
                f"{dist.name} has none in ppl",
            )
        for e in s.truncation:
            if e is not None:
                t = self.expr(e)
                if t.ndim > value_type.ndim:
                    raise self.error(
                        e,
                        f"a truncation bound of type {t} does not fit a value of type {value_type}",
                    )

    def check_dist_args(self, node, dist, value_type: SType, arg_types: list[SType]):
        if len(arg_types) != len(dist.params):
            raise self.error(
                node,
                f"{dist.name} takes {len(dist.params)} arguments "
                f"({', '.join(dist.params)}), got {len(arg_types)}",
            )
        if value_type.ndim < dist.value_ndim:
            raise self.error(
                node,
                f"{dist.name} needs a {'vector' if dist.value_ndim else 'value'} "
                f"on the left of '~', got {value_type}",
            )
        min_ndims = dist.param_min_ndims or dist.param_ndims
        for pname, pnd, t in zip(dist.params, min_ndims, arg_types, strict=True):
            if t.ndim < pnd:
                raise self.error(
                    node,
                    f"argument {pname} of {dist.name} must have at least {pnd} "
                    f"dimension(s), got {t}",
                )

    def unknown_distribution(self, name: str) -> str:
        from ppl.library.distributions import DISTRIBUTIONS

        if name in STAN_FUNCTIONS:
            return unsupported_stan_function(name)

        close = difflib.get_close_matches(name.lower(), list(DISTRIBUTIONS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return f"unknown distribution '{name}'{hint}"

    def undefined_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.all_names(), n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return f"undefined name '{name}'{hint}"

    # ---- expressions
    def expr(self, e: ast.Expr) -> SType:
        t = self._expr(e)
        e.type = t
        return t

    def _expr(self, e: ast.Expr) -> SType:
        if isinstance(e, ast.Num):
            return INT if isinstance(e.value, int) else REAL
        if isinstance(e, ast.Var):
            sym = self.lookup(e.name)
            if sym is None:
                raise self.error(e, self.undefined_message(e.name))
            if sym.block == "generated_quantities" and self.block != "generated_quantities":
                raise self.error(e, f"'{e.name}' is a generated quantity and cannot be used here")
            return sym.stype
        if isinstance(e, ast.BinOp):
            lt, rt = self.expr(e.left), self.expr(e.right)
            return self.binop_type(e, e.op, lt, rt)
        if isinstance(e, ast.UnOp):
            t = self.expr(e.operand)
            if e.op == "neg":
                return t
            if e.op == "not":
                if not t.is_scalar:
                    raise self.error(e, f"'!' needs a scalar, not {t}")
                return INT
            if t.adims or t.is_scalar:
                if t.is_scalar:
                    return t
                raise self.error(e, f"cannot transpose {t}")
            return {"vector": ROW_VECTOR, "row_vector": VECTOR, "matrix": MATRIX}[t.kind]
        if isinstance(e, ast.Ternary):
            self.scalar_condition(e.cond)
            a, b = self.expr(e.if_true), self.expr(e.if_false)
            if (a.kind, a.adims) != (b.kind, b.adims):
                raise self.error(e, f"the branches of '?:' have different types {a} and {b}")
            return a if a.base == b.base else a.with_base("real")
        if isinstance(e, ast.Index):
            bt = self.expr(e.base)
            item_types = []
            for item in e.items:
                it = None
                for sub in (item.lo, item.hi):
                    if sub is not None:
                        st = self.expr(sub)
                        if not st.is_int or (item.kind != "single" and not st.is_scalar):
                            raise self.error(sub, f"an index must be an integer, not {st}")
                        if item.kind == "single" and not (
                            st.is_scalar or (st.adims == 1 and st.kind == "scalar")
                        ):
                            raise self.error(
                                sub, f"an index must be an integer or an integer array, not {st}"
                            )
                        it = st
                item_types.append(it)
            try:
                return _index_type(bt, e.items, item_types)
            except SignatureError as err:
                raise self.error(e, str(err)) from None
        if isinstance(e, ast.ArrayExpr):
            types = [self.expr(i) for i in e.items]
            first = types[0]
            for t in types[1:]:
                if (t.kind, t.adims) != (first.kind, first.adims):
                    raise self.error(e, f"array elements have different types {first} and {t}")
            base = "int" if all(t.is_int for t in types) else "real"
            return SType(base, first.kind, first.adims + 1)
        if isinstance(e, ast.RowVectorExpr):
            types = [self.expr(i) for i in e.items]
            if all(t.is_scalar for t in types):
                return ROW_VECTOR
            if all(t.kind == "row_vector" and not t.adims for t in types):
                return MATRIX
            raise self.error(e, "[...] holds scalars (a row vector) or row vectors (a matrix)")
        if isinstance(e, ast.Call):
            return self.call_type(e)
        if isinstance(e, ast.Str):
            return REAL
        raise self.error(e, f"unsupported expression {type(e).__name__}")  # pragma: no cover

    def binop_type(self, node, op: str, lt: SType, rt: SType) -> SType:
        both_int = lt.is_int and rt.is_int
        try:
            if op == "*":
                return matmul_type(lt, rt)
            if op in ("+", "-", ".*", "./", "/", "^", ".^"):
                if op == "/" and not rt.is_scalar:
                    if lt.is_scalar or (lt.kind, lt.adims) != (rt.kind, rt.adims):
                        raise SignatureError(f"cannot divide {lt} by {rt}")
                if (lt.adims or rt.adims) and not (lt.is_scalar or rt.is_scalar):
                    if op in ("+", "-") and lt != rt:
                        raise SignatureError(f"cannot combine {lt} and {rt}")
                shaped = [t for t in (lt, rt) if not t.is_scalar]
                if len(shaped) == 2 and (lt.kind, lt.adims) != (rt.kind, rt.adims):
                    raise SignatureError(f"operands of '{op}' have different shapes: {lt} and {rt}")
                result = shaped[0] if shaped else lt
                base = "int" if both_int and op in ("+", "-", ".*", "/") else "real"
                if op in ("^", ".^"):
                    base = "real"
                return result.with_base(base)
            if op in ("%", "%/%"):
                if not (both_int and lt.is_scalar and rt.is_scalar):
                    raise SignatureError(f"'{op}' needs two integers, got {lt} and {rt}")
                return INT
            if op in ("==", "!=", "<", "<=", ">", ">=", "&&", "||"):
                if not (lt.is_scalar and rt.is_scalar):
                    raise SignatureError(f"'{op}' compares scalars, got {lt} and {rt}")
                return INT
        except SignatureError as err:
            raise self.error(node, str(err)) from None
        raise self.error(node, f"unknown operator '{op}'")

    def call_type(self, e: ast.Call) -> SType:
        name = e.name
        sig = self.user_functions.get(name)
        as_statement, self._statement_call = self._statement_call, False
        if name in SOLVERS:
            return user_functions.ode_call_type(self, e, SOLVERS[name])
        if sig is not None:
            if sig.returns is None and not as_statement:
                raise self.error(e, f"void function '{name}' has no value to use here")
            arg_types = [self.expr(a) for a in e.args]
            return user_functions.call_type(self, e, sig, arg_types)
        unknown = lookup(name) is None and name not in CONSTANTS and split_dist_call(name) is None
        if unknown and name in STAN_FUNCTIONS:  # before its arguments (an ODE's function name)
            raise self.error(e, unsupported_stan_function(name))
        arg_types = [self.expr(a) for a in e.args]
        if name in CONSTANTS and not arg_types:
            return REAL
        fn = lookup(name)
        if fn is not None:
            if fn.nargs is not None and len(arg_types) not in fn.nargs:
                counts = " or ".join(str(n) for n in fn.nargs)
                raise self.error(e, f"{name} takes {counts} argument(s), got {len(arg_types)}")
            try:
                return fn.type_rule(arg_types)
            except SignatureError as err:
                raise self.error(e, f"{name}: {err}") from None
        split = split_dist_call(name)
        if split is not None:
            base, suffix = split
            dist = get_distribution(base)
            if suffix == "_rng":
                if not dist.has_rng:
                    raise self.error(e, f"{name} is not supported")
                if not user_functions.rng_allowed(self.block):
                    raise self.error(
                        e,
                        f"{name} can only be used in transformed data or generated quantities "
                        "(and in _rng functions)",
                    )
                if len(arg_types) != len(dist.params):
                    raise self.error(
                        e,
                        f"{name} takes {len(dist.params)} arguments "
                        f"({', '.join(dist.params)}), got {len(arg_types)}",
                    )
                extra = [t.ndim - nd for t, nd in zip(arg_types, dist.param_ndims, strict=True)]
                base_t = "int" if dist.discrete else "real"
                if dist.value_ndim:
                    return SType(base_t, "vector", max(extra, default=0))
                return SType(base_t, "scalar", 1 if max(extra, default=0) > 0 else 0)
            if not arg_types:
                raise self.error(e, f"{name} needs the value as its first argument")
            if dist.discrete != (suffix in ("_lpmf", "_lupmf")) and suffix != "_log":
                right = "_lpmf" if dist.discrete else "_lpdf"
                raise self.error(
                    e,
                    f"use {base}{right} for the {'discrete' if dist.discrete else 'continuous'} "
                    f"distribution {base}",
                )
            self.check_dist_args(e, dist, arg_types[0], arg_types[1:])
            return REAL
        if name in STAN_FUNCTIONS:
            raise self.error(e, unsupported_stan_function(name))
        close = difflib.get_close_matches(name, list(_known_function_names()), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise self.error(e, f"unknown function '{name}'{hint}")


#: the features whole chapters of the Functions Reference belong to
_CHAPTER_FEATURES = {
    "higher_order_functions": "DAE solvers, algebraic solvers, integrate_1d, map_rect and "
    "reduce_sum are not supported",
    "deprecated_functions": "the deprecated algebraic solvers are not supported",
    "complex_valued_basic_functions": "complex numbers are not supported",
    "complex_matrix_operations": "complex numbers are not supported",
    "sparse_matrix_operations": "sparse matrices are not supported",
    "hidden_markov_models": "the hidden Markov model functions are not supported yet",
    "embedded_laplace": "the embedded Laplace approximation is not supported",
    "transform_functions": "the constraint transform functions are not supported yet "
    "(declare the variable with its constrained type instead)",
}


def unsupported_stan_function(name: str) -> str:
    """The message for a name Stan defines but ppl does not (yet)."""
    chapter = STAN_FUNCTIONS[name]
    feature = _CHAPTER_FEATURES.get(chapter)
    if feature is None:
        feature = "ppl does not support it yet (see docs/language.md, Coverage)"
    return f"'{name}' is a Stan function ({chapter.replace('_', ' ')}): {feature}"


def _known_function_names():
    from ppl.library.distributions import DISTRIBUTIONS
    from ppl.library.functions import LIBRARY

    names = set(LIBRARY) | set(CONSTANTS)
    for d in DISTRIBUTIONS.values():
        names.add(d.name + ("_lpmf" if d.discrete else "_lpdf"))
        if d.has_rng:
            names.add(d.name + "_rng")
    return names


def check(program: ast.Program) -> CheckedProgram:
    """Resolve names and types; raises ModelError with the position and the names involved."""
    return Checker(program).check()
