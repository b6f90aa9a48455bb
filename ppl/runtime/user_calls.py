"""Running user-defined functions: a call binds the arguments in a fresh environment and runs the
body with the evaluator's own statement closures, so a body works on batched values (leading
draw axes) and autograd differentiates through it like any other statement.

A call inside a vectorised loop gets arguments with the loop's row axis as an extra batch axis;
anything the body cannot do on such rows (a branch, a size or a loop bound that differs between
rows, changing the target) reruns that loop one index at a time (Devectorise).
"""

from __future__ import annotations

from ppl.errors import ModelError
from ppl.ir.marks import compiled_of
from ppl.language import ast
from ppl.runtime.signals import Devectorise, NeedsPerSample

#: calls nest at most this deep (recursion): deeper is an error at the call, not a crash
MAX_DEPTH = 100

#: the evaluator's per-loop state: reset inside a body (its batch axes are plain batch axes there)
_LOOP_STATE = {
    "in_vector_loop": False,
    "_loop_axis": 0,
    "_outer_counts": (),
    "_reduction_frames": (),
    "_outer_rows": (),
    "_current_loop": None,
    "_loop_rows": None,
    "_loop_start": None,
    "_loop_types": None,
}


class FunctionReturn(Exception):
    """`return e;`: unwinds the body to the call with the value."""

    def __init__(self, value):
        super().__init__()
        self.value = value


def compile_return(s: ast.Return, expr_fn):
    if s.expr is None:

        def return_void(ev):
            raise FunctionReturn(None)

        return return_void
    f = expr_fn(s.expr)

    def return_value(ev):
        raise FunctionReturn(f(ev))

    return return_value


def compile_call(e: ast.Expr, fdef: ast.FunctionDef, arg_fns: list):
    """The closure for a call site."""

    def call(ev):
        return invoke(ev, e, fdef, [f(ev) for f in arg_fns])

    return call


def invoke(ev, e: ast.Expr, fdef: ast.FunctionDef, args: list):
    """Run `fdef` on evaluated arguments; errors are located at the call `e` or in the body."""
    outer_loop = ev._current_loop if ev.in_vector_loop else None
    changes_target = fdef.name.endswith("_lp")
    if outer_loop is not None and changes_target:
        raise Devectorise(outer_loop)
    if changes_target and ev.terms is not None:
        # per-statement terms (BBVI's blankets) do not reach inside
        raise NeedsPerSample(f"the _lp function '{fdef.name}' changes the target")
    if ev.call_depth >= MAX_DEPTH:
        raise ev.error(e, f"'{fdef.name}' calls nest deeper than {MAX_DEPTH} (runaway recursion?)")
    env = {}
    for arg, value in zip(fdef.args, args, strict=True):
        env[arg.name] = value if arg.type_text.endswith("int") else _as_real(value)
    saved = {k: getattr(ev, k) for k in _LOOP_STATE}
    saved_env, saved_vectorise = ev.env, ev.vectorise
    for k, v in _LOOP_STATE.items():
        setattr(ev, k, v)
    ev.env = env
    ev.call_depth += 1
    if outer_loop is not None:
        ev.vectorise = False  # the body's loops would take the caller's row axis
    value = None
    try:
        for f in _body_fns(fdef, ev.compiled):
            f(ev)
    except FunctionReturn as r:
        value = r.value
    except RecursionError:
        raise ev.error(e, f"'{fdef.name}' recursed deeper than Python allows") from None
    except (NeedsPerSample, ModelError, ValueError, IndexError, TypeError, ArithmeticError):
        if outer_loop is None:
            raise
        raise Devectorise(outer_loop) from None
    finally:
        ev.env, ev.vectorise = saved_env, saved_vectorise
        ev.call_depth -= 1
        for k, v in saved.items():
            setattr(ev, k, v)
    if fdef.return_type == "void":
        return None
    if value is None:
        raise ev.error(e, f"'{fdef.name}' ended without returning a value")
    return value if fdef.return_type.endswith("int") else _as_real(value)


def _body_fns(fdef: ast.FunctionDef, compiled) -> list:
    record = compiled_of(fdef)
    if record.statements is None:  # compiled at the first call: a recursive body names itself
        record.statements = [compiled(s) for s in fdef.body.stmts]
    return record.statements


def _as_real(v):
    if v.__class__ is int:
        return float(v)
    dtype = getattr(v, "dtype", None)
    if dtype is not None and dtype.kind in "iub":
        return v.astype(float)
    return v
