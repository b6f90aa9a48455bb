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


#: The relative-ELBO tolerance of Stan's rule when a caller asks for that rule without one.
STAN_TOL_REL_OBJ = 0.01

#: How far two successive phase averages of q may differ for the fit to count as at its optimum:
#: every mean by at most this many of q's sds, every sd by at most this fraction (on log scale).
OPTIMUM_TOL = 0.05
#: The largest Monte Carlo standard error of a phase average (in q's sds, by batch means) before
#: the phase may end: Polyak-Ruppert's error does not shrink with the step size, only with the
#: length of the average (minibatches of B of N rows: about sqrt(N / (B T)) sd after T steps).
MCSE_TOL = 0.07

_SUB = 10  # iterations per sub-window: the unit the stationarity test sees
_BATCHES = 10  # batch means the test splits its window into (dof of the slope's t: 8)
_LEVEL = 0.05  # family-wise false-alarm rate of the trend test over all coordinates
_DECREASE = 0.5  # step-size factor between phases
_KEEP = 32  # cumulative-sum snapshots kept for the phase average (thinned beyond that)


def trend_statistics(batches: np.ndarray) -> np.ndarray:
    """Per column, the t statistic of the least-squares slope of the rows (batch means in time
    order) against their index: t_{n-2} under a stationary sequence of independent batch
    means, and large for a trend whatever the noise (residuals are taken about the line, so the
    trend does not inflate its own standard error). Batch means of slowly mixing iterates are
    not independent: the residual variance is inflated by (1 + rho) / (1 - rho), rho their
    lag-1 autocorrelation pooled over the columns (AR(1), as for the variance of a mean)."""
    n = batches.shape[0]
    x = np.arange(n) - (n - 1) / 2.0
    sxx = float(x @ x)
    slope = x @ (batches - batches.mean(axis=0)) / sxx
    resid = batches - batches.mean(axis=0) - np.outer(x, slope)
    s2 = np.sum(resid**2, axis=0) / (n - 2)
    lag = np.sum(resid[1:] * resid[:-1], axis=0)
    total = np.sum(resid**2, axis=0)
    rho = float(np.clip(np.median(lag[total > 0] / total[total > 0]), 0.0, 0.9)) if np.any(
        total > 0) else 0.0  # fmt: skip
    s2 = s2 * (1.0 + rho) / (1.0 - rho)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = slope / np.sqrt(s2 / sxx)
    return np.where(s2 > 0, t, np.where(slope == 0, 0.0, np.inf))


