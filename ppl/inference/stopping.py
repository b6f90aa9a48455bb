"""The one stopping rule of the stochastic fits: Stan's ADVI rule (``stan/variational/advi.hpp``).

Every ``eval_elbo`` iterations the ELBO is estimated and its relative change from the previous
estimate goes into a circular buffer of max(0.1 max_iter / eval_elbo, 2) entries; the fit has
converged when the mean or the median of the buffer is below ``tol_rel_obj``. Two departures,
both answering complaints in Stan's and PyMC's trackers (docs/advi.md):

* the change divides by max(|previous ELBO|, 1): Stan's rule never converges when ELBO ~ 0;
* convergence is not declared before two changes are seen (pymc#2310, "stops after 1 iter").
"""

from __future__ import annotations

from collections import deque

import numpy as np


def relative_change(new: float, old: float) -> float:
    return abs(new - old) / max(abs(old), 1.0)


class StoppingRule:
    """Feed it each ELBO estimate (``update``); it says when the fit has converged."""

    def __init__(self, max_iter: int, eval_elbo: int, tol_rel_obj: float, start: float | None):
        """`start`: the ELBO at iteration 0, when there is one (the first change is from it)."""
        self.tol = tol_rel_obj
        self.buffer: deque[float] = deque(maxlen=max(int(0.1 * max_iter / eval_elbo), 2))
        self.last = start

    def update(self, elbo: float) -> bool:
        """Record a finite ELBO estimate; True once the rule says converged."""
        if self.last is not None:
            self.buffer.append(relative_change(elbo, self.last))
        self.last = elbo
        return len(self.buffer) >= 2 and min(self.mean_median()) < self.tol

    def fell(self, elbo: float) -> bool:
        """Did `elbo` fall from the last estimate by more than the tolerance (the step is too
        large: the iterates bounce instead of climbing)?"""
        if self.last is None:
            return False
        return elbo < self.last and relative_change(elbo, self.last) > self.tol

    def mean_median(self) -> tuple[float, float]:
        if not self.buffer:
            return np.inf, np.inf
        return float(np.mean(self.buffer)), float(np.median(self.buffer))
