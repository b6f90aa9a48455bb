"""The factor graph of a lowered program (ppl.ir.program): `build_graph` gives the graph view of a
program: data, latent, deterministic and factor nodes with shapes, supports and parents (concrete
shapes when a compiled model is given). `ppl ir` prints it (ppl.ir.printers); BBVI and
minibatching read Markov blankets and per-row statements off it.

Node kinds:

- ``data``: a data-block variable, or a transformed-data variable (block ``transformed_data``);
- ``latent``: a parameters-block variable, with its support, its constraining transform and the
  variational family that approximates it;
- ``deterministic``: a variable computed from others in transformed parameters, model (local
  variables) or generated quantities;
- ``factor``: one ``~`` statement or ``target +=`` statement, i.e. one term of the log density.

Edges: ``parents`` are the variables a node's *value* is computed from (including the conditions
of enclosing ``if``/``while`` statements, and the bounds of a latent); ``sizes`` are the data
variables that only fix a node's dimensions or the ranges of the loops around it. Sizes do not
carry probability, so they are left out of Markov blankets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ppl.ir.lowering import lower
from ppl.ir.printers import GraphPrinters
from ppl.ir.program import Decision, Program
from ppl.ir.source_text import expr_text, stmt_text, type_text
from ppl.language import ast
from ppl.language.checker import CheckedProgram, decl_type
from ppl.language.types import SPEC_KIND
from ppl.library.transforms import transform_kind

_PLAIN = ("vector", "row_vector", "matrix")

# The supports a node can have (Node.support), as printed by `ppl ir`: the constrained types
# (simplex, ordered, cov_matrix, ...) are their own support.
SUPPORTS = (
    "real",
    "positive",
    "nonnegative",
    "lower-bounded",
    "upper-bounded",
    "interval",
    "int",
    "positive int",
    "nonnegative int",
    "binary",
) + tuple(kind for kind in SPEC_KIND if SPEC_KIND[kind] != "scalar" and kind not in _PLAIN)


@dataclass
class Node:
    name: str
    kind: str  # "data", "latent", "deterministic", "factor"
    block: str
    type: str  # declared type without the name, "array[J] real<lower=0>"; factors: "~"/"target +="
    shape: list[int] | None = None  # concrete shape (needs data); [] for a scalar
    support: str = "real"
    parents: list[str] = field(default_factory=list)
    family: str | None = None  # latents: variational family; factors: the distribution
    transform: str | None = None
    line: int = 0
    text: str = ""  # factors: the statement
    dims: list[str] = field(default_factory=list)  # symbolic shape, e.g. ["N", "K"]
    bounds: dict[str, str] = field(default_factory=dict)  # e.g. {"lower": "0", "upper": "1 - a"}
    sizes: list[str] = field(default_factory=list)  # data that only fixes dimensions / loop ranges
    within: list[str] = field(default_factory=list)  # factors: enclosing loops and conditions


@dataclass
class Graph(GraphPrinters):
    model: str
    nodes: list[Node]
    method: str = "advi"
    # factor name -> its `~` / `target +=` statement (not printed; BBVI maps terms to factors)
    statements: dict = field(default_factory=dict, repr=False)
    passes: tuple[str, ...] = ()  # the passes that ran on the program, in order
    decisions: list[Decision] = field(default_factory=list)
    # the program's text (#includes expanded): a line from an included file is shown as that
    # file's own line (ppl.ir.printers)
    source: str = field(default="", repr=False)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def of_kind(self, kind: str) -> list[Node]:
        return [n for n in self.nodes if n.kind == kind]

    def factors_of(self, name: str) -> list[Node]:
        """The factors whose value depends on `name`: its Markov blanket's factors.

        Dependence is followed through deterministic nodes, and through latents whose bounds
        depend on `name` (their constraining transform, hence their density, involves it).
        """
        downstream = {name}
        changed = True
        while changed:
            changed = False
            for n in self.nodes:
                if (
                    n.kind in ("deterministic", "latent")
                    and n.name not in downstream
                    and downstream & set(n.parents)
                ):
                    downstream.add(n.name)
                    changed = True
        return [n for n in self.nodes if n.kind == "factor" and downstream & set(n.parents)]


def _dims(spec: ast.TypeSpec) -> list[str]:
    sizes = list(spec.sizes)
    if spec.kind in ("cov_matrix", "corr_matrix", "cholesky_factor_corr") or (
        spec.kind == "cholesky_factor_cov" and len(sizes) == 1
    ):
        sizes = sizes * 2
    return [expr_text(e) for e in spec.array_sizes + sizes]


# ---- supports and dependencies ---------------------------------------------------------------


def _names(node) -> list[str]:
    seen = []
    for e in ast.iter_exprs(node):
        if isinstance(e, ast.Var) and e.name not in seen:
            seen.append(e.name)
    return seen


def _support(spec: ast.TypeSpec, parameter: bool) -> str:
    """The set a declared variable lives in. Parameters' bounds are open, data's closed."""
    lo = spec.bounds.get("lower")
    hi = spec.bounds.get("upper")
    if spec.kind not in ("int", "real", "vector", "row_vector", "matrix"):
        return spec.kind
    is_int = spec.kind == "int"
    const = isinstance(lo, ast.Num) and isinstance(hi, ast.Num)
    if is_int and const and (lo.value, hi.value) == (0, 1):
        return "binary"
    if lo is not None and hi is not None:
        return "int" if is_int else "interval"
    if lo is not None:
        if isinstance(lo, ast.Num) and lo.value in (0, 1) and is_int:
            return "nonnegative int" if lo.value == 0 else "positive int"
        if isinstance(lo, ast.Num) and lo.value == 0:
            return "positive" if parameter else "nonnegative"
        return "int" if is_int else "lower-bounded"
    if hi is not None:
        return "int" if is_int else "upper-bounded"
    return "int" if is_int else "real"


def _bounds(spec: ast.TypeSpec) -> dict[str, str]:
    return {k: expr_text(v) for k, v in spec.bounds.items()}


class _Deps:
    """Collects, for each assigned variable, the names its value was computed from."""

    def __init__(self):
        self.parents: dict[str, list[str]] = {}
        self.sizes: dict[str, list[str]] = {}
        self.decls: dict[str, tuple[ast.Decl, str]] = {}
        self.factors: list[tuple[ast.Stmt, list[str], list[str], list[str]]] = []

    @staticmethod
    def _extend(lst: list[str], names, exclude: str | None = None):
        for n in names:
            if n != exclude and n not in lst:
                lst.append(n)

    def add(self, name: str, names: list[str], sizes: list[str]):
        self._extend(self.parents.setdefault(name, []), names, name)
        self._extend(self.sizes.setdefault(name, []), sizes, name)

    def walk(self, stmts, block: str, ctx: tuple, loop_vars: frozenset):
        for s in stmts:
            self.stmt(s, block, ctx, loop_vars)

    def stmt(self, s, block, ctx, loop_vars):
        # ctx = (condition names, loop-range names, descriptions of the enclosing statements)
        conds, ranges, within = ctx
        if isinstance(s, ast.TargetInc) and s.marks is not None and s.marks.written is not None:
            s = s.marks.written  # a lowered `~` on a user-defined density: the factor as written

        def clean(names):
            return [n for n in names if n not in loop_vars]

        if isinstance(s, ast.Decl):
            if block not in ("data", "parameters"):
                self.decls.setdefault(s.name, (s, block))
            self.add(
                s.name,
                clean(_names([s.init] if s.init else []) + conds),
                clean(_names(s.spec.sizes + s.spec.array_sizes) + ranges),
            )
        elif isinstance(s, ast.Assign):
            lhs = s.lhs
            while isinstance(lhs, ast.Index):
                lhs = lhs.base
            idx = _names(s.lhs)[1:] if isinstance(s.lhs, ast.Index) else []
            self.add(lhs.name, clean(_names(s.rhs) + idx + conds), clean(ranges))
        elif isinstance(s, ast.Tilde | ast.TargetInc):
            names = _names([s.lhs] + s.args) if isinstance(s, ast.Tilde) else _names(s.expr)
            self.factors.append((s, clean(names + conds), clean(ranges), list(within)))
        elif isinstance(s, ast.For):
            desc = f"for ({s.var} in {expr_text(s.lo)}:{expr_text(s.hi)})"
            inner = (conds, ranges + clean(_names([s.lo, s.hi])), within + [desc])
            self.stmt(s.body, block, inner, loop_vars | {s.var})
        elif isinstance(s, ast.ForEach):
            desc = f"for ({s.var} in {expr_text(s.iterable)})"
            inner = (conds + clean(_names(s.iterable)), ranges, within + [desc])
            self.stmt(s.body, block, inner, loop_vars | {s.var})
        elif isinstance(s, ast.While):
            desc = f"while ({expr_text(s.cond)})"
            inner = (conds + clean(_names(s.cond)), ranges, within + [desc])
            self.stmt(s.body, block, inner, loop_vars)
        elif isinstance(s, ast.If):
            cond = expr_text(s.cond)
            inner = (conds + clean(_names(s.cond)), ranges, within + [f"if ({cond})"])
            self.stmt(s.then, block, inner, loop_vars)
            if s.otherwise is not None:
                inner = (inner[0], ranges, within + [f"else of if ({cond})"])
                self.stmt(s.otherwise, block, inner, loop_vars)
        elif isinstance(s, ast.Block):
            self.walk(s.stmts, block, ctx, loop_vars)


@dataclass
class _Declared:
    """A parameter's family-choice view from its declaration (no data: `ppl ir` without data)."""

    name: str
    binary: bool
    kind: str
    support: str
    hyper: bool


