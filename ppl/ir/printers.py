"""The graph's printers: `ppl ir`'s tables (text), JSON and Graphviz dot, as the methods a
`ppl.ir.graph.Graph` inherits from `GraphPrinters`."""

from __future__ import annotations

import json
from dataclasses import asdict

_BLOCK_LABEL = {
    "data": "data",
    "transformed_data": "transformed data",
    "parameters": "parameters",
    "transformed_parameters": "transformed parameters",
    "model": "model (local)",
    "generated_quantities": "generated quantities",
}


class GraphPrinters:
    """`ppl ir`'s outputs of a graph (its `model`, `method`, `nodes`, `passes`, `decisions`)."""

    def where(self, line: int) -> tuple[str | None, int]:
        """(the included file, its own line) for `line` of the program's text when that line
        came from an `#include`, else (None, the model file's own line): the line a user finds
        in their editor, not one of the text with the includes expanded."""
        if not line or not getattr(self, "source", ""):
            return None, line
        from ppl.language.parser import locate

        file, _, at = locate(self.model, self.source, line).rpartition(":")
        return (None if file == self.model else file), int(at)

    def line_text(self, line: int) -> str:
        """`12`, or `parts/prior.stan:3` for a line from an included file."""
        file, at = self.where(line)
        return str(at) if file is None else f"{file}:{at}"

    def _located(self, item) -> dict:
        out = asdict(item)
        file, out["line"] = self.where(item.line)
        if file is not None:
            out["file"] = file
        return out

    def to_dict(self) -> dict:
        """The graph as plain data (`ppl ir --json`); a line from an included file is that
        file's own, with a "file" key naming it."""
        nodes = [self._located(n) for n in self.nodes]
        return {"model": self.model, "method": self.method, "nodes": nodes,
                "passes": list(self.passes),
                "decisions": [self._located(d) for d in self.decisions]}  # fmt: skip

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def to_dot(self) -> str:
        """The graph in Graphviz's dot language (`ppl ir --dot`)."""
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
        """`ppl ir`'s tables: the nodes by kind, then the passes and their decisions."""

        def shape(n) -> str:
            if n.shape is not None:
                return _shape_text(n.shape)
            return _shape_text(n.dims) if n.dims else "()"

        def deps(n) -> str:
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
                lambda n: [n.name, self.line_text(n.line), n.text, deps(n)],
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
            out.append(f"  {d.pass_name:<22}line {self.line_text(d.line):<4}  {d.text}")
        return "\n".join(out) + "\n"


def _dot_quote(s: str) -> str:
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{s}"'


def _shape_text(shape) -> str:
    items = [str(s) for s in shape]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _support_text(n) -> str:
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
