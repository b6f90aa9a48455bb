"""`ode_rk45(f, y0, t0, ts, ...)` and the other ODE solvers in a model: the user function `f` is
the right-hand side, run on every draw at once; ppl.library.ode integrates and differentiates.

The real arguments that vary between draws (or are being differentiated) are packed into one
(S, P) matrix of sensitivity parameters; data arguments stay constants.
"""

from __future__ import annotations

import dataclasses

import autograd.numpy as anp
import numpy as np
from autograd.tracer import isbox

from ppl.language import ast
from ppl.language.types import fast_ndim, fast_shape
from ppl.library.ode import DEFAULT_TOLERANCES, SOLVERS, Problem, solve
from ppl.runtime import user_calls
from ppl.runtime.signals import Devectorise


def compile_ode_call(e: ast.Call, arg_fns: list):
    solver = SOLVERS[e.name]
    fdef = e.user_function.definition
    args = e.args[1:]
    fns = arg_fns[1:]
    n_tol = 3 if (solver.tolerances == "required" or (
        solver.tolerances == "optional" and len(args) == 9
    )) else 0  # fmt: skip
    if solver.new_style:
        tol_fns, extra = fns[3 : 3 + n_tol], list(range(3 + n_tol, len(args)))
    else:
        tol_fns, extra = fns[6 : 6 + n_tol], [3, 4, 5]
    extra_types = [args[i].type for i in extra]
    tapeable = straight_line(fdef)

    def ode(ev):
        if ev.in_vector_loop:
            raise Devectorise(ev._current_loop)
        y0, t0, ts = (f(ev) for f in fns[:3])
        extras = [fns[i](ev) for i in extra]
        tol = [f(ev) for f in tol_fns] or DEFAULT_TOLERANCES
        rtol, atol, max_steps = (float(np.asarray(v)) for v in tol)
        ts = np.asarray(ts, dtype=float)
        if isbox(t0) or isbox(ts) or fast_ndim(ts) != 1:
            raise ev.error(e, f"{e.name}: the times must be data (gradients in time are not "
                           "supported)")  # fmt: skip
        batched = fast_ndim(y0) > 1 or any(
            fast_ndim(v) > t.ndim for v, t in zip(extras, extra_types, strict=True)
        )
        S = max([fast_shape(y0)[0] if fast_ndim(y0) > 1 else 1] + [
            fast_shape(v)[0] for v, t in zip(extras, extra_types, strict=True)
            if fast_ndim(v) > t.ndim
        ])  # fmt: skip
        n = fast_shape(y0)[-1]
        y0 = anp.reshape(y0, (-1, n)) * np.ones((S, 1))
        packed, pieces = [], []
        for v, t in zip(extras, extra_types, strict=True):
            varies = t.base == "real" and (isbox(v) or fast_ndim(v) > t.ndim)
            if not varies:
                pieces.append(("const", v))
                continue
            shape = tuple(fast_shape(v)[fast_ndim(v) - t.ndim :])
            size = int(np.prod(shape))
            pieces.append(("packed", shape, size))
            packed.append(anp.reshape(v, (-1, size)) * np.ones((S, 1)))
        p = anp.concatenate(packed, axis=1) if packed else np.zeros((S, 0))

        def rhs(t, y, p):
            values, start = [], 0
            for piece in pieces:
                if piece[0] == "const":
                    values.append(piece[1])
                else:
                    _, shape, size = piece
                    rows = p[:, start : start + size]  # S draws, or copies of them
                    # (ppl.library.ode)
                    values.append(anp.reshape(rows, (len(rows),) + shape))
                    start += size
            return user_calls.invoke(ev, e, fdef, [t, y] + values)

        problem = Problem(rhs, n, float(np.asarray(t0)), ts, solver.method, rtol, atol,
                          max_steps, tapeable=tapeable)  # fmt: skip
        try:
            y = solve(problem, y0, p)
        except ValueError as err:
            raise ev.error(e, f"{e.name}: {err}") from None
        return y if batched else y[0]

    return ode


_BRANCHES = (ast.If, ast.While, ast.Ternary, ast.Reject, ast.Print, ast.Break, ast.Continue)
_DECISIONS = {"<", ">", "<=", ">=", "==", "!=", "&&", "||"}


#: a node's fields that hold no nodes of its own: the checker's and the IR's annotations
_NOT_CHILDREN = ("type", "user_function", "marks", "compiled")


def straight_line(fdef: ast.FunctionDef, seen: frozenset = frozenset()) -> bool:
    """Whether a user function (and every user function it calls) computes the same operations
    whatever its arguments' values: no branch, comparison or early exit, so that a tape recorded
    at one point holds at every point (ppl.library.tape)."""
    if id(fdef) in seen:
        return False  # recursion: its depth may depend on the values
    seen = seen | {id(fdef)}
    stack: list = [fdef.body]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(node)
            continue
        if not dataclasses.is_dataclass(node):
            continue
        if isinstance(node, _BRANCHES) or (isinstance(node, ast.BinOp) and node.op in _DECISIONS):
            return False
        if isinstance(node, ast.UnOp) and node.op == "not":
            return False
        called = getattr(node, "user_function", None) if isinstance(node, ast.Call) else None
        if called is not None and not straight_line(called.definition, seen):
            return False
        stack.extend(getattr(node, f.name) for f in dataclasses.fields(node)
                     if f.name not in _NOT_CHILDREN)  # fmt: skip
    return True