def _latent_family(d: ast.Decl, support: str, model, method) -> str:
    """The family `ppl fit --method METHOD` gives the latent declared by `d` (the same choice,
    ppl.families.choice, by the method's family policy, or mean-field Gaussians without one; on
    the compiled model's latent when there is data)."""
    from ppl.families.choice import POINT_ESTIMATE, FamilyPolicy, family_for, family_label

    latents = {lat.name: lat for lat in model.latents} if model is not None else {}
    lat = latents.get(d.name) or _Declared(
        d.name, d.spec.kind == "int", transform_kind(d.spec), support, d.hyper
    )
    if lat.hyper:
        return POINT_ESTIMATE
    policy = FamilyPolicy() if method is None else method.families
    return family_label(family_for(lat, policy), policy)


def build_graph(source: CheckedProgram | Program, model=None, method=None) -> Graph:
    """The graph of a program; `model` (a CompiledModel) adds concrete shapes from the data, and
    its statements are the ones the factors name (the statements its log joint runs); `method`
    (a ppl.methods.base.Method; None: mean-field Gaussians) chooses the latents' families."""
    lowered = model.ir if model is not None else source
    if isinstance(lowered, CheckedProgram):
        lowered = lower(lowered)
    program = lowered.ast
    shape_of = _shape_reader(model)
    deps = _Deps()
    for block in ("transformed_data", "transformed_parameters", "model", "generated_quantities"):
        deps.walk(getattr(program, block), block, ([], [], []), frozenset())
    nodes = [_data_node(d, shape_of) for d in program.data]
    declared = deps.decls.items()
    nodes += [_decl_node(name, d, block, "data", deps, shape_of)
              for name, (d, block) in declared if block == "transformed_data"]  # fmt: skip
    nodes += [_latent_node(d, shape_of, model, method) for d in program.parameters]
    nodes += [_decl_node(name, d, block, "deterministic", deps, shape_of)
              for name, (d, block) in declared if block != "transformed_data"]  # fmt: skip
    known = {n.name for n in nodes}
    factors, statements = _factor_nodes(deps.factors, known)
    nodes += factors
    _settle_edges(nodes, known)
    name = "advi" if method is None else method.name
    return Graph(program.filename, nodes, name, statements, lowered.passes,
                 list(lowered.decisions), source=program.source)  # fmt: skip


