"""Loop vectorisation: which `for` loops run once with their index as a batch axis.

A vectorised loop runs its body once with the loop index as a batch axis. That is only correct when
no iteration reads what another one wrote, and when nothing in the body needs a single index value
(sizes, slices). An `if` is allowed: a condition on data selects rows (ppl.runtime.row_selection),
one on
parameters makes the evaluator fall back. Anything unusual keeps the one-index-at-a-time loop; the
evaluator also falls back at run time if a vectorised run meets something it cannot do.

`run` decides every loop of a program and marks it (`vectorise`); the evaluator vectorises only
the loops marked so.
"""

from __future__ import annotations

from ppl.ir.marks import LoopPlan, marks_of
from ppl.ir.program import Program, walk
from ppl.ir.source_text import expr_text
from ppl.language import ast
from ppl.library.functions import lookup


def _names(node) -> set[str]:
    return {e.name for e in ast.iter_exprs(node) if isinstance(e, ast.Var)}


def _target_name(lhs: ast.Expr) -> str:
    while isinstance(lhs, ast.Index):
        lhs = lhs.base
    return lhs.name


def run(program: Program) -> None:
    for _, s in program.statements():
        if isinstance(s, ast.For):
            private = plan(s)
            marks_of(s).vectorise = private is not None
            program.decide("loop_vectorisation", s, _describe(s, private))


_STATEMENT_NAMES = {"While": "a while loop", "ForEach": "a foreach loop", "Break": "break",
                    "Continue": "continue", "Reject": "reject()", "Print": "print()",
                    "Return": "return"}  # fmt: skip


def _describe(loop: ast.For, private: dict | None) -> str:
    head = f"for ({loop.var} in {expr_text(loop.lo)}:{expr_text(loop.hi)})"
    if private is None:
        return f"{head}: one index at a time ({loop.marks.plan.sequential_because})"
    extras = []
    if any(isinstance(s, ast.If) for s in walk(loop.body)):
        extras.append("if/else: each branch on its rows")
    if reductions(loop):
        extras.append(f"{len(reductions(loop))} accumulation(s) summed over rows")
    if private:
        extras.append(f"private copies of {', '.join(private)}")
    return f"{head}: vectorised over {loop.var}" + (f" ({'; '.join(extras)})" if extras else "")


def reductions(loop: ast.For) -> frozenset:
    """The loop's accumulating assignments, `x = x + e` or `x += e` with x the same element in
    every iteration and mentioned nowhere else in the loop: a vectorised run adds the sum of e
    over the loop's rows (Stan users' `lp[s] = lp[s] + poisson_lpmf(D[t] | ...)` over t)."""
    plan(loop)
    return loop.marks.plan.reductions


def reduction_increment(s: ast.Assign) -> ast.Expr | None:
    """e of `x = x + e` or `x += e`, when e does not mention x; else None."""
    if s.op == "+=":
        increment = s.rhs
    elif (
        s.op == "="
        and isinstance(s.rhs, ast.BinOp)
        and s.rhs.op == "+"
        and _same_place(s.rhs.left, s.lhs)
    ):
        increment = s.rhs.right
    else:
        return None
    if _target_name(s.lhs) in _names(increment):
        return None
    return increment


def _same_place(a: ast.Expr, b: ast.Expr) -> bool:
    """Whether two lvalue-shaped expressions name the same element (`lp[s]` twice)."""
    if isinstance(a, ast.Var) and isinstance(b, ast.Var):
        return a.name == b.name
    if isinstance(a, ast.Index) and isinstance(b, ast.Index) and len(a.items) == len(b.items):
        for x, y in zip(a.items, b.items, strict=True):
            if x.kind != "single" or y.kind != "single":
                return False
            fx, fy = _offset_form(x.lo), _offset_form(y.lo)
            if fx is None or fx != fy:
                return False
        return _same_place(a.base, b.base)
    return False


def private_variables(loop: ast.For) -> dict[str, object]:
    """Variables declared outside the loop that each iteration writes before it reads them (the
    `acc` of a forward algorithm's inner loop), with their types: a vectorised run gives each row
    its own copy and leaves the last row's, as the sequential loop does."""
    return plan(loop) or {}


def plan(loop: ast.For) -> dict[str, object] | None:
    """None when the loop must run one index at a time, else its private variables."""
    marks = marks_of(loop)  # kept on the node (an id() key could be reused by a later node)
    if marks.plan is None:
        result = _check(loop)
        if isinstance(result, str):
            marks.plan = LoopPlan(None, sequential_because=result)
        else:
            private, accumulating = result
            marks.plan = LoopPlan(private, reductions=accumulating)
    return marks.plan.private


