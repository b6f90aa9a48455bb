"""The `functions` block: signatures, Stan's suffix rules and the type checking of bodies.

The checker calls in here with itself as `checker`; each checked call or `~` on a user function
gets the definition on its AST node (`node.user_function`), which the evaluator runs
(ppl.runtime.user_calls). Suffixes follow Stan: `_lpdf`/`_lpmf` take the value first and are usable
in
`~` and with `|`; `_lp` may use `target +=` and `~` and is callable only where the target is;
`_rng` may draw and is callable only where random numbers are.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl.language import ast
from ppl.language.types import SType
from ppl.library.distributions import get_distribution
from ppl.library.functions import CONSTANTS, lookup

_KINDS = {
    "int": ("int", "scalar"),
    "real": ("real", "scalar"),
    "vector": ("real", "vector"),
    "row_vector": ("real", "row_vector"),
    "matrix": ("real", "matrix"),
}

RNG_BLOCKS = ("transformed_data", "generated_quantities")
TARGET_BLOCKS = ("model", "transformed_parameters")


@dataclass
class Signature:
    name: str
    returns: SType | None  # None: void
    args: list[SType]
    node: ast.FunctionDef
    definition: ast.FunctionDef | None = None  # the one with a body

    def describe(self) -> str:
        args = ", ".join(str(t) for t in self.args)
        return f"{self.returns or 'void'} {self.name}({args})"


def parse_type(text: str) -> SType | None:
    """`array[,] real` -> SType('real', 'scalar', 2); `void` -> None."""
    if text == "void":
        return None
    adims = 0
    if text.startswith("array["):
        commas, _, text = text[len("array[") :].partition("] ")
        adims = len(commas) + 1
    base, kind = _KINDS[text]
    return SType(base, kind, adims)


def function_block(name: str) -> str:
    """The checker's block name while checking a body (`target +=` checks the `_lp` suffix)."""
    return f"function {name}"


def declare_functions(checker, defs: list[ast.FunctionDef]) -> dict[str, Signature]:
    """Every signature first (so bodies may call later or recursive functions), then the bodies."""
    sigs: dict[str, Signature] = {}
    for f in defs:
        sig = Signature(
            f.name, parse_type(f.return_type), [parse_type(a.type_text) for a in f.args], f
        )
        check_suffix(checker, sig)
        if lookup(f.name) is not None or f.name in CONSTANTS or get_distribution(f.name):
            raise checker.error(f, f"'{f.name}' is a built-in function: choose another name")
        old = sigs.get(f.name)
        if old is not None:
            if (old.returns, old.args) != (sig.returns, sig.args):
                raise checker.error(
                    f,
                    f"'{f.name}' is declared as {old.describe()} and again as {sig.describe()}"
                    " (overloading user functions is not supported)",
                )
            if old.definition is not None and f.body is not None:
                raise checker.error(f, f"function '{f.name}' is defined twice")
        else:
            sigs[f.name] = old = sig
        if f.body is not None:
            old.definition = f
    for sig in sigs.values():
        if sig.definition is None:
            raise checker.error(sig.node, f"function '{sig.name}' is declared but never defined")
    checker.user_functions = sigs
    for sig in sigs.values():
        check_body(checker, sig)
    return sigs


def check_suffix(checker, sig: Signature) -> None:
    f = sig.node
    if f.name.endswith(("_lpdf", "_lpmf", "_lcdf", "_lccdf")):
        if sig.returns != SType("real"):
            raise checker.error(f, f"'{f.name}' must return real (it is a log density)")
        if not sig.args:
            raise checker.error(f, f"'{f.name}' needs the value as its first argument")
        first = sig.args[0]
        if f.name.endswith("_lpmf") and not first.is_int:
            raise checker.error(f, f"the first argument of '{f.name}' must be an integer (_lpmf)")
        if f.name.endswith("_lpdf") and first.is_int:
            raise checker.error(
                f, f"the first argument of '{f.name}' must be real (_lpdf); use _lpmf for integers"
            )
    if f.name.endswith(("_lupdf", "_lupmf")):
        raise checker.error(
            f,
            f"define '{f.name[:-6]}{f.name[-4:].replace('u', 'l', 1)}' "
            "instead: ppl keeps every constant, so _lupdf is the same function",
        )


def check_body(checker, sig: Signature) -> None:
    f = sig.definition
    saved = checker.scopes, checker.block, checker.loop_depth, checker.returns
    checker.scopes, checker.block, checker.loop_depth = [{}], function_block(f.name), 0
    checker.returns = sig.returns
    try:
        for arg, t in zip(f.args, sig.args, strict=True):
            checker.declare(f, arg.name, t, "argument", readonly=True)
        for stmt in f.body.stmts:
            checker.check_stmt(stmt)
    finally:
        checker.scopes, checker.block, checker.loop_depth, checker.returns = saved
    if sig.returns is not None and not always_returns(f.body):
        raise checker.error(f, f"function '{f.name}' may reach its end without returning a value")


def always_returns(s: ast.Stmt | None) -> bool:
    if isinstance(s, ast.Return | ast.Reject):
        return True
    if isinstance(s, ast.Block):
        return any(always_returns(inner) for inner in s.stmts)
    if isinstance(s, ast.If):
        return always_returns(s.then) and always_returns(s.otherwise)
    return False


