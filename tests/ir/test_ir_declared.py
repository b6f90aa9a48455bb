"""The IR's nodes carry declared fields only (ppl.language.ast, ppl.ir.marks): lowering, the passes
and the compiler record what they decide and build in a node's `marks` and `compiled`, never in
an attribute of their own; the checked program a lowering copied stays as the checker left it;
and `~` on a user-defined density and `T[L, U]` reach the backend lowered."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ppl.data.specs import read_data
from ppl.ir.graph import build_graph
from ppl.ir.lowering import lower
from ppl.ir.passes import lowered
from ppl.language import ast
from ppl.language.frontend import load_model, model_from_text
from ppl.runtime.compiler import CompiledModel

MODELS = Path(__file__).resolve().parents[2] / "models"
WITH_DATA = sorted(p for p in (MODELS / "posteriordb").glob("*/model.stan")
                   if (p.parent / "data.json").exists())  # fmt: skip
WITHOUT_DATA = sorted(MODELS.rglob("*.model"))
_LOWERED_ONLY = ("marks", "compiled")


def _nodes(root) -> list:
    """Every node of the tree (statements, expressions, index items, types, signatures), each
    once, and the `~` a lowered statement was written as."""
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, list | tuple):
            stack.extend(node)
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            if type(node).__module__.startswith("ppl.language") and id(node) not in seen:
                seen[id(node)] = node
                stack.extend(v for k, v in vars(node).items() if k not in _LOWERED_ONLY)
                marks = getattr(node, "marks", None)
                if marks is not None and marks.written is not None:
                    stack.append(marks.written)
    return list(seen.values())


def _undeclared(root) -> list[str]:
    out = []
    for node in _nodes(root):
        declared = {f.name for f in dataclasses.fields(node)}
        out += [f"{type(node).__name__}.{k}" for k in vars(node) if k not in declared]
    return sorted(set(out))


def _lowered_state(root) -> list[str]:
    return sorted({f"{type(n).__name__}.{k}" for n in _nodes(root) for k in vars(n)
                   if k in _LOWERED_ONLY})  # fmt: skip


def _exercise(checked, data: dict) -> CompiledModel:
    """Compile and run everything a fit runs: log joints (values and a gradient), per-statement
    terms and the generated quantities."""
    model = CompiledModel(checked, data)
    rng = np.random.default_rng(0)
    zeta = np.stack([model.random_init(rng) for _ in range(3)])
    model.log_joint(zeta)
    model.log_terms(zeta)
    model.constrained_draws(zeta, rng)
    return model


@pytest.mark.parametrize("path", WITH_DATA, ids=lambda p: p.parent.name)
def test_a_run_writes_declared_fields_only(path):
    checked = load_model(str(path))
    model = _exercise(checked, read_data(checked, [str(path.parent / "data.json")]))
    assert _undeclared(model.program) == []
    assert _lowered_state(model.program)  # the passes and the compiler did record something
    assert _undeclared(checked.program) == []
    assert _lowered_state(checked.program) == []  # the checked program is never run or marked


@pytest.mark.parametrize("path", WITHOUT_DATA, ids=lambda p: p.stem)
def test_lowering_and_passes_write_declared_fields_only(path):
    checked = load_model(str(path))
    program = lowered(checked)
    build_graph(program)
    assert _undeclared(program.ast) == []
    assert _lowered_state(checked.program) == []


USER_DENSITY = """
functions {
  real my_normal_lpdf(real y, real mu, real s) { return normal_lpdf(y | mu, s); }
}
data { int N; array[N] real y; }
parameters { real mu; real<lower=0> s; }
model {
  mu ~ normal(0, 1);
  s ~ normal(0, 1) T[0, ];
  for (n in 1:N) y[n] ~ my_normal(mu, s);
}
"""


def test_user_densities_and_truncation_are_lowered():
    checked = model_from_text(USER_DENSITY)
    program = lower(checked)
    mu_prior, s_prior, loop = program.ast.model
    assert mu_prior.marks.density is not None and mu_prior.marks.density_args == mu_prior.args
    # T[0, ]: the truncated density, the lower bound after the arguments
    assert len(s_prior.marks.density_args) == 3
    assert s_prior.marks.density is not mu_prior.marks.density
    # the user density: `target += my_normal_lpdf(y[n] | mu, s)`, marked with the `~` written
    inc = loop.body
    assert isinstance(inc, ast.TargetInc) and inc.expr.name == "my_normal_lpdf"
    assert isinstance(inc.marks.written, ast.Tilde)
    assert isinstance(checked.program.model[2].body, ast.Tilde)  # the checked tree is unchanged
    # `ppl ir` shows the statement as written
    graph = build_graph(program)
    assert [n.text for n in graph.of_kind("factor")][-1].startswith("y[n] ~ my_normal(mu, s);")
    model = _exercise(checked, {"N": 3, "y": np.array([0.1, -0.3, 0.5])})
    assert _undeclared(model.program) == []
