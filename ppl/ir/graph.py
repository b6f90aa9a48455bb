"""The IR between the checker and the compiler, as stanc3's MIR sits between its frontend and
backend: the lowered program, its passes' decisions, and the graph of its variables.

`lower(checked)` gives a `Program`: the checked statements, copied so that this IR owns them, which
the passes in ppl.ir.passes annotate (a loop's plan, a folded constant, ...) and the compiler runs
(ppl.runtime.compiler). Each pass records what it decided as a `Decision`, so `ppl ir` shows what
runs.

`build_graph` gives the graph view of a program: data, latent, deterministic and factor nodes with
shapes, supports and parents (concrete shapes when a compiled model is given). `ppl ir` prints it;
BBVI and minibatching read Markov blankets and per-row statements off it.

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

import copy
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

from ppl.language import ast
from ppl.language.checker import CheckedProgram, decl_type
from ppl.language.types import SPEC_KIND
from ppl.library.transforms import transform_kind

_BLOCK_LABEL = {
    "data": "data",
    "transformed_data": "transformed data",
    "parameters": "parameters",
    "transformed_parameters": "transformed parameters",
    "model": "model (local)",
    "generated_quantities": "generated quantities",
}

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
class Decision:
    """What one pass decided about one statement or expression (`ppl ir` prints these)."""

    pass_name: str
    line: int
    text: str


#: the program's blocks in execution order (functions: the bodies of user-defined functions)
BLOCKS = ("functions", "transformed_data", "transformed_parameters", "model",
          "generated_quantities")  # fmt: skip


@dataclass
class Program:
    """The lowered program: the checked program's statements, owned by this IR (the passes
    annotate them), the passes that ran and what they decided."""

    checked: CheckedProgram
    ast: ast.Program
    passes: tuple[str, ...] = ()
    decisions: list[Decision] = field(default_factory=list)

    def block(self, name: str) -> list[ast.Stmt]:
        if name == "functions":
            return [f.body for f in self.ast.functions if f.body is not None]
        return getattr(self.ast, name)

    def statements(self, blocks: tuple[str, ...] = BLOCKS) -> Iterator[tuple[str, ast.Stmt]]:
        """(block, statement) for every statement, nested ones included, in source order."""
        for name in blocks:
            for s in self.block(name):
                for inner in walk(s):
                    yield name, inner

    def decide(self, pass_name: str, node, text: str) -> None:
        self.decisions.append(Decision(pass_name, getattr(node, "pos", ast.Pos(0, 0)).line, text))


def walk(s: ast.Stmt) -> Iterator[ast.Stmt]:
    """A statement and every statement nested in it, in source order."""
    yield s
    if isinstance(s, ast.Block):
        for inner in s.stmts:
            yield from walk(inner)
    elif isinstance(s, ast.For | ast.ForEach | ast.While):
        yield from walk(s.body)
    elif isinstance(s, ast.If):
        yield from walk(s.then)
        if s.otherwise is not None:
            yield from walk(s.otherwise)


def lower(checked: CheckedProgram) -> Program:
    """The checked program as an IR of its own: a copy of its statements without any state a run
    cached on them, so that passes can annotate it and other lowerings stay unaffected."""
    return Program(checked, _copy_tree(checked.program, {}))


_TREE_MODULES = ("ppl.language.ast", "ppl.language.user_functions")


def _copy_tree(node, memo: dict):
    """A copy of the syntax tree (nodes, their lists and dicts, function signatures), leaving out
    what the evaluator caches on nodes (`_fn` closures, loop plans: names with `_`) and sharing
    everything else (types, numbers, strings). One frame per level, not copy.deepcopy's five: a
    program of 100 nested `if`s stays within Python's recursion limit."""
    if id(node) in memo:
        return memo[id(node)]
    if isinstance(node, list):
        new = memo[id(node)] = []
        for item in node:
            new.append(_copy_tree(item, memo))
        return new
    if isinstance(node, tuple):
        return tuple([_copy_tree(item, memo) for item in node])
    if isinstance(node, dict):
        new = memo[id(node)] = {}
        for key, item in node.items():
            new[key] = _copy_tree(item, memo)
        return new
    if type(node).__module__ not in _TREE_MODULES or not hasattr(node, "__dict__"):
        return node
    new = memo[id(node)] = copy.copy(node)
    for key, item in list(vars(node).items()):
        if key.startswith("_"):
            del new.__dict__[key]
        else:
            new.__dict__[key] = _copy_tree(item, memo)
    return new


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
class Graph:
    model: str
    nodes: list[Node]
    method: str = "advi"
    # factor name -> its `~` / `target +=` statement (not printed; BBVI maps terms to factors)
    statements: dict = field(default_factory=dict, repr=False)
    passes: tuple[str, ...] = ()  # the passes that ran on the program, in order
    decisions: list[Decision] = field(default_factory=list)

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

    def to_dict(self) -> dict:
        nodes = [asdict(n) for n in self.nodes]
        return {"model": self.model, "method": self.method, "nodes": nodes,
                "passes": list(self.passes),
                "decisions": [asdict(d) for d in self.decisions]}  # fmt: skip

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_dot(self) -> str:
        style = {
            "data": 'shape=box, style=filled, fillcolor="#dddddd"',
            "latent": "shape=ellipse",
            "deterministic": "shape=ellipse, style=dashed",
            "factor": 'shape=box, style=filled, fillcolor="#333333", fontcolor=white, fontsize=9',
        }
        lines = [
            f"digraph {_dot_quote(self.model)} {{",
            "  rankdir=TB;",
            "  node [fontname=Helvetica];",
        ]
        ids = {n.name: f"n{i}" for i, n in enumerate(self.nodes)}
        for n in self.nodes:
            if n.kind == "factor":
                label = f"{n.name}: {n.text}"
            else:
                label = f"{n.name}\n{n.type}"
                if n.shape is not None and n.shape:
                    label += f"\nshape {_shape_text(n.shape)}"
                if n.kind == "latent":
                    label += f"\n{n.support}"
            lines.append(f"  {ids[n.name]} [label={_dot_quote(label)}, {style[n.kind]}];")
        for n in self.nodes:
            for p in n.parents:
                if p in ids:
                    lines.append(f"  {ids[p]} -> {ids[n.name]};")
            for p in n.sizes:
                if p in ids:
                    lines.append(f"  {ids[p]} -> {ids[n.name]} [style=dotted, color=gray];")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        def shape(n: Node) -> str:
            if n.shape is not None:
                return _shape_text(n.shape)
            return _shape_text(n.dims) if n.dims else "()"

        def deps(n: Node) -> str:
            out = ", ".join(n.parents) or "-"
            if n.sizes:
                out += f"  (sizes: {', '.join(n.sizes)})"
            return out

        concrete = any(n.shape is not None for n in self.nodes)
        shapes = "from the data" if concrete else "symbolic (give data for concrete shapes)"
        out = [f"model: {self.model}", f"shapes: {shapes}"]
        sections = [
            (
                "data",
                "data (observed / fixed)",
                ["name", "type", "shape", "support", "block", "depends on"],
                lambda n: [
                    n.name,
                    n.type,
                    shape(n),
                    _support_text(n),
                    _BLOCK_LABEL.get(n.block, n.block),
                    deps(n),
                ],
            ),
            (
                "latent",
                "latent parameters (approximated by the variational family)",
                ["name", "type", "shape", "support", "transform", "family", "depends on"],
                lambda n: [
                    n.name,
                    n.type,
                    shape(n),
                    _support_text(n),
                    n.transform or "-",
                    n.family or "-",
                    deps(n),
                ],
            ),
            (
                "deterministic",
                "deterministic nodes (functions of their parents)",
                ["name", "type", "shape", "block", "parents"],
                lambda n: [n.name, n.type, shape(n), _BLOCK_LABEL.get(n.block, n.block), deps(n)],
            ),
            (
                "factor",
                "factors (terms of the log density)",
                ["id", "line", "statement", "parents"],
                lambda n: [n.name, str(n.line), n.text, deps(n)],
            ),
        ]
        for kind, title, header, row in sections:
            nodes = self.of_kind(kind)
            out.append("")
            out.append(f"{title}: {len(nodes)}")
            if not nodes:
                continue
            rows = [header] + [row(n) for n in nodes]
            widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
            for r in rows:
                cells = [c.ljust(w) for c, w in zip(r[:-1], widths[:-1], strict=True)] + [r[-1]]
                out.append(("  " + "  ".join(cells)).rstrip())
        out.append("")
        out.append(f"passes: {', '.join(self.passes) or 'none'}")
        for d in self.decisions:
            out.append(f"  {d.pass_name:<22}line {d.line:<4}  {d.text}")
        return "\n".join(out) + "\n"


