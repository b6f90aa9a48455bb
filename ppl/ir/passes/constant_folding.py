"""Constant folding: expressions of data alone are computed once, not at every log-joint call.

In the model, transformed parameters and generated quantities, the largest expressions whose
names are all data (or transformed data) and that do some work (`log(x)`, `x / sd(x)`, `X'`) are
marked `constant` with the data names they read. The evaluator computes such an expression once
and reuses its value as long as those names hold the same arrays (ppl.runtime.expressions): a
streamed or
minibatched fit swaps the data rows, and the value is recomputed for the new ones.

Left alone: reading one element (`y[1]`, as cheap as reading a kept value), expressions of a
loop index (they vary per iteration), integer expressions (sizes and indexes stay Python ints),
random draws, user-defined functions, and transformed data (run once anyway).
"""

from __future__ import annotations

from ppl.ir.marks import marks_of
from ppl.ir.passes.loop_invariants import children, draws, evaluated
from ppl.ir.program import Program
from ppl.ir.source_text import expr_text
from ppl.language import ast

_BLOCKS = ("transformed_parameters", "model", "generated_quantities")
_WORK = (ast.BinOp, ast.UnOp, ast.Call, ast.Ternary, ast.Index, ast.ArrayExpr, ast.RowVectorExpr)


def run(program: Program) -> None:
    checked = program.checked
    data = set(checked.names_in("data")) | set(checked.names_in("transformed_data"))
    for _, s in program.statements(_BLOCKS):
        for root in evaluated(s):
            _fold(root, data, program)


def _fold(e: ast.Expr | None, data: set[str], program: Program) -> None:
    if e is None or isinstance(e, ast.Num | ast.Str | ast.Var):
        return
    names = {x.name for x in ast.iter_exprs(e) if isinstance(x, ast.Var)}
    if _foldable(e, names, data):
        marks_of(e).constant = tuple(sorted(names))
        program.decide("constant_folding", e, f"{expr_text(e)}: computed once (no parameters)")
        return
    for child in children(e):
        _fold(child, data, program)


def _foldable(e: ast.Expr, names: set[str], data: set[str]) -> bool:
    t = getattr(e, "type", None)
    return (
        isinstance(e, _WORK)
        and not _element(e)
        and t is not None
        and t.base == "real"
        and names <= data
        and not draws(e)
        and not any(
            isinstance(x, ast.Call) and x.user_function is not None
            for x in ast.iter_exprs(e)
        )
    )


def _element(e: ast.Expr) -> bool:
    return (
        isinstance(e, ast.Index)
        and isinstance(e.base, ast.Var)
        and all(i.kind == "single" and isinstance(i.lo, ast.Num | ast.Var) for i in e.items)
    )
