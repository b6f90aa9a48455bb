"""Non-centring: `x ~ normal(mu, tau)` on a parameter x becomes a standard latent x_raw with
`x_raw ~ normal(0, 1)` and `x = mu + tau * x_raw` (Gorinova, Moore & Hoffman, ICML 2020,
"Automatic reparameterisation of probabilistic programs"; Papaspiliopoulos et al. 2007).

Where the data say little about x, the centred posterior is a funnel (x's spread follows tau)
that no Gaussian q fits; on (x_raw, mu, tau) the same posterior is close to independent. The
rewrite is exact: the log joint on x_raw is the log joint on x plus log|dx/dx_raw| = sum log tau
(every density here keeps its constants), so the ELBO of a fit on either program bounds the
same log evidence and the two are comparable (ppl.methods.reparam keeps the higher).

A statement is rewritten when (1) its family is location-scale (ppl.library.location_scale:
normal, lognormal on log x, student_t, cauchy, double_exponential, logistic), not truncated;
(2) its left side is a whole parameter, or `x[j]` in `for (j in 1:N)` over all N elements of a
one-dimensional x, the loop at the top of the model block; (3) x has no bounds (lognormal: only
`<lower=0>`), is no hyperparameter, and is on the left of no other `~`; (4) its location and
scale read only data, parameters, transformed parameters (then x is read by no transformed
parameter) and the loop index, and at least one parameter or transformed parameter. x keeps its
name, type and values: it becomes the first transformed parameter (the last when its location or
scale reads a transformed parameter), and the fit reports it where it was declared
(ppl.runtime.compiler.CompiledModel.constrained_draws lists the checked program's parameters).

The pass is not among the default passes (`ALL`): the default road fits both programs when a
statement qualifies and keeps the better (ppl.methods.reparam); `--reparam noncentre` forces it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ppl.ir.lowering import _copy_tree
from ppl.ir.marks import marks_of
from ppl.ir.program import Program
from ppl.ir.source_text import expr_text, stmt_text
from ppl.language import ast
from ppl.language.types import SType
from ppl.library.distributions import get_distribution
from ppl.library.location_scale import LOCATION_SCALE, LocationScale

NAME = "noncentre"
_SHAPES = ("real", "vector", "row_vector", "matrix")


@dataclass
class Site:
    """One `~` statement the pass can non-centre."""

    name: str  # the parameter x
    decl: ast.Decl
    tilde: ast.Tilde
    loop: ast.For | None  # `for (j in 1:N) x[j] ~ ...`: the loop
    family: LocationScale
    reads: set[str]  # the parameters and transformed parameters its location and scale read
    late: bool  # they read a transformed parameter: x goes after the transformed parameters


def run(program: Program, only: set[str] | None = None) -> None:
    """Rewrite every statement that qualifies (on the parameters in `only`, if given; in an
    order where a non-centred location or scale is computed before it is read) and record one
    decision per statement."""
    sites, refused = find_sites(program)
    sites = [s for s in sites if only is None or s.name in only]
    tps = program.ast.transformed_parameters
    early = 0  # where the next early x goes: after the ones placed before it
    for site in _ordered(sites):
        text, made = rewrite(program, site)
        if site.late:
            tps.extend(made)
        else:
            tps[early:early] = made
            early += len(made)
        program.decide(NAME, site.tilde, text)
    for node, why in refused:
        program.decide(NAME, node, why)


def find_sites(program: Program) -> tuple[list[Site], list[tuple[ast.Stmt, str]]]:
    """The statements the pass can rewrite, and (statement, why not) for the location-scale
    statements on a parameter whose location or scale reads parameters that it cannot."""
    checked = program.checked
    tree = program.ast
    data = set(checked.names_in("data")) | set(checked.names_in("transformed_data"))
    params = {d.name: d for d in tree.parameters}
    tps = set(checked.names_in("transformed_parameters"))
    read_in_tps = {e.name for e in ast.iter_exprs(tree.transformed_parameters)
                   if isinstance(e, ast.Var)}  # fmt: skip
    lefts: dict[str, int] = {}
    for _, s in program.statements(("model",)):
        if isinstance(s, ast.Tilde):
            base = _base(s.lhs)
            if base is not None:
                lefts[base] = lefts.get(base, 0) + 1
    sites, refused = [], []
    for s, loop in _top_tildes(tree.model):
        dist = get_distribution(s.dist) if s.user_function is None else None
        family = LOCATION_SCALE.get(dist.name) if dist is not None else None
        name = _base(s.lhs)
        if family is None or name not in params or len(s.args) != len(dist.params):
            continue
        loc, scale = s.args[family.location], s.args[family.scale]
        reads = _names([loc, scale])
        varying = reads & (set(params) | tps)
        if not varying:
            continue  # a fixed location and scale: nothing to gain
        allowed = data | set(params) | tps | ({loop.var} if loop is not None else set())
        why = _refusal(s, loop, params[name], family, lefts, reads, allowed, read_in_tps,
                       tps)  # fmt: skip
        hyper = sorted(n for n in varying if n in params and params[n].hyper)
        if hyper and not why:  # DSVI's closed-form ARD scale (ppl.ir.queries) needs it centred
            why = f"its location or scale reads the hyperparameter(s) {', '.join(hyper)}"
        if why:
            refused.append((s, f"{stmt_text(s).rstrip(';')}: left centred ({why})"))
            continue
        sites.append(Site(name, params[name], s, loop, family, varying, bool(reads & tps)))
    return sites, refused


def _refusal(s, loop, decl, family, lefts, reads, allowed, read_in_tps, tps) -> str:
    """Why the statement cannot be non-centred ('' when it can)."""
    name = decl.name
    bounds = {k: v for k, v in decl.spec.bounds.items()}
    positive = set(bounds) == {"lower"} and isinstance(bounds["lower"], ast.Num) \
        and bounds["lower"].value == 0  # fmt: skip
    if s.truncation is not None:
        return "truncated"
    if decl.hyper or decl.spec.kind not in _SHAPES:
        return f"'{name}' is {'a hyperparameter' if decl.hyper else 'a ' + decl.spec.kind}"
    if family.log and not positive:
        return f"'{name}' is not declared <lower=0>"
    if not family.log and bounds:
        return f"'{name}' has bounds"
    if lefts.get(name, 0) != 1:
        return f"'{name}' is on the left of {lefts.get(name, 0)} '~' statements"
    if name in reads:
        return f"its location or scale reads '{name}'"
    if not reads <= allowed:
        return f"its location or scale reads {', '.join(sorted(reads - allowed))} (local)"
    if reads & tps and name in read_in_tps:
        return f"its location or scale reads a transformed parameter that reads '{name}'"
    value_ndim = s.lhs.type.ndim
    if any(a.type.ndim not in (0, value_ndim) for a in (s.args[family.location],
                                                       s.args[family.scale])):  # fmt: skip
        return "its location or scale has another shape than its left side"
    if loop is not None and not _whole_range(loop, decl):
        return f"the loop does not run over all of '{name}'"
    return ""


def _top_tildes(stmts: list[ast.Stmt]):
    """(statement, loop) for each `~` at the top of the model block (loop None) or directly in
    a `for` loop there (its body, or the top of its block) whose left side is `x[j]`."""
    for s in stmts:
        if isinstance(s, ast.Tilde):
            if isinstance(s.lhs, ast.Var):
                yield s, None
        elif isinstance(s, ast.For):
            body = s.body.stmts if isinstance(s.body, ast.Block) else [s.body]
            for inner in body:
                if isinstance(inner, ast.Tilde) and _indexed_by(inner.lhs, s.var):
                    yield inner, s


def _indexed_by(e: ast.Expr, var: str) -> bool:
    return (isinstance(e, ast.Index) and isinstance(e.base, ast.Var) and len(e.items) == 1
            and e.items[0].kind == "single" and isinstance(e.items[0].lo, ast.Var)
            and e.items[0].lo.name == var)  # fmt: skip


def _whole_range(loop: ast.For, decl: ast.Decl) -> bool:
    """`for (j in 1:N)` over a one-dimensional x of N elements (N written the same way)."""
    spec = decl.spec
    sizes = spec.array_sizes if spec.kind == "real" else spec.sizes
    one_dim = (spec.kind == "real" and len(spec.array_sizes) == 1) or (
        spec.kind in ("vector", "row_vector") and not spec.array_sizes
    )
    return (one_dim and isinstance(loop.lo, ast.Num) and loop.lo.value == 1
            and expr_text(loop.hi) == expr_text(sizes[0]))  # fmt: skip


def _base(e) -> str | None:
    while isinstance(e, ast.Index):
        e = e.base
    return e.name if isinstance(e, ast.Var) else None


def _names(node) -> set[str]:
    return {e.name for e in ast.iter_exprs(node) if isinstance(e, ast.Var)}


def _ordered(sites: list[Site]) -> list[Site]:
    """The sites in an order where every non-centred x a location or scale reads comes first
    (a site in a cycle is left out)."""
    todo = {s.name: s for s in sites}
    done: list[Site] = []
    while True:
        ready = [s for s in todo.values() if not (s.reads & set(todo) - {s.name})]
        if not ready:
            return done
        for s in ready:
            done.append(todo.pop(s.name))


def rewrite(program: Program, site: Site) -> tuple[str, list[ast.Stmt]]:
    """Rewrite one site in place: x_raw in x's place among the parameters, the standard `~`;
    the decision's text and the transformed-parameter statements that compute x."""
    tree = program.ast
    raw_name = _fresh(program, f"{site.name}_raw")
    decl, s, family = site.decl, site.tilde, site.family
    spec = ast.TypeSpec(decl.spec.kind, _copy_tree(decl.spec.sizes, {}),
                        _copy_tree(decl.spec.array_sizes, {}), {})  # fmt: skip
    raw_decl = ast.Decl(decl.pos, name=raw_name, spec=spec)
    tree.parameters[tree.parameters.index(decl)] = raw_decl
    loc, scale = s.args[family.location], s.args[family.scale]
    raw_value = _renamed(s.lhs, raw_name)
    value = _located(loc, scale, raw_value, s.lhs.type, family.log)
    x_spec = ast.TypeSpec(decl.spec.kind, _copy_tree(decl.spec.sizes, {}),
                          _copy_tree(decl.spec.array_sizes, {}), {})  # fmt: skip
    if site.loop is None:
        made = [ast.Decl(s.pos, name=site.name, spec=x_spec, init=value)]
    else:
        lp = site.loop
        assign = ast.Assign(s.pos, lhs=_copy_tree(s.lhs, {}), op="=", rhs=value)
        made = [ast.Decl(s.pos, name=site.name, spec=x_spec),
                ast.For(lp.pos, var=lp.var, lo=_copy_tree(lp.lo, {}), hi=_copy_tree(lp.hi, {}),
                        body=assign)]  # fmt: skip
    before, x_text = stmt_text(s).rstrip(";"), expr_text(s.lhs)
    standard = family.standard or get_distribution(s.dist).name
    args = list(s.args)
    args[family.location], args[family.scale] = _num(0, s.pos), _num(1, s.pos)
    s.lhs, s.dist, s.args = _renamed(s.lhs, raw_name), standard, args
    marks = marks_of(s)
    marks.density, marks.density_args = get_distribution(standard), list(args)
    lp = site.loop
    where = f" for {lp.var} in {expr_text(lp.lo)}:{expr_text(lp.hi)}" if lp is not None else ""
    text = (f"{before}: non-centred: {expr_text(s.lhs)} ~ {standard}("
            f"{', '.join(expr_text(a) for a in args)}), {x_text} = "
            f"{expr_text(value)}{where}")  # fmt: skip
    return text, made