def _dot_quote(s: str) -> str:
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _shape_text(shape) -> str:
    items = [str(s) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _support_text(n: Node) -> str:
    lo, hi = n.bounds.get("lower"), n.bounds.get("upper")
    if n.support == "interval":
        closed = n.kind != "latent"
        return f"interval {'[' if closed else '('}{lo}, {hi}{']' if closed else ')'}"
    if n.support == "lower-bounded":
        return f"{n.support} ({'>=' if n.kind != 'latent' else '>'} {lo})"
    if n.support == "upper-bounded":
        return f"{n.support} ({'<=' if n.kind != 'latent' else '<'} {hi})"
    if n.support == "int" and (lo is not None or hi is not None):
        return f"int in [{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
    if "offset" in n.bounds or "multiplier" in n.bounds:
        off, mult = n.bounds.get("offset", "0"), n.bounds.get("multiplier", "1")
        return f"{n.support} (offset={off}, multiplier={mult})"
    return n.support


# ---- source text of expressions and types ----------------------------------------------------

_PREC = {
    "||": 1,
    "&&": 2,
    "==": 3,
    "!=": 3,
    "<": 4,
    "<=": 4,
    ">": 4,
    ">=": 4,
    "+": 5,
    "-": 5,
    "*": 6,
    "/": 6,
    "%/%": 6,
    "%": 6,
    ".*": 6,
    "./": 6,
    "^": 8,
    ".^": 8,
}


def expr_text(e, parent_prec: int = 0) -> str:
    """Stan source text of an expression, with only the parentheses it needs."""
    if e is None:
        return ""
    if isinstance(e, ast.Num):
        v = e.value
        text = repr(v) if isinstance(v, float) else str(v)
        return f"({text})" if parent_prec > 5 and v < 0 else text
    if isinstance(e, ast.Str):
        return f'"{e.value}"'
    if isinstance(e, ast.Var):
        return e.name
    if isinstance(e, ast.Call):
        args = [expr_text(a) for a in e.args]
        if e.conditional and args:
            return f"{e.name}({args[0]} | {', '.join(args[1:])})"
        return f"{e.name}({', '.join(args)})"
    if isinstance(e, ast.BinOp):
        p = _PREC.get(e.op, 5)
        right_assoc = e.op in ("^", ".^")
        left = expr_text(e.left, p + (1 if right_assoc else 0))
        right = expr_text(e.right, p if right_assoc else p + 1)
        text = f"{left} {e.op} {right}"
        return f"({text})" if p < parent_prec else text
    if isinstance(e, ast.UnOp):
        if e.op == "transpose":
            return f"{expr_text(e.operand, 10)}'"
        text = ("-" if e.op == "neg" else "!") + expr_text(e.operand, 7)
        return f"({text})" if parent_prec > 7 else text
    if isinstance(e, ast.Ternary):
        text = f"{expr_text(e.cond, 1)} ? {expr_text(e.if_true)} : {expr_text(e.if_false)}"
        return f"({text})" if parent_prec > 0 else text
    if isinstance(e, ast.Index):
        return f"{expr_text(e.base, 10)}[{', '.join(_index_text(i) for i in e.items)}]"
    if isinstance(e, ast.ArrayExpr):
        return "{" + ", ".join(expr_text(i) for i in e.items) + "}"
    if isinstance(e, ast.RowVectorExpr):
        return "[" + ", ".join(expr_text(i) for i in e.items) + "]"
    return "?"


def _index_text(item: ast.IndexItem) -> str:
    lo, hi = expr_text(item.lo), expr_text(item.hi)
    return {"single": lo, "range": f"{lo}:{hi}", "from": f"{lo}:", "to": f":{hi}", "all": ":"}.get(
        item.kind, "?"
    )


def type_text(spec: ast.TypeSpec) -> str:
    """The declared type as Stan source, without the name: `array[J] vector<lower=0>[K]`."""
    bounds = ""
    if spec.bounds:
        bounds = "<" + ", ".join(f"{k}={expr_text(v)}" for k, v in spec.bounds.items()) + ">"
    sizes = f"[{', '.join(expr_text(s) for s in spec.sizes)}]" if spec.sizes else ""
    text = f"{spec.kind}{bounds}{sizes}"
    if spec.array_sizes:
        text = f"array[{', '.join(expr_text(s) for s in spec.array_sizes)}] {text}"
    return text


def stmt_text(s) -> str:
    if isinstance(s, ast.Tilde):
        args = ", ".join(expr_text(a) for a in s.args)
        text = f"{expr_text(s.lhs)} ~ {s.dist}({args})"
        if s.truncation is not None:
            text += f" T[{expr_text(s.truncation[0])}, {expr_text(s.truncation[1])}]"
        return text + ";"
    if isinstance(s, ast.TargetInc):
        return f"target += {expr_text(s.expr)};"
    return ""


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


def build_graph(
    source: CheckedProgram | Program, model=None, method=None
) -> Graph:
    """The graph of a program; `model` (a CompiledModel) adds concrete shapes from the data, and
    its statements are the ones the factors name (the statements its log joint runs); `method`
    (a ppl.methods.base.Method; None: mean-field Gaussians) chooses the latents' families."""
    lowered = model.ir if model is not None else source
    if isinstance(lowered, CheckedProgram):
        lowered = lower(lowered)
    program = lowered.ast

    def shape_of(spec: ast.TypeSpec):
        if model is None:
            return None
        try:
            return [int(s) for s in model.shape_of(spec)]
        except Exception:  # noqa: BLE001 - a size given by a local variable: no concrete shape
            return None

    nodes: list[Node] = []
    for d in program.data:
        nodes.append(
            Node(
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
        )
    deps = _Deps()
    empty = ([], [], [])
    deps.walk(program.transformed_data, "transformed_data", empty, frozenset())
    deps.walk(program.transformed_parameters, "transformed_parameters", empty, frozenset())
    deps.walk(program.model, "model", empty, frozenset())
    deps.walk(program.generated_quantities, "generated_quantities", empty, frozenset())

    def decl_node(name, d, block, kind):
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

    for name, (d, block) in deps.decls.items():
        if block == "transformed_data":
            nodes.append(decl_node(name, d, block, "data"))
    for d in program.parameters:
        transform = "binary" if d.spec.kind == "int" else transform_kind(d.spec)
        support = _support(d.spec, True)
        nodes.append(
            Node(
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
        )
    for name, (d, block) in deps.decls.items():
        if block != "transformed_data":
            nodes.append(decl_node(name, d, block, "deterministic"))
    known = {n.name for n in nodes}
    prefix = "f"
    while any(re.fullmatch(re.escape(prefix) + r"\d+", k) for k in known):
        prefix = "_" + prefix
    for i, (s, names, ranges, within) in enumerate(deps.factors, start=1):
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
    statements = {f"{prefix}{i}": s for i, (s, *_) in enumerate(deps.factors, start=1)}
    kinds = {n.name: n.kind for n in nodes}
    for n in nodes:
        parents = [p for p in n.parents if p in known]
        # a size name that also carries a value stays a parent; data used only for sizes/loop
        # ranges is a size; a non-data name in a loop range is a real (control) dependency
        sizes = []
        for p in n.sizes:
            if p not in known or p in parents:
                continue
            (sizes if kinds[p] == "data" else parents).append(p)
        n.parents, n.sizes = list(dict.fromkeys(parents)), list(dict.fromkeys(sizes))
    name = "advi" if method is None else method.name
    return Graph(program.filename, nodes, name, statements, lowered.passes,
                 list(lowered.decisions))