def check_return(checker, s: ast.Return) -> None:
    if not checker.block.startswith("function "):
        raise checker.error(s, "'return' is only allowed in the body of a user-defined function")
    name = checker.block[len("function ") :]
    want = checker.returns
    if want is None:
        if s.expr is not None:
            raise checker.error(s, f"void function '{name}' cannot return a value")
        return
    if s.expr is None:
        raise checker.error(s, f"function '{name}' must return a value of type {want}")
    got = checker.expr(s.expr)
    if not assignable(want, got):
        raise checker.error(s.expr, f"function '{name}' returns {want}, not {got}")


def assignable(target: SType, value: SType) -> bool:
    return (target.kind, target.adims) == (value.kind, value.adims) and not (
        target.is_int and not value.is_int
    )


def rng_allowed(block: str) -> bool:
    return block in RNG_BLOCKS or (block.startswith("function ") and block.endswith("_rng"))


def in_lp_function(block: str) -> bool:
    """Inside an `_lp` function body, which may use `target +=` and `~`."""
    return block.startswith("function ") and block.endswith("_lp")


def target_allowed(block: str) -> bool:
    """Where an `_lp` function may be called."""
    return block in TARGET_BLOCKS or in_lp_function(block)


def call_type(checker, e: ast.Call, sig: Signature, arg_types: list[SType]) -> SType:
    """The type of a call to a user function, after the suffix and placement rules."""
    name = sig.name
    density = name.endswith(("_lpdf", "_lpmf"))
    if e.conditional and not density:
        raise checker.error(e, f"'|' is only for _lpdf and _lpmf functions, not '{name}'")
    if name.endswith("_rng") and not rng_allowed(checker.block):
        raise checker.error(
            e,
            f"{name} draws random numbers: it can only be used in transformed "
            "data, generated quantities and other _rng functions",
        )
    if name.endswith("_lp") and not target_allowed(checker.block):
        raise checker.error(
            e,
            f"{name} changes the target: it can only be used in the model "
            "block, transformed parameters and other _lp functions",
        )
    check_arguments(checker, e, sig, arg_types)
    e.user_function = sig  # not the definition: AST walks must not enter (recursive) bodies
    return sig.returns if sig.returns is not None else SType("real")


def check_arguments(checker, node, sig: Signature, arg_types: list[SType]) -> None:
    if len(arg_types) != len(sig.args):
        raise checker.error(
            node,
            f"{sig.name} takes {len(sig.args)} argument(s) ({sig.describe()}), "
            f"got {len(arg_types)}",
        )
    for i, (want, got) in enumerate(zip(sig.args, arg_types, strict=True), start=1):
        if not assignable(want, got):
            arg = sig.node.args[i - 1].name
            raise checker.error(
                node, f"argument {i} ('{arg}') of {sig.name} must be {want}, got {got}"
            )


def tilde_function(checker, s: ast.Tilde) -> Signature | None:
    """The user `_lpdf`/`_lpmf` a `~` names, or None."""
    sigs = getattr(checker, "user_functions", {})
    for suffix in ("_lpdf", "_lpmf"):
        sig = sigs.get(s.dist + suffix)
        if sig is not None:
            return sig
    return None


def check_user_tilde(checker, s: ast.Tilde, sig: Signature) -> None:
    if s.truncation is not None:
        raise checker.error(
            s, f"truncation of the user-defined distribution '{s.dist}' is not supported"
        )
    types = [checker.expr(s.lhs)] + [checker.expr(a) for a in s.args]
    check_arguments(checker, s, sig, types)
    s.user_function = sig


def ode_call_type(checker, e: ast.Call, solver) -> SType:
    """`ode_rk45(f, y0, t0, ts, ...)` and friends: `f` names a user function whose signature
    matches the solver's (Stan's)."""
    name = e.name
    if not e.args or not isinstance(e.args[0], ast.Var):
        raise checker.error(e, f"{name}: the first argument must name a user-defined function")
    f = e.args[0]
    sig = checker.user_functions.get(f.name)
    if sig is None:
        raise checker.error(f, f"{name}: '{f.name}' is not a user-defined function")
    types = [checker.expr(a) for a in e.args[1:]]
    real, ints = SType("real", "scalar", 1), SType("int", "scalar", 1)
    vector = SType("real", "vector")
    tol = [SType("real"), SType("real"), SType("int")]
    if solver.new_style:
        fixed = [vector, SType("real"), real] + (tol if solver.tolerances == "required" else [])
        state, returns = vector, vector
        wanted = fixed + types[len(fixed) :]
    else:
        fixed = [real, SType("real"), real, real, real, ints]
        if len(types) == 9:
            fixed += tol[:2] + [SType("real")]  # stanc takes a real max_num_steps here (5e2)
        elif len(types) != 6:
            raise checker.error(e, f"{name} takes 7 or 10 arguments, got {len(types) + 1}")
        state, returns = real, real
        wanted = fixed
    if len(types) < len(fixed):
        raise checker.error(e, f"{name} takes at least {len(fixed) + 1} arguments, got "
                            f"{len(types) + 1}")  # fmt: skip
    for i, (want, got) in enumerate(zip(wanted, types, strict=True), start=2):
        if not assignable(want, got):
            raise checker.error(e.args[i - 1], f"argument {i} of {name} must be {want}, got {got}")
    extras = types[len(fixed) :] if solver.new_style else types[3:6]
    rhs_types = [SType("real"), state] + extras
    if sig.returns != returns:
        raise checker.error(f, f"{name}: the right-hand side '{f.name}' must return {returns}, "
                            f"not {sig.returns or 'void'}")  # fmt: skip
    check_arguments(checker, f, sig, rhs_types)
    e.user_function = sig
    return SType("real", "vector", 1) if solver.new_style else SType("real", "scalar", 2)