def _check(loop: ast.For) -> tuple[dict[str, object], frozenset] | str:
    """The loop's private variables and accumulating assignments, or why it must run one index
    at a time."""
    var = loop.var
    stmts = list(walk(loop.body))
    locals_: set[str] = {s.name for s in stmts if isinstance(s, ast.Decl)}
    inner_loop_vars = {s.var for s in stmts if isinstance(s, ast.For | ast.ForEach)}
    for s in stmts:
        if isinstance(
            s,
            ast.While
            | ast.ForEach
            | ast.Break
            | ast.Continue
            | ast.Reject
            | ast.Print
            | ast.Return,
        ):
            return f"its body has {_STATEMENT_NAMES[type(s).__name__]}"
    # variables written in the body that live outside it
    outer_writes: dict[str, list[ast.Assign]] = {}
    for s in stmts:
        if isinstance(s, ast.Assign):
            name = _target_name(s.lhs)
            if name not in locals_:
                outer_writes.setdefault(name, []).append(s)
    # loop-dependent names: the index, locals, outer arrays written per index
    dependent = {var} | locals_ | set(outer_writes)
    private: dict[str, object] = {}
    accumulating = set()
    for name, writes in outer_writes.items():
        if all(_accumulates(w, name, stmts, dependent | inner_loop_vars, writes) for w in writes):
            accumulating.update(writes)
            continue
        prefixes = [_element_prefix(w.lhs, var, dependent) for w in writes]
        if any(w.op != "=" for w in writes):
            return f"'{name}' is updated in place (+=, *=, ...) by every iteration"
        if any(p is None for p in prefixes):
            if not _privatisable(loop, stmts, name):
                return f"'{name}' carries values from one iteration to the next"
            private[name] = _target_var(writes[0].lhs).type
            continue
        # every read of an outer array written here must be its own element, name[..., var], or
        # an element no iteration writes (x[t - 1, j] where the loop writes x[t, k])
        for s in stmts:
            reads = list(_reads(s))
            allowed = set()
            for e in reads:
                if isinstance(e, ast.Index) and isinstance(e.base, ast.Var) and e.base.name == name:
                    own = _element_prefix(e, var, dependent)
                    if own is not None and own in prefixes:
                        allowed.add(id(e.base))
                    elif all(_disjoint(e, p) for p in prefixes):
                        allowed.add(id(e.base))
            for e in reads:
                if isinstance(e, ast.Var) and e.name == name and id(e) not in allowed:
                    return f"an iteration reads '{name}' where another writes it: a recurrence"
    # inner loops: bounds must not depend on the index
    for s in stmts:
        if isinstance(s, ast.For) and s is not loop:
            if _names([s.lo, s.hi]) & dependent:
                return f"the bounds of the inner loop over {s.var} change with {var}"
    # sizes, slices and size arguments must not depend on the index
    for s in stmts:
        if isinstance(s, ast.Decl):
            if _names(s.spec.sizes + s.spec.array_sizes) & dependent:
                return f"the size of '{s.name}' changes with {var}"
        for e in ast.iter_exprs(_stmt_exprs(s)):
            if isinstance(e, ast.Index):
                for item in e.items:
                    if item.kind != "single" and _names([item.lo, item.hi]) & dependent:
                        return f"a slice's bounds change with {var}"
            if isinstance(e, ast.Call):
                fn = lookup(e.name)
                if fn is not None:
                    for k in fn.size_args:
                        if k < len(e.args) and _names(e.args[k]) & (dependent | inner_loop_vars):
                            return f"a size given to {e.name}() changes with {var}"
    return private, frozenset(accumulating)


def _accumulates(w: ast.Assign, name: str, stmts: list, varying: set[str], writes: list) -> bool:
    """`w` adds to the same element of `name` in every iteration, and only such statements of the
    loop mention `name` (so no iteration reads a partial sum)."""
    increment = reduction_increment(w)
    if increment is None:
        return False
    lhs = w.lhs
    while isinstance(lhs, ast.Index):
        if _names([(i.lo, i.hi) for i in lhs.items]) & varying:
            return False
        lhs = lhs.base
    for s in stmts:
        if all(s is not x for x in writes) and name in _names(_stmt_exprs(s)):
            return False
        if isinstance(s, ast.Decl) and name in _names(s.spec.sizes + s.spec.array_sizes):
            return False
    return True


def _target_var(lhs: ast.Expr) -> ast.Var:
    while isinstance(lhs, ast.Index):
        lhs = lhs.base
    return lhs