def _fresh(program: Program, name: str) -> str:
    taken = set(program.checked.symbols) | _names(program.ast.model) \
        | {d.name for _, d in program.statements() if isinstance(d, ast.Decl)}  # fmt: skip
    while name in taken:
        name += "_"
    return name


def _renamed(lhs: ast.Expr, name: str) -> ast.Expr:
    """`x` or `x[j]` as `x_raw` or `x_raw[j]` (a copy, typed as the original)."""
    out = _copy_tree(lhs, {})
    base = out
    while isinstance(base, ast.Index):
        base = base.base
    base.name = name
    return out


def _located(loc, scale, raw_value, value_type: SType, log: bool) -> ast.Expr:
    """`loc + scale * raw` (elementwise), typed as the value; `exp(...)` for a log family."""
    real = value_type.with_base("real")
    op = "*" if scale.type.is_scalar or raw_value.type.is_scalar else ".*"
    product = _typed(ast.BinOp(scale.pos, op=op, left=scale, right=raw_value), real)
    out = _typed(ast.BinOp(loc.pos, op="+", left=loc, right=product), real)
    if _is_zero(loc):
        out = product
    if log:
        out = _typed(ast.Call(loc.pos, name="exp", args=[out]), real)
    return out


def _is_zero(e: ast.Expr) -> bool:
    return isinstance(e, ast.Num) and e.value == 0


def _num(value: int, pos: ast.Pos) -> ast.Num:
    return _typed(ast.Num(pos, value=value), SType("int"))


def _typed(e: ast.Expr, t: SType) -> ast.Expr:
    e.type = t
    return e
