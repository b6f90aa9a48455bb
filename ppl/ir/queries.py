"""Questions the fit asks of the lowered program (ppl.ir.program), answered from its statements
alone: which parameters no statement mentions (an improper posterior, ppl.diagnostics.trust) and
which `x ~ normal(0, scale)` priors may have a closed-form scale (ARD, ppl.inference.dsvi)."""

from __future__ import annotations

from ppl.ir.program import Program
from ppl.language import ast
from ppl.language.checker import decl_type


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


def declared_ranks(tree: ast.Program) -> dict[str, int | None]:
    """The type rank of every name a program declares (None if two declarations disagree); loop
    indices are int scalars, foreach variables of no known rank. An `if` on parameters runs its
    branches on the draws that take them by these ranks (ppl.runtime)."""
    ranks: dict[str, int | None] = {}

    def note(name, rank):
        ranks[name] = rank if ranks.get(name, rank) == rank else None

    blocks = ("data", "transformed_data", "parameters", "transformed_parameters", "model",
              "generated_quantities")  # fmt: skip
    stack = [s for name in blocks for s in getattr(tree, name, None) or []]
    while stack:
        st = stack.pop()
        if isinstance(st, ast.Decl):
            note(st.name, decl_type(st.spec).ndim)
        elif isinstance(st, ast.Block):
            stack.extend(st.stmts)
        elif isinstance(st, ast.For):
            note(st.var, 0)
            stack.append(st.body)
        elif isinstance(st, ast.ForEach):
            note(st.var, None)
            stack.append(st.body)
        elif isinstance(st, ast.While):
            stack.append(st.body)
        elif isinstance(st, ast.If):
            stack.append(st.then)
            if st.otherwise is not None:
                stack.append(st.otherwise)
    return ranks
