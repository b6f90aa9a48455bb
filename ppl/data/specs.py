"""The data block's variables as data specs: what `ppl.data.files` reads and checks, from the
lowered program (names, base types, dimensions and bounds, given as numbers, data names or
expressions of earlier data, which the evaluator computes on the lowered program's own nodes)."""

from __future__ import annotations

import numpy as np

from ppl.data.declaration import DataSpec
from ppl.data.files import CONSTRAINT_TEXT, load_data
from ppl.ir.passes import lowered
from ppl.language import ast
from ppl.language.checker import CheckedProgram, decl_type
from ppl.runtime.evaluator import Evaluator


def _dim(e: ast.Expr, program: ast.Program, data_names: set[str]):
    if isinstance(e, ast.Num) and isinstance(e.value, int):
        return e.value
    if isinstance(e, ast.Var) and e.name in data_names:
        return e.name

    def evaluate(values: dict) -> int:
        v = Evaluator(program, dict(values)).expr(e)
        return int(np.asarray(v).reshape(()))

    return evaluate


def _bound(e: ast.Expr | None, program: ast.Program):
    if e is None:
        return None
    if isinstance(e, ast.Num):
        return float(e.value)

    def evaluate(values: dict):
        return np.asarray(Evaluator(program, dict(values)).expr(e), dtype=float)

    return evaluate


def data_specs(checked: CheckedProgram) -> list[DataSpec]:
    """One spec per data-block variable, in declaration order."""
    program = lowered(checked, ()).ast
    lines = program.source.splitlines()
    specs = []
    names: set[str] = set()
    for d in program.data:
        spec = d.spec
        t = decl_type(spec)
        sizes = list(spec.sizes)
        if spec.kind in ("cov_matrix", "corr_matrix", "cholesky_factor_corr") or (
            spec.kind == "cholesky_factor_cov" and len(sizes) == 1
        ):
            sizes = sizes * 2
        dims = [_dim(e, program, names) for e in spec.array_sizes + sizes]
        text = lines[d.pos.line - 1].strip() if 0 < d.pos.line <= len(lines) else ""
        specs.append(
            DataSpec(
                d.name,
                t.base,
                dims,
                _bound(spec.bounds.get("lower"), program),
                _bound(spec.bounds.get("upper"), program),
                d.pos.line,
                text,
                spec.kind if spec.kind in CONSTRAINT_TEXT else None,
            )
        )
        names.add(d.name)
    return specs


def read_data(checked: CheckedProgram, paths: list[str], sets: dict[str, str] | None = None):
    return load_data(data_specs(checked), list(paths), sets or {})
