"""The abstract syntax tree the parser builds, the checker annotates and ppl.ir lowers.

Every attribute a node carries is a declared field. Those no constructor takes are filled later:
an expression's `type` (a `ppl.language.types.SType`) and a call's or `~`'s `user_function` by the
checker (the compiler relies on the type to know how many trailing axes of a runtime array are the
value's own); `marks` (a `ppl.ir.marks.Marks`: the lowering's and the passes' decisions) and
`compiled` (a `ppl.ir.marks.Compiled`: the backend's closures) on the lowered program's nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pos:
    line: int
    col: int


# ---- expressions ---------------------------------------------------------------------------------


def _later() -> Any:
    """A field no constructor takes, None until a later stage fills it."""
    return field(default=None, init=False, repr=False)


@dataclass(eq=False)
class Expr:
    pos: Pos = field(repr=False)
    type: Any = _later()  # the checker's SType
    marks: Any = _later()  # ppl.ir.marks.Marks
    compiled: Any = _later()  # ppl.ir.marks.Compiled


@dataclass(eq=False)
class Num(Expr):
    value: int | float = 0


@dataclass(eq=False)
class Str(Expr):
    value: str = ""


@dataclass(eq=False)
class Var(Expr):
    name: str = ""


@dataclass(eq=False)
class Call(Expr):
    name: str = ""
    args: list[Expr] = field(default_factory=list)
    conditional: bool = False  # written `f(y | theta)`
    user_function: Any = _later()  # the checker's Signature of a user-defined function


@dataclass(eq=False)
class BinOp(Expr):
    op: str = ""
    left: Expr | None = None
    right: Expr | None = None


@dataclass(eq=False)
class UnOp(Expr):
    op: str = ""  # "neg", "not", "transpose"
    operand: Expr | None = None


@dataclass(eq=False)
class Ternary(Expr):
    cond: Expr | None = None
    if_true: Expr | None = None
    if_false: Expr | None = None


@dataclass(eq=False)
class IndexItem:
    kind: str  # "single", "range", "from", "to", "all"
    lo: Expr | None = None
    hi: Expr | None = None


@dataclass(eq=False)
class Index(Expr):
    base: Expr | None = None
    items: list[IndexItem] = field(default_factory=list)


@dataclass(eq=False)
class ArrayExpr(Expr):
    items: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class RowVectorExpr(Expr):
    items: list[Expr] = field(default_factory=list)


# ---- declarations and statements -----------------------------------------------------------------


@dataclass(eq=False)
class TypeSpec:
    """A declared type: base kind, its sizes, the array sizes in front and the bounds."""

    kind: str  # int real vector row_vector matrix simplex ordered positive_ordered cov_matrix ...
    sizes: list[Expr] = field(default_factory=list)
    array_sizes: list[Expr] = field(default_factory=list)
    bounds: dict[str, Expr] = field(default_factory=dict)


@dataclass(eq=False)
class Stmt:
    pos: Pos = field(repr=False)
    marks: Any = _later()  # ppl.ir.marks.Marks
    compiled: Any = _later()  # ppl.ir.marks.Compiled


@dataclass(eq=False)
class Decl(Stmt):
    name: str = ""
    spec: TypeSpec | None = None
    init: Expr | None = None
    hyper: bool = False  # declared in `hyperparameters`: a point estimate (type-II ML), no q


@dataclass(eq=False)
class Assign(Stmt):
    lhs: Expr | None = None
    op: str = "="  # "=", "+=", "-=", "*=", "/=", ".*=", "./="
    rhs: Expr | None = None


@dataclass(eq=False)
class Tilde(Stmt):
    lhs: Expr | None = None
    dist: str = ""
    args: list[Expr] = field(default_factory=list)
    truncation: tuple[Expr | None, Expr | None] | None = None
    user_function: Any = _later()  # the checker's Signature of a user-defined density


@dataclass(eq=False)
class TargetInc(Stmt):
    expr: Expr | None = None


@dataclass(eq=False)
class For(Stmt):
    var: str = ""
    lo: Expr | None = None
    hi: Expr | None = None
    body: Stmt | None = None


@dataclass(eq=False)
class ForEach(Stmt):
    var: str = ""
    iterable: Expr | None = None
    body: Stmt | None = None


@dataclass(eq=False)
class While(Stmt):
    cond: Expr | None = None
    body: Stmt | None = None


@dataclass(eq=False)
class If(Stmt):
    cond: Expr | None = None
    then: Stmt | None = None
    otherwise: Stmt | None = None


@dataclass(eq=False)
class Block(Stmt):
    stmts: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class Print(Stmt):
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Reject(Stmt):
    args: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Break(Stmt):
    pass


@dataclass(eq=False)
class Continue(Stmt):
    pass


@dataclass(eq=False)
class CallStmt(Stmt):
    call: Call | None = None


@dataclass(eq=False)
class Return(Stmt):
    expr: Expr | None = None


@dataclass(eq=False)
class FunArg:
    name: str
    type_text: str  # as written, e.g. "array[] real", "vector"
    data_only: bool = False


@dataclass(eq=False)
class FunctionDef(Stmt):
    """A definition (or forward declaration, body None) in the `functions` block."""

    name: str = ""
    return_type: str = ""
    args: list[FunArg] = field(default_factory=list)
    body: Block | None = None


@dataclass(eq=False)
class Program:
    filename: str
    source: str
    functions: list[FunctionDef] = field(default_factory=list)
    data: list[Decl] = field(default_factory=list)
    transformed_data: list[Stmt] = field(default_factory=list)
    parameters: list[Decl] = field(default_factory=list)
    transformed_parameters: list[Stmt] = field(default_factory=list)
    model: list[Stmt] = field(default_factory=list)
    generated_quantities: list[Stmt] = field(default_factory=list)
    compiled: Any = _later()  # ppl.ir.marks.Compiled


def iter_exprs(node: Any):
    """Yield every expression node under `node` (statements, expressions, lists), depth first."""
    if isinstance(node, list | tuple):
        for item in node:
            yield from iter_exprs(item)
        return
    if isinstance(node, Expr):
        yield node
    if isinstance(node, Expr | Stmt | IndexItem | TypeSpec):
        for value in vars(node).values():
            if isinstance(value, Expr | Stmt | IndexItem | TypeSpec | list | tuple):
                yield from iter_exprs(value)
            elif isinstance(value, dict):
                yield from iter_exprs(list(value.values()))
