"""k-hat from enough draws to decide (issue 31): a k-hat from S draws near a threshold is
recomputed from MORE times as many, the S draws it came from among them.

k-hat from S draws is noisy, and where q's tail reaches the heavy part of the ratios p / q
rarely, low: the GP regression example's mean-field q had k-hat 0.42-0.90 (median 0.63) on 16
disjoint sets of 1,000 draws, 0.59-0.75 on sets of 4,000 and 0.83 on all 16,000; its full-rank q
0.40 on its 1,000 output draws and 0.82 on 4,000. The verdict (ppl.diagnostics.verdict) and the
road's decisions on k-hat (ppl.methods.escalation) settle it here, and a k-hat the road settled
is handed to the verdict with its draws (SETTLED), not drawn again.
"""

from __future__ import annotations

import math

import numpy as np

from ppl.diagnostics.psis import GOOD, USABLE, check_densities, check_fit
from ppl.limits import over_budget

#: k-hat within this of 0.5 or of the threshold is redrawn from MORE times as many draws.
NEAR = 0.1
MORE = 4
#: The diagnostics' key of a settled k-hat's draws and their check: (zeta, check), for the
#: verdict, which removes it.
SETTLED = "settled"


def khat_threshold(draws: int) -> float:
    """The k-hat above which S draws cannot give a reliable importance-sampling estimate
    (Vehtari et al. 2024: min(1 - 1 / log10 S, 0.7))."""
    return min(1.0 - 1.0 / math.log10(max(draws, 11)), USABLE)


def near(khat: float, draws: int, thresholds: tuple[float, ...] | None = None) -> bool:
    """Whether k-hat from `draws` draws is within NEAR of 0.5 or of its threshold at S
    (or of one of `thresholds`)."""
    levels = thresholds if thresholds is not None else (GOOD, khat_threshold(draws))
    return bool(np.isfinite(khat)) and min(abs(khat - t) for t in levels) < NEAR


def more_draws(vi, log_joint, rng: np.random.Generator, zeta: np.ndarray | None,
               checked: dict | None, more: int = MORE) -> tuple | None:  # fmt: skip
    """q's draws `zeta` (S of them, their check `checked`) and (more - 1) S fresh ones, with the
    check of all (MORE times S fresh draws when `zeta` is None); None when the draws fail or
    would be too large (ppl.limits)."""
    S = int(checked["draws"]) if checked is not None else len(zeta)
    fresh = (more - 1) * S if zeta is not None and checked is not None else more * S
    dim = int(np.size(vi.sample(np.random.default_rng(0), 1), axis=1))
    if over_budget("verdict draws", float(more * S) * dim):
        return None
    try:
        new = np.asarray(vi.sample(rng, fresh), dtype=float)
        extra = check_fit(log_joint, vi.log_q, new)
    except (ValueError, FloatingPointError, ArithmeticError, MemoryError):
        return None
    if fresh == more * S:
        return new, extra
    lp = np.concatenate([checked["log_p"], extra["log_p"]])
    lq = np.concatenate([checked["log_q"], extra["log_q"]])
    return np.concatenate([zeta, new]), check_densities(lp, lq)


def settle(diag: dict, vi, log_joint, rng, zeta: np.ndarray | None,
           thresholds: tuple[float, ...] | None = None) -> bool:  # fmt: skip
    """Where diag's k-hat (from its S draws `zeta`, of q `vi`) is near a threshold (`near`),
    k-hat from MORE times as many draws, in diag as the verdict reports it (khat, khat_draws,
    khat_output_draws, khat_threshold) with the draws under SETTLED; whether it did."""
    S, khat = int(diag["draws"]), float(diag["khat"])
    if diag.get("khat_draws") or not near(khat, S, thresholds):
        return False
    got = more_draws(vi, log_joint, rng, zeta, diag)
    if got is None or got[1]["log_weights"] is None:
        return False
    record(diag, *got)
    return True


def record(diag: dict, zeta: np.ndarray, more: dict) -> None:
    """diag's k-hat from the draws `zeta` and their check `more` (more_draws)."""
    n = int(more["draws"])
    diag.update(khat_output_draws=diag["khat"], khat=float(more["khat"]), khat_draws=n,
                khat_threshold=khat_threshold(n))  # fmt: skip
    diag[SETTLED] = (zeta, more)