def _shape_reader(model):
    """A declared type's concrete shape under the model's data (None without data, or when a
    local variable gives a size)."""

    def shape_of(spec: ast.TypeSpec):
        if model is None:
            return None
        try:
            return [int(s) for s in model.shape_of(spec)]
        except Exception:  # noqa: BLE001 - a size given by a local variable: no concrete shape
            return None

    return shape_of


def _data_node(d: ast.Decl, shape_of) -> Node:
    return Node(
        d.name,
        "data",
        "data",
        type_text(d.spec),
        shape_of(d.spec),
        _support(d.spec, False),
        _names(list(d.spec.bounds.values())),
        line=d.pos.line,
        dims=_dims(d.spec),
        bounds=_bounds(d.spec),
        sizes=_names(d.spec.sizes + d.spec.array_sizes),
    )


def _decl_node(name: str, d: ast.Decl, block: str, kind: str, deps: _Deps, shape_of) -> Node:
    """A transformed-data (kind "data") or deterministic variable."""
    t = decl_type(d.spec)
    support = _support(d.spec, False)
    if support == "real" and t.is_int:
        support = "int"
    return Node(
        name,
        kind,
        block,
        type_text(d.spec),
        shape_of(d.spec),
        support,
        _names(list(d.spec.bounds.values())) + deps.parents.get(name, []),
        line=d.pos.line,
        dims=_dims(d.spec),
        bounds=_bounds(d.spec),
        sizes=deps.sizes.get(name, []),
    )


