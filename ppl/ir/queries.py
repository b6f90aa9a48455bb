"""Questions the fit asks of the lowered program (ppl.ir.program), answered from its statements
alone: which parameters no statement mentions (an improper posterior, ppl.diagnostics.trust) and
which `x ~ normal(0, scale)` priors may have a closed-form scale (ARD, ppl.inference.dsvi)."""

from __future__ import annotations

from ppl.ir.program import Program
from ppl.language import ast


def _mentions(stmts: list[ast.Stmt]) -> list[str]:
    """Every name the statements read or write, once per mention."""
    return [e.name for e in ast.iter_exprs(stmts) if isinstance(e, ast.Var)]


def unmentioned_parameters(program: Program) -> set[str]:
    """The parameters no statement of the transformed parameters or the model mentions: nothing
    but their support shapes their posterior."""
    tree = program.ast
    used = set(_mentions(tree.transformed_parameters + tree.model))
    return {d.name for d in tree.parameters if d.name not in used}


def normal_scale_priors(program: Program) -> list[tuple[str, str]]:
    """(scale, x) of each model statement `x ~ normal(0, scale)`, x and scale plain names, scale
    mentioned in no other statement of the transformed parameters, model or generated
    quantities: the scale's optimum given q(x) then has a closed form."""
    tree = program.ast
    uses: dict[str, int] = {}
    for block in (tree.transformed_parameters, tree.model, tree.generated_quantities):
        for name in _mentions(block):
            uses[name] = uses.get(name, 0) + 1
    out = []
    for s in tree.model:
        if not (isinstance(s, ast.Tilde) and s.dist.lower() == "normal" and len(s.args) == 2):
            continue
        x, mu, scale = s.lhs, s.args[0], s.args[1]
        if not (isinstance(x, ast.Var) and isinstance(scale, ast.Var)):
            continue
        if isinstance(mu, ast.Num) and mu.value == 0 and uses.get(scale.name) == 1:
            out.append((scale.name, x.name))
    return out
