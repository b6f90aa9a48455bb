"""The graph IR: data, latent, deterministic and factor nodes with shapes, supports and parents.

Built from the checked program (and, when data is given, the compiled model for concrete shapes).
`ppl ir` prints it; later algorithms read Markov blankets off it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from ppl import ast
from ppl.checker import CheckedProgram, decl_type

_BLOCK_LABEL = {
    "data": "data", "transformed_data": "transformed data", "parameters": "parameters",
    "transformed_parameters": "transformed parameters", "model": "model",
    "generated_quantities": "generated quantities",
}  # fmt: skip


@dataclass
class Node:
    name: str
    kind: str  # "data", "latent", "deterministic", "factor"
    block: str
    type: str
    shape: list[int] | None = None
    support: str = "real"
    parents: list[str] = field(default_factory=list)
    family: str | None = None
    transform: str | None = None
    line: int = 0
    text: str = ""


@dataclass
class Graph:
    model: str
    nodes: list[Node]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def factors_of(self, name: str) -> list[Node]:
        """Factors that depend on `name` directly or through deterministic nodes (its blanket)."""
        downstream = {name}
        changed = True
        while changed:
            changed = False
            for n in self.nodes:
                if n.kind == "deterministic" and n.name not in downstream and downstream & set(n.parents):
                    downstream.add(n.name)
                    changed = True
        return [n for n in self.nodes if n.kind == "factor" and downstream & set(n.parents)]

    def to_json(self) -> str:
        return json.dumps({"model": self.model, "nodes": [asdict(n) for n in self.nodes]}, indent=2)

    def to_dot(self) -> str:
        style = {
            "data": 'shape=box, style=filled, fillcolor="#dddddd"',
            "latent": "shape=ellipse",
            "deterministic": "shape=ellipse, style=dashed",
            "factor": 'shape=box, style=filled, fillcolor="#333333", fontcolor=white, fontsize=9',
        }
        lines = ["digraph model {", "  rankdir=TB;"]
        ids = {n.name: f"n{i}" for i, n in enumerate(self.nodes)}
        for n in self.nodes:
            label = n.name if n.kind != "factor" else n.text.replace('"', '\\"')
            if n.kind == "latent" and n.family:
                label += f"\\n{n.support}"
            lines.append(f'  {ids[n.name]} [label="{label}", {style[n.kind]}];')
        for n in self.nodes:
            for p in n.parents:
                if p in ids:
                    lines.append(f"  {ids[p]} -> {ids[n.name]};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_text(self) -> str:
        out = [f"model {self.model}"]
        groups = [("data", "data"), ("latent", "latents"), ("deterministic", "deterministic"),
                  ("factor", "factors")]  # fmt: skip
        for kind, title in groups:
            nodes = [n for n in self.nodes if n.kind == kind]
            if not nodes:
                continue
            out.append(f"\n{title} ({len(nodes)}):")
            for n in nodes:
                shape = "" if n.shape is None else f" shape={tuple(n.shape)}"
                if kind == "factor":
                    out.append(f"  {n.name:<6} line {n.line:<4} {n.text}")
                    out.append(f"         parents: {', '.join(n.parents) or '-'}")
                    continue
                head = f"  {n.name:<16} {n.type:<28}{shape}  support={n.support}"
                if kind == "latent":
                    head += f"  transform={n.transform}"
                    out.append(head)
                    out.append(f"  {'':<16} family: {n.family}")
                else:
                    if kind == "deterministic":
                        head += f"  [{_BLOCK_LABEL.get(n.block, n.block)}]"
                    out.append(head)
                if kind != "latent" and n.parents:
                    out.append(f"  {'':<16} parents: {', '.join(n.parents)}")
                elif kind == "latent" and n.parents:
                    out.append(f"  {'':<16} bounds depend on: {', '.join(n.parents)}")
        return "\n".join(out) + "\n"


def _names(node) -> list[str]:
    seen = []
    for e in ast.iter_exprs(node):
        if isinstance(e, ast.Var) and e.name not in seen:
            seen.append(e.name)
    return seen


def _type_text(spec: ast.TypeSpec, source_line: str) -> str:
    return source_line.split(";")[0].strip()


def _data_support(spec: ast.TypeSpec) -> str:
    lo = spec.bounds.get("lower")
    hi = spec.bounds.get("upper")
    is_int = spec.kind == "int"
    if is_int and isinstance(lo, ast.Num) and lo.value == 0 and isinstance(hi, ast.Num) and hi.value == 1:
        return "binary"
    if spec.kind in ("simplex",):
        return "simplex"
    if lo is not None and hi is not None:
        return "interval"
    if lo is not None:
        if isinstance(lo, ast.Num) and lo.value == 0:
            return "nonnegative_int" if is_int else "nonnegative"
        return "lower-bounded"
    if hi is not None:
        return "upper-bounded"
    return "int" if is_int else "real"


class _Deps:
    """Collects, for each assigned variable, the names its value was computed from."""

    def __init__(self):
        self.parents: dict[str, list[str]] = {}
        self.decls: dict[str, tuple[ast.Decl, str]] = {}
        self.factors: list[tuple[ast.Stmt, list[str]]] = []

    def add(self, name: str, names: list[str]):
        lst = self.parents.setdefault(name, [])
        for n in names:
            if n != name and n not in lst:
                lst.append(n)

    def walk(self, stmts, block: str, context: list[str], loop_vars: set[str]):
        for s in stmts:
            self.stmt(s, block, context, loop_vars)

    def stmt(self, s, block, context, loop_vars):
        def clean(names):
            return [n for n in names if n not in loop_vars]

        if isinstance(s, ast.Decl):
            if block not in ("data", "parameters"):
                self.decls.setdefault(s.name, (s, block))
            self.add(s.name, clean(_names([s.init] if s.init else []) + context))
        elif isinstance(s, ast.Assign):
            lhs = s.lhs
            while isinstance(lhs, ast.Index):
                lhs = lhs.base
            idx = _names(s.lhs)[1:] if isinstance(s.lhs, ast.Index) else []
            self.add(lhs.name, clean(_names(s.rhs) + idx + context))
        elif isinstance(s, ast.Tilde | ast.TargetInc):
            names = _names([s.lhs] + s.args) if isinstance(s, ast.Tilde) else _names(s.expr)
            self.factors.append((s, clean(names + context)))
        elif isinstance(s, ast.For):
            ctx = context + clean(_names([s.lo, s.hi]))
            self.stmt(s.body, block, ctx, loop_vars | {s.var})
        elif isinstance(s, ast.ForEach):
            ctx = context + clean(_names(s.iterable))
            self.stmt(s.body, block, ctx, loop_vars | {s.var})
        elif isinstance(s, ast.While):
            self.stmt(s.body, block, context + clean(_names(s.cond)), loop_vars)
        elif isinstance(s, ast.If):
            ctx = context + clean(_names(s.cond))
            self.stmt(s.then, block, ctx, loop_vars)
            if s.otherwise is not None:
                self.stmt(s.otherwise, block, ctx, loop_vars)
        elif isinstance(s, ast.Block):
            self.walk(s.stmts, block, context, loop_vars)


def build_graph(checked: CheckedProgram, model=None, method: str = "advi") -> Graph:
    """The graph IR; `model` (a CompiledModel) adds concrete shapes and the latents' layout."""
    from ppl.pipeline import family_of

    program = checked.program
    lines = program.source.splitlines()

    def line_text(pos):
        return lines[pos.line - 1].strip() if 0 < pos.line <= len(lines) else ""

    def shape_of(name):
        if model is None:
            return None
        if name in model.data:
            import numpy as np

            t = checked.symbols[name].stype
            v = model.data[name]
            shp = np.shape(getattr(v, "_value", v))
            return list(shp[len(shp) - t.ndim :]) if t.ndim else []
        for lat in model.latents:
            if lat.name == name:
                return list(lat.shape)
        return None

    nodes: list[Node] = []
    for d in program.data:
        parents = _names(d.spec.sizes + d.spec.array_sizes + list(d.spec.bounds.values()))
        nodes.append(Node(d.name, "data", "data", _type_text(d.spec, line_text(d.pos)), shape_of(d.name),
                          _data_support(d.spec), parents, line=d.pos.line))  # fmt: skip
    deps = _Deps()
    deps.walk(program.transformed_data, "transformed_data", [], set())
    deps.walk(program.transformed_parameters, "transformed_parameters", [], set())
    deps.walk(program.model, "model", [], set())
    deps.walk(program.generated_quantities, "generated_quantities", [], set())
    for name, (d, block) in deps.decls.items():
        if block == "transformed_data":
            nodes.append(Node(name, "data", block, _type_text(d.spec, line_text(d.pos)), shape_of(name),
                              _data_support(d.spec), deps.parents.get(name, []), line=d.pos.line))  # fmt: skip
    latents = {lat.name: lat for lat in model.latents} if model is not None else {}
    for d in program.parameters:
        lat = latents.get(d.name)
        if lat is not None:
            support, transform = lat.support, lat.kind
            family = "Bernoulli (needs BBVI)" if lat.binary else family_of(lat, method)
        else:
            from ppl.compiler import _transform_kind

            transform = _transform_kind(d.spec)
            support = _data_support(d.spec) if d.spec.kind != "simplex" else "simplex"
            if support == "nonnegative":
                support = "positive"
            family = "Bernoulli (needs BBVI)" if support == "binary" else (
                "full-rank Gaussian" if method == "fullrank" else "mean-field Gaussian")  # fmt: skip
        parents = _names(list(d.spec.bounds.values()) + d.spec.sizes + d.spec.array_sizes)
        nodes.append(Node(d.name, "latent", "parameters", _type_text(d.spec, line_text(d.pos)),
                          shape_of(d.name), support, parents, family, transform, d.pos.line))  # fmt: skip
    for name, (d, block) in deps.decls.items():
        if block == "transformed_data":
            continue
        t = decl_type(d.spec)
        nodes.append(Node(name, "deterministic", block, _type_text(d.spec, line_text(d.pos)),
                          None, "int" if t.is_int else "real", deps.parents.get(name, []),
                          line=d.pos.line))  # fmt: skip
    known = {n.name for n in nodes}
    for i, (s, names) in enumerate(deps.factors, start=1):
        parents = [n for n in names if n in known]
        nodes.append(Node(f"f{i}", "factor", "model", "factor", None, "", parents, line=s.pos.line,
                          text=line_text(s.pos)))  # fmt: skip
    for n in nodes:
        n.parents = [p for p in n.parents if p in known or p.startswith("f")]
    return Graph(program.filename, nodes)
