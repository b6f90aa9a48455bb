"""Stan source text of the lowered program's expressions, types and statements (`ppl ir`, and the
passes' decisions)."""

from __future__ import annotations

from ppl.language import ast

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

