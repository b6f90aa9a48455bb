"""Sufficient statistics: a multivariate normal over data rows that share their mean and covariance.

`y ~ multi_normal(mu, Sigma)` (or `_cholesky`, or the `_lpdf` call) with y an array of N data
vectors and mu, Sigma one vector and one matrix: sum_n log N(y_n | mu, Sigma) needs only N, the
mean of the rows and Y'Y, so each call costs O(D^3) whatever N is (the GPFA scaling of Knowles
2015). The pass marks such statements and calls (`sufficient_statistics`); the evaluator computes
the statistics once per data array and falls back to the row-by-row density when y carries
draws after all.
"""

from __future__ import annotations

from ppl.ir.marks import marks_of
from ppl.ir.passes.loop_invariants import evaluated
from ppl.ir.program import Program
from ppl.ir.source_text import expr_text, stmt_text
from ppl.language import ast
from ppl.language.checker import split_dist_call
from ppl.library.distributions import get_distribution

_DISTRIBUTIONS = ("multi_normal", "multi_normal_cholesky")


def run(program: Program) -> None:
    checked = program.checked
    data = set(checked.names_in("data")) | set(checked.names_in("transformed_data"))
    for _, s in program.statements():
        if (
            isinstance(s, ast.Tilde)
            and s.truncation is None
            and s.dist in _DISTRIBUTIONS
            and applies(s.dist, s.lhs, s.args, data)
        ):
            marks_of(s).sufficient_statistics = True
            text = stmt_text(s).rstrip(";")
            program.decide("sufficient_statistics", s, f"{text}: N, mean, Y'Y once")
        for e in _exprs(s):
            if isinstance(e, ast.Call) and e.user_function is None:
                split = split_dist_call(e.name)
                if (
                    split is not None
                    and split[0] in _DISTRIBUTIONS
                    and split[1] in ("_lpdf", "_lupdf")
                    and e.args
                    and applies(split[0], e.args[0], e.args[1:], data)
                ):
                    marks_of(e).sufficient_statistics = True
                    program.decide("sufficient_statistics", e,
                                   f"{expr_text(e)}: N, mean, Y'Y once")  # fmt: skip


def applies(dist_name: str, value: ast.Expr, args: list[ast.Expr], data: set[str]) -> bool:
    """Rows of data as the value, each parameter exactly one event (shared by every row)."""
    dist = get_distribution(dist_name)
    names = {x.name for x in ast.iter_exprs(value) if isinstance(x, ast.Var)}
    return (
        value.type.ndim > dist.value_ndim
        and names <= data
        and all(a.type.ndim == k for a, k in zip(args, dist.param_ndims, strict=False))
    )


def _exprs(s: ast.Stmt) -> list:
    """The expressions written in the statement itself (not in the statements nested in it)."""
    return list(ast.iter_exprs(evaluated(s)))
