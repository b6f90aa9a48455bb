"""`auto`'s collapse for exact summaries: a first fit with a good k-hat can still give
summaries no set of draws gets right. Neal's funnel, non-centred, is fitted exactly (k-hat 0),
but sd(x) = sqrt(E[e^v]), v ~ N(0, 9), has a quarter of its mass beyond the largest of 4000
draws: every draw set understates it by about 20 %. Where the Pareto k-hat of the draws' tail
of (y - mean)^2 (ppl.diagnostics.mcse_tail) says some scalar's sd is not reliable from them and a
grid collapse is cheap (at most CHEAP_COLOURS Hessian products, at most two coordinates left),
the collapsed q is fitted: its summaries are quadrature over the grid, exact given q
(ppl.inference.collapse_summary). It is kept unless its ELBO is lower by more than TIE (the
grid's piecewise-constant q costs the funnel 0.001 nats)."""

from __future__ import annotations

import time
import warnings

import numpy as np

from ppl.errors import PplError
from ppl.families.registry import GAUSSIAN
from ppl.methods.collapse import COLLAPSED_CANDIDATE, CollapsePlan, label, outer_title
from ppl.methods.result import FitResult, checked_draws, make_result

#: The collapsed q is kept when its ELBO is at most this many nats (or twice the ELBOs' Monte
#: Carlo error) below the first fit's: equal fits, but its summaries are exact.
TIE = 0.01
#: The most coordinates left to q for the grid (ppl.inference.collapse_grid.CELLS).
GRID_DIM = 2


def exact_if_heavy(
    first: FitResult, log_joint, rng, seed: int, max_evals: int | None, max_iter: int | None
) -> FitResult:
    """The collapsed q with a grid where the first fit's draws cannot give some sd (their tail
    k-hat) and the collapse is cheap and grid-able; else `first`."""
    heavy = heavy_tailed(first)
    if not heavy:
        return first
    plan = CollapsePlan(first.model, first, seed)
    if not (plan.cheap() and len(plan.split.outer) <= GRID_DIM):
        return first
    start = time.perf_counter()
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            # a constant conditional precision (x_raw ~ normal(0, 1)) has no third derivative
            warnings.filterwarnings("ignore", "Output seems independent of input")
            q = plan.fit(budget=max_evals, max_iter=max_iter)
    except (PplError, ArithmeticError, ValueError, np.linalg.LinAlgError) as e:
        first.notes.append(f"auto: {heavy}; a collapsed q failed ({str(e).splitlines()[0][:200]})")
        return first
    draws = len(next(iter(first.draws.values())))
    checked = checked_draws(q, log_joint, rng, draws)
    mine, theirs = first.diagnostics.get("elbo"), checked[1].get("elbo")
    errors = [d.get("elbo_mcse") or 0.0 for d in (first.diagnostics, checked[1])]
    verdict = f"ELBO {_text(theirs)} vs {_text(mine)}, k-hat {checked[1]['khat']:.2f}"
    if theirs is None or (mine is not None and theirs < mine - max(TIE, 2 * max(errors))):
        first.notes.append(
            f"auto: {heavy}; a collapsed q ({q.grad_evals} gradient evaluations) "
            f"was not kept: {verdict}"
        )
        first.vi.grad_evals += q.grad_evals
        return first
    gaussian = dict.fromkeys((lat.name for lat in first.model.latents), GAUSSIAN)
    best = make_result(
        first.model,
        q,
        COLLAPSED_CANDIDATE,
        gaussian,
        log_joint,
        rng,
        draws=draws,
        seed=first.seed,
        checked=checked,
        seconds=time.perf_counter() - start + first.seconds,
        refinement=first.refinement,
    )
    last = first.vi.elbo_trace[-1][0] if first.vi.elbo_trace else 0
    q.elbo_trace = list(first.vi.elbo_trace) + [
        (last + 1 + i, e) for i, e in (q.elbo_trace or [(0, theirs)])
    ]
    q.grad_evals += first.vi.grad_evals
    q.iterations += first.vi.iterations
    best.description = (
        f"auto, then a collapsed q ({', '.join(q.polish['integrated'])} "
        "integrated out exactly, their Gaussian conditional given the rest; a "
        f"grid on the other {q.polish['outer_dim']} coordinates)"
    )
    best.kept = "collapsed q"
    label(best, q.polish["integrated"], outer_title(q))
    q.polish["answers"] = ["unbounded density"]
    best.notes[:0] = first.notes
    best.notes.append(
        f"auto: {heavy}; a collapsed q ({q.grad_evals - first.vi.grad_evals} "
        f"gradient evaluations) was kept for its exact summaries: {verdict}"
    )
    return best


def heavy_tailed(first: FitResult) -> str | None:
    """Which scalars' sds the first fit's draws cannot give (tail k-hat of (y - mean)^2 above
    the threshold for their number), as a phrase, or None."""
    from ppl.inference.collapse_summary import flat  # scipy: not on `ppl check`'s path

    names = [n for n, a in first.draws.items() if np.asarray(a).dtype.kind == "f"]
    if not names:
        return None
    from ppl.diagnostics.mcse_tail import tail_khats
    from ppl.diagnostics.verdict import khat_threshold

    matrix = flat({n: first.draws[n] for n in names})
    # the road tries the collapse from Vehtari's threshold at S draws; the verdict names a
    # scalar only past mcse_tail.SD_KHAT (its sd behaves as if it had no finite variance)
    k = tail_khats(matrix, mean=False)["sd"]
    k = np.where(np.isnan(k), -np.inf, k)  # no continuous tail: nothing to judge
    threshold = khat_threshold(len(matrix))
    if not np.any(k > threshold):
        return None
    worst = int(np.argmax(k))
    at, which = 0, names[0]
    for name in names:  # the variable of the worst column
        size = int(np.prod(np.shape(first.draws[name])[1:], dtype=int))
        if at <= worst < at + size:
            which = name
            break
        at += size
    return (
        f"the draws' tails leave the sds of {int(np.sum(k > threshold))} scalars unreliable "
        f"(Pareto k-hat of (y - mean)^2 up to {k[worst]:.2f} > {threshold:.2f}, in {which})"
    )


def _text(value) -> str:
    return "non-finite" if value is None else f"{value:.6g}"
