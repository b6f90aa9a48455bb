"""`if` on values that differ between rows of a vectorised loop or between draws (a condition on
parameters): each branch runs once on the rows or draws taking it (ppl.runtime.row_selection)."""

from __future__ import annotations

import numpy as onp

from ppl.ir.marks import compiled_of
from ppl.ir.queries import declared_ranks
from ppl.language import ast
from ppl.language.types import sum_to_batch0
from ppl.runtime.expressions import expr_fn
from ppl.runtime.row_selection import (
    NotPerRow,
    branch_rows,
    draw_split,
    put_draws,
    put_rows,
    take_draws,
    take_rows,
)
from ppl.runtime.signals import Devectorise, NeedsPerSample, Rejected
from ppl.runtime.values import ElementList, raw, trim


def compile_if(s: ast.If, stmt_fn):
    """The `if`'s closure; `stmt_fn` compiles its branches (ppl.runtime.statements)."""
    cond = expr_fn(s.cond)
    then = stmt_fn(s.then)
    other = stmt_fn(s.otherwise) if s.otherwise is not None else None

    def run(ev):
        env = ev.env
        n = len(env)
        c = cond(ev)
        if c.__class__ is not int and onp.size(raw(c)) > 1:
            if ev.in_vector_loop:
                _run_selected(ev, c, then, other)
            else:
                _run_draw_selected(ev, c, then, other)
            return
        if ev.truth(c, s.cond):
            then(ev)
        elif other is not None:
            other(ev)
        else:
            return
        if len(env) != n:
            trim(env, n)

    return run


def _run_selected(ev, condition, then, other) -> None:
    """An `if` in a vectorised loop whose condition differs between rows: each branch runs once on
    the rows taking it (ppl.runtime.row_selection); a condition on parameters falls back to the
    ordinary
    loop, and so do BBVI's per-element terms, which expect one term per statement and row."""
    rows = ev._loop_rows
    n_rows = len(rows)
    split = branch_rows(condition, n_rows)
    if split is None or ev.terms is not None or ev._loop_axis != 1:
        raise Devectorise(ev._current_loop)
    env = ev.env
    n = len(env)
    types = ev._loop_types
    saved = {}
    for name in list(env)[ev._loop_start :]:
        value = env[name]
        saved[name] = value.materialise() if value.__class__ is ElementList else value
    outcomes = []
    try:
        for branch, sel in zip((then, other), split, strict=True):
            if branch is None or sel.size == 0:
                continue
            narrowed = {k: take_rows(v, types.get(k, 0), sel, n_rows) for k, v in saved.items()}
            env.update(narrowed)
            ev._loop_rows = rows[sel]
            try:
                branch(ev)
            finally:
                ev._loop_rows = rows
            if len(env) != n:
                trim(env, n)
            outcomes.append((sel, narrowed, {k: env[k] for k in saved}))
        for name, value in saved.items():
            for sel, before, after in outcomes:
                new = after[name]
                if new is before[name]:
                    continue
                if new.__class__ is ElementList:
                    new = new.materialise()
                value = put_rows(value, types.get(name, 0), sel, new, n_rows)
            env[name] = value
    except NotPerRow:
        raise Devectorise(ev._current_loop) from None


def _run_draw_selected(ev, condition, then, other) -> None:
    """An `if` whose condition differs between draws (it involves a parameter): each branch runs
    once on the draws taking it, every variable narrowed to those draws, and what it changed is put
    back at them. Falls back to one draw at a time (NeedsPerSample) when a variable's type rank is
    unknown or the caller records per-statement terms."""
    split = draw_split(condition)
    if split is None or ev.terms is not None or ev.on_statement is not None or ev.call_depth:
        raise NeedsPerSample()  # (in a function body a branch may return)
    n_draws = len(onp.asarray(raw(condition)))
    branches = [(b, sel) for b, sel in zip((then, other), split, strict=True) if sel.size]
    if len(branches) == 1:  # every draw takes the same branch
        if branches[0][0] is not None:
            branches[0][0](ev)
        return
    ranks = _program_ranks(ev.program)
    env = ev.env
    n = len(env)
    saved = dict(env)
    if any(ranks.get(name) is None for name in saved):
        raise NeedsPerSample()
    target = ev.target
    outcomes = []
    memos, ev._memos = ev._memos, {}  # values kept for all draws do not fit the narrowed ones
    try:
        for branch, sel in branches:
            if branch is None:
                continue
            narrowed = {k: _take_draws(v, ranks[k], sel, n_draws) for k, v in saved.items()}
            env.update(narrowed)
            # element assignment changes an ElementList in place: keep what its items were
            before = {k: _snapshot(v) for k, v in narrowed.items()}
            ev.target = 0.0
            try:
                branch(ev)
            except Rejected as r:
                # reject() on the draws taking this branch: their density is zero, the others'
                # evaluation goes on (Stan rejects the one draw)
                ev.rejected = str(r)
                ev.target = onp.full(len(sel), -onp.inf)
            if len(env) != n:
                trim(env, n)
            outcomes.append((sel, before, dict(env), ev.target))
        for name, value in saved.items():
            for sel, before, after, _ in outcomes:
                value = _merge_draws(value, before[name], after[name], ranks[name], sel, n_draws)
            env[name] = value
    except NotPerRow:
        raise NeedsPerSample() from None
    finally:
        ev._memos = memos
    for sel, _, _, lp in outcomes:
        if not (lp.__class__ is float and lp == 0.0):
            target = target + put_draws(onp.zeros(n_draws), 0, sel, sum_to_batch0(lp), n_draws)
    ev.target = target


def _take_draws(value, rank: int, sel, n_draws: int):
    """take_draws on an array, or on each written element of an ElementList (a new list)."""
    if value.__class__ is ElementList:
        items = [None if v is None else take_draws(v, rank - 1, sel, n_draws) for v in value.items]
        return ElementList(items, value.elem_type, value.elem_shape, value.base, value.strict)
    return take_draws(value, rank, sel, n_draws)


def _snapshot(value):
    """(the value, its items when it is an ElementList): what _merge_draws compares against."""
    return value, tuple(value.items) if value.__class__ is ElementList else None


def _merge_draws(full, before, after, rank: int, sel, n_draws: int):
    """`full` with what a branch run on draws `sel` changed (`before` -> `after`) put back."""
    obj, items_before = before
    if after is obj and (items_before is None or all(
        a is b for a, b in zip(after.items, items_before, strict=True)
    )):  # fmt: skip
        return full
    if (
        after.__class__ is ElementList
        and items_before is not None
        and full.__class__ is ElementList
    ):
        items = list(full.items)
        k = rank - 1
        for i, (b, a) in enumerate(zip(items_before, after.items, strict=True)):
            if a is not b:
                base = items[i] if items[i] is not None else full.unwritten()
                items[i] = put_draws(base, k, sel, a, n_draws)
        return ElementList(items, full.elem_type, full.elem_shape, full.base, full.strict)
    if full.__class__ is ElementList:
        full = full.materialise()
    if after.__class__ is ElementList:
        after = after.materialise()
    return put_draws(full, rank, sel, after, n_draws)


def _program_ranks(program: ast.Program) -> dict[str, int | None]:
    """ppl.ir.queries.declared_ranks, kept with the program: built once."""
    compiled = compiled_of(program)
    if compiled.ranks is None:
        compiled.ranks = declared_ranks(program)
    return compiled.ranks