def _element_prefix(e: ast.Expr, var: str, dependent: set[str]) -> tuple | None:
    """For `x[i, ..., var]` (single indexes, the loop index last, the others the same in every
    iteration) the offset forms of the other indexes; None for any other form."""
    if not (isinstance(e, ast.Index) and isinstance(e.base, ast.Var)):
        return None
    *prefix, last = e.items
    if not (last.kind == "single" and isinstance(last.lo, ast.Var) and last.lo.name == var):
        return None
    forms = []
    for item in prefix:
        form = _offset_form(item.lo) if item.kind == "single" else None
        if form is None or (form[0] and form[0] in dependent):
            return None
        forms.append(form)
    return tuple(forms)


def _offset_form(e) -> tuple[str, int] | None:
    """`t`, `t - 2`, `t + 1` or `3` as (name, offset) ('' for a literal), else None."""
    if isinstance(e, ast.Var):
        return (e.name, 0)
    if isinstance(e, ast.Num) and isinstance(e.value, int):
        return ("", e.value)
    if (
        isinstance(e, ast.BinOp)
        and e.op in ("+", "-")
        and isinstance(e.left, ast.Var)
        and isinstance(e.right, ast.Num)
        and isinstance(e.right.value, int)
    ):
        return (e.left.name, e.right.value if e.op == "+" else -e.right.value)
    return None


def _disjoint(read: ast.Index, prefix: tuple) -> bool:
    """Whether `read` (x[a, b, ...]) provably names other elements than any x[prefix..., var]:
    some leading index differs by a constant offset of the same name (t - 1 against t)."""
    for item, form in zip(read.items, prefix, strict=False):
        got = _offset_form(item.lo) if item.kind == "single" else None
        if got is not None and got[0] == form[0] and got[1] != form[1]:
            return True
    return False


def _privatisable(loop: ast.For, stmts: list, name: str) -> bool:
    """`name` is written before it is read in every iteration: the first statement that mentions
    it writes it without reading it, and no branch mentions it (a skipped write would expose the
    previous iteration's value). Containers are also checked element by element at run time."""
    for s in stmts:
        if isinstance(s, ast.If) and name in _names(_subtree_exprs(s)):
            return False
    for s in stmts:
        if isinstance(s, ast.Block | ast.If | ast.For):
            if isinstance(s, ast.For) and name in _names([s.lo, s.hi]):
                return False
            continue
        mentioned = name in _names(_stmt_exprs(s))
        if isinstance(s, ast.Decl) and s.name == name:
            return False
        if not mentioned:
            continue
        if not isinstance(s, ast.Assign) or s.op != "=" or _target_name(s.lhs) != name:
            return False
        if name in {e.name for e in _reads(s) if isinstance(e, ast.Var)}:
            return False
        # a scalar must be written whole, at the top level of the body (an inner loop may not run)
        return isinstance(s.lhs, ast.Index) or s in _top_level(loop.body)
    return False


def _top_level(body: ast.Stmt) -> list:
    return list(body.stmts) if isinstance(body, ast.Block) else [body]


def _subtree_exprs(s: ast.Stmt) -> list:
    return [e for inner in walk(s) for e in _stmt_exprs(inner)]


def _stmt_exprs(s: ast.Stmt) -> list:
    """The expressions a statement itself holds (not those of nested statements)."""
    if isinstance(s, ast.Decl):
        return [s.init] if s.init is not None else []
    if isinstance(s, ast.Assign):
        return [s.lhs, s.rhs]
    if isinstance(s, ast.Tilde):
        return [s.lhs] + s.args
    if isinstance(s, ast.TargetInc):
        return [s.expr]
    if isinstance(s, ast.For):
        return [s.lo, s.hi]
    if isinstance(s, ast.If | ast.While):
        return [s.cond]
    if isinstance(s, ast.CallStmt):
        return [s.call]
    if isinstance(s, ast.Print):
        return list(s.args)
    return []


def _reads(s: ast.Stmt):
    """Expressions read by a statement; an assignment's target counts only through its indexes."""
    if isinstance(s, ast.Assign):
        yield from ast.iter_exprs(s.rhs)
        lhs = s.lhs
        if s.op != "=":
            yield from ast.iter_exprs(lhs)
            return
        while isinstance(lhs, ast.Index):
            for item in lhs.items:
                yield from ast.iter_exprs([item.lo, item.hi])
            lhs = lhs.base
        return
    yield from ast.iter_exprs(_stmt_exprs(s))