def _latent_node(d: ast.Decl, shape_of, model, method) -> Node:
    transform = "binary" if d.spec.kind == "int" else transform_kind(d.spec)
    support = _support(d.spec, True)
    return Node(
        d.name,
        "latent",
        "hyperparameters" if d.hyper else "parameters",
        type_text(d.spec),
        shape_of(d.spec),
        support,
        _names(list(d.spec.bounds.values())),
        _latent_family(d, support, model, method),
        transform,
        d.pos.line,
        dims=_dims(d.spec),
        bounds=_bounds(d.spec),
        sizes=_names(d.spec.sizes + d.spec.array_sizes),
    )


def _factor_nodes(factors: list, known: set[str]) -> tuple[list[Node], dict]:
    """One node per `~` / `target +=` statement, named f1, f2, ... (a prefix no variable has),
    and the statement each names."""
    prefix = "f"
    while any(re.fullmatch(re.escape(prefix) + r"\d+", k) for k in known):
        prefix = "_" + prefix
    nodes = []
    for i, (s, names, ranges, within) in enumerate(factors, start=1):
        family = s.dist if isinstance(s, ast.Tilde) else "target +="
        text = stmt_text(s)
        if within:
            text = f"{text}  [in {', '.join(within)}]"
        kind = "~" if isinstance(s, ast.Tilde) else "target +="
        parents = [n for n in names if n in known]
        sizes = [n for n in ranges if n in known]
        nodes.append(
            Node(
                f"{prefix}{i}",
                "factor",
                "model",
                kind,
                None,
                "",
                parents,
                family,
                line=s.pos.line,
                text=text,
                sizes=sizes,
            )
        )
    statements = {f"{prefix}{i}": s for i, (s, *_) in enumerate(factors, start=1)}
    return nodes, statements


def _settle_edges(nodes: list[Node], known: set[str]) -> None:
    """Edges to variables (`known`) only, each once: a size name that also carries a value stays a
    parent; data used only for sizes/loop ranges is a size; a non-data name in a loop range is a
    real (control) dependency."""
    kinds = {n.name: n.kind for n in nodes}
    for n in nodes:
        parents = [p for p in n.parents if p in known]
        sizes = []
        for p in n.sizes:
            if p not in known or p in parents:
                continue
            (sizes if kinds[p] == "data" else parents).append(p)
        n.parents, n.sizes = list(dict.fromkeys(parents)), list(dict.fromkeys(sizes))