def trend_threshold(columns: int, batches: int = _BATCHES, level: float = _LEVEL) -> float:
    """Bonferroni bound on max |t| over `columns` stationary columns at family-wise `level`."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(1.0 - level / (2.0 * max(columns, 1)), batches - 2))


def batch_means(subs: np.ndarray, batches: int = _BATCHES) -> np.ndarray | None:
    """The last whole `batches` batch means of a sequence of sub-window means (rows)."""
    n = subs.shape[0] // batches * batches
    if n < batches:
        return None
    return subs[subs.shape[0] - n :].reshape(batches, n // batches, -1).mean(axis=1)


def stationary(subs: np.ndarray, batches: int = _BATCHES, units: np.ndarray | None = None,
               negligible: float = 0.0) -> bool:  # fmt: skip
    """Whether a sequence of sub-window means (rows, in time order) has stopped trending: no
    column's slope over `batches` consecutive batch means is beyond the family-wise bound,
    unless its whole drift over the window is below `negligible` `units` (a probability
    creeping towards 0 or 1 trends without noise, and without consequence)."""
    grouped = batch_means(subs, batches)
    if grouped is None:
        return False
    t = trend_statistics(grouped)
    trending = np.abs(t) >= trend_threshold(grouped.shape[1], batches)
    if negligible > 0 and units is not None:
        drift = np.abs(grouped[-1] - grouped[0]) + np.abs(grouped.max(axis=0) - grouped.min(axis=0))
        trending &= drift / units >= negligible
    return not bool(np.any(trending))


def q_units(sd: np.ndarray) -> np.ndarray:
    """Per coordinate of the (mean, log sd) view: a mean in q's sds (absolute for a point
    estimate, sd 0), a log sd as it is."""
    return np.concatenate([np.where(sd > 0, sd, 1.0), np.ones_like(sd)])


def view(mean: np.ndarray, sd: np.ndarray) -> np.ndarray:
    return np.concatenate([mean, np.log(np.where(sd > 0, sd, 1.0))])


class OptimumRule:
    """The default end of the stochastic fits: iterate averaging over stationary phases with a
    decreasing step size (after Welandawe et al. 2022, "Robust, automated, and accurate
    black-box variational inference", and Dhaka et al. 2020).

    Within a phase the step size is fixed (up to the step rule's own decay). The iterates are
    summed in sub-windows of 10 iterations; the stationarity test looks at the second half of
    the phase, split into 10 batch means, and asks whether any coordinate of q (each mean and log
    sd) still trends (``stationary``). Once none does, the phase's answer is the average of the
    iterates over that half (Polyak-Ruppert), and the step size is halved for the next phase. A
    stochastic iterate's bias shrinks with the step size, so two successive phase averages that
    agree -- every mean within ``tol`` of q's sd, every sd within the fraction ``tol`` --
    say the average is at the optimum up to the iterates' own noise: the fit has converged.

    ``observe(theta, k, moments)`` after every iteration; ``decide(moments)`` at each ELBO
    evaluation returns None (go on), "decrease" (a phase ended: ``average`` holds its answer)
    or "converged". ``moments(theta)`` gives q's (mean, sd) per coordinate. Picklable (a
    checkpoint keeps it).
    """

    def __init__(self, size: int, tol: float = OPTIMUM_TOL, sub: int = _SUB,
                 mcse_tol: float = MCSE_TOL):  # fmt: skip
        self.tol, self.sub, self.mcse_tol = tol, sub, mcse_tol
        self.phases = 0
        self.previous: tuple[np.ndarray, np.ndarray] | None = None  # (view, its MCSE)
        self.average: np.ndarray | None = None
        self.change = np.inf
        self.last_change = np.inf
        self._new_phase(np.zeros(size), 0)

    def _new_phase(self, cumsum: np.ndarray, k: int) -> None:
        self.cumsum = cumsum
        self.subs: list[np.ndarray] = []
        self.snapshots: list[tuple[int, int, np.ndarray]] = [(0, k, cumsum.copy())]
        self.since = 0  # iterations since the last sub-window closed

    def observe(self, theta: np.ndarray, k: int, moments) -> None:
        self.cumsum = self.cumsum + theta
        self.since += 1
        if self.since < self.sub:
            return
        start = self.snapshots[-1][2]
        mean, sd = moments((self.cumsum - start) / self.since)
        self.subs.append(view(mean, sd))
        self.snapshots.append((len(self.subs), k, self.cumsum.copy()))
        self.since = 0
        if len(self.snapshots) > _KEEP:  # keep the newest and every other older one
            self.snapshots = self.snapshots[:-1:2][-(_KEEP // 2) :] + self.snapshots[-1:]

    def current_average(self, k: int) -> np.ndarray | None:
        """The average of the iterates since the snapshot nearest the middle of this phase (at
        the iteration cap: the best the rule has), or None before one whole sub-window."""
        n = len(self.subs)
        half = [s for s in self.snapshots if s[0] <= n // 2 and s[1] < k]
        if not n or not half:
            return None
        _, k0, sum0 = half[-1]
        return (self.cumsum - sum0) / (k - k0)

    def decide(self, theta: np.ndarray, k: int, moments) -> str | None:
        """At an ELBO evaluation: None, "decrease" or "converged" (see the class)."""
        if self.since:  # a sub-window is still open: the test waits for whole ones
            return None
        n = len(self.subs)
        half = [s for s in self.snapshots if s[0] <= n // 2]
        first, k0, sum0 = half[-1] if half else self.snapshots[0]
        subs = np.array(self.subs[first:])
        if n - first < _BATCHES:
            return None
        average = (self.cumsum - sum0) / (k - k0)
        mean, sd = moments(average)
        units = q_units(sd)
        if not stationary(subs, units=units, negligible=self.tol / 2.0):
            return None
        grouped = batch_means(subs)
        mcse = grouped.std(axis=0, ddof=1) / np.sqrt(len(grouped)) / units
        now = view(mean, sd)
        if self.previous is not None:
            before, noise = self.previous
            change = np.abs(now - before) / units
            self.last_change = float(np.max(change))
            # the step-size bias halves with the step: what is left beyond the two averages'
            # noise is this average's bias
            if np.all(change <= self.tol + 2.0 * np.sqrt(mcse**2 + noise**2)):
                if np.max(mcse) > self.mcse_tol:
                    return None  # unbiased, but still noisy: average longer at this step
                self.average, self.phases = average, self.phases + 1
                return "converged"
        self.average, self.phases = average, self.phases + 1
        self.previous = (now, mcse)
        self._new_phase(self.cumsum, k)
        return "decrease"
