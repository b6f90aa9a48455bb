"""The lowered program: the IR between the checker and the compiler, as stanc3's MIR sits between
its frontend and backend.

`lower(checked)` (ppl.ir.lowering) gives a `Program`: the checked statements, copied so that this
IR owns them and lowered, which the passes in ppl.ir.passes mark (a loop's plan, a folded
constant, ...: the declared records of ppl.ir.marks) and the compiler runs (ppl.runtime.compiler).
Each pass records what it decided as a `Decision`, so `ppl ir` shows what runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from ppl.language import ast
from ppl.language.checker import CheckedProgram


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
