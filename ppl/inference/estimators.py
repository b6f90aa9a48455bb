"""Gradient estimators of the ELBO, apart from the families they differentiate.

* pathwise (reparameterisation): :class:`Pathwise` chains one vectorised gradient of the log
  joint through the family's own ``grad`` (Stan's ADVI, DSVI's Algorithm 1); :func:`mean_log_joint`
  is the Monte Carlo mean autograd differentiates through a family's ``draws`` (SGVB);
* score function (Ranganath, Gerrish & Blei 2014): :func:`score_gradient`, Rao-Blackwellised over
  each coordinate's Markov blanket (:class:`LogJointTerms`, blankets from the graph IR) and with
  control variates h = grad log q scaled per component by a = Cov(f, h) / Var(h). The paper
  estimates a from the same draws, which biases the estimate by O(1/S); here draw s uses the a
  estimated from the other S - 1 draws, which is exactly unbiased.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp

from ppl.inference.blankets import Blankets, TermLayoutError
from ppl.runtime.signals import NeedsPerSample

#: The score-function estimators: plain, Rao-Blackwellised, Rao-Blackwellised + control variates.
ESTIMATORS = ("naive", "rb", "rb+cv")

LogJoint = Callable[[Any], Any]


class Pathwise:
    """The reparameterisation gradient, chained by hand from one vectorised gradient of the log
    joint through the family's ``grad`` (what Stan does; cheaper than differentiating through
    q), and ELBO estimates on the fixed draws ``elbo_eps``. Non-finite draws are dropped and
    counted; the counters travel with a checkpoint."""

    def __init__(
        self,
        log_joint: LogJoint,
        family,
        elbo_eps: np.ndarray,
        grad_log_joint: LogJoint | None = None,
    ):
        self.log_joint = log_joint
        # gradients may use a cheaper unbiased estimate of the log joint (a minibatch of rows)
        self.grad_log_joint = grad_log_joint or log_joint
        self.family = family
        self.elbo_eps = elbo_eps
        self.grad_evals = 0
        self.lp_evals = 0
        self.draws = 0  # draws evaluated (with or without gradient)
        self.dropped = 0

    def _check(self, lp: Any, n: int) -> np.ndarray:
        lp = np.asarray(lp, dtype=float)
        if lp.shape != (n,):
            raise ValueError(
                f"log_joint must map an ({n}, {self.family.dim}) array to shape ({n},); "
                f"it returned shape {lp.shape}"
            )
        return lp

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        """log_joint without gradient; a numerical failure of the whole batch counts as all-NaN."""
        with np.errstate(all="ignore"):
            try:
                return self._check(self.log_joint(zeta), zeta.shape[0])
            except (FloatingPointError, np.linalg.LinAlgError):
                return np.full(zeta.shape[0], np.nan)

    def elbo(self, theta: np.ndarray) -> float:
        """ELBO estimate on the fixed draws ``elbo_eps``; NaN when every draw is non-finite."""
        n = self.elbo_eps.shape[0]
        with np.errstate(all="ignore"):
            lp = self.log_density(self.family.zeta(theta, self.elbo_eps))
        ok = np.isfinite(lp)
        self.lp_evals += n
        self.draws += n
        self.dropped += int(n - ok.sum())
        if not ok.any():
            return float("nan")
        return float(np.mean(lp[ok]) + self.family.entropy(theta))

    def grad(self, theta: np.ndarray, eps: np.ndarray) -> np.ndarray | None:
        """ELBO gradient from the finite draws; None if no draw (or the result) is finite."""
        n = eps.shape[0]
        self.grad_evals += n
        self.draws += n
        with np.errstate(all="ignore"):
            zeta = self.family.zeta(theta, eps)
            try:
                vjp, lp = make_vjp(self.grad_log_joint)(zeta)
                lp = self._check(lp, n)
                g = np.asarray(vjp(np.ones(n)), dtype=float)
            except (FloatingPointError, np.linalg.LinAlgError):
                self.dropped += n
                return None
            ok = (
                np.isfinite(lp) & np.all(np.isfinite(g), axis=1) & np.all(np.isfinite(zeta), axis=1)
            )
            self.dropped += int(n - ok.sum())
            if not ok.any():
                return None
            grad = self.family.grad(theta, eps[ok], g[ok])
        return grad if np.all(np.isfinite(grad)) else None


def mean_over_finite(log_joint: Callable, zeta):
    """Mean over draws; draws with a non-finite density are dropped (Stan drops them too)."""
    raw = np.asarray(getattr(zeta, "_value", zeta))
    with np.errstate(all="ignore"):
        values = np.asarray(log_joint(raw), dtype=float)
    ok = np.isfinite(values)
    if ok.all():
        return anp.mean(log_joint(zeta)), 0
    if not ok.any():
        return -np.inf, len(values)
    return anp.mean(log_joint(zeta[np.flatnonzero(ok)])), int(np.sum(~ok))


def score_gradient(
    family,
    theta: np.ndarray,
    zeta: np.ndarray,
    total: np.ndarray,
    local: np.ndarray | None,
    estimator: str = "rb+cv",
    log_q: np.ndarray | None = None,
) -> np.ndarray:
    """The ELBO gradient estimate from S draws (eqs. 3, 6 and 10).

    `total` (S,) is log p(x, zeta_s); `local` (S, D) the part of it in each coordinate's Markov
    blanket (None: no Rao-Blackwellisation, every coordinate sees the whole log joint); `log_q`
    (S, D), when the caller has it, is `family.log_q_terms(theta, zeta)`.
    """
    if log_q is None:
        log_q = family.log_q_terms(theta, zeta)
    h = family.score(theta, zeta)
    col = family.param_column
    if estimator == "naive" or local is None:
        weight = (total - log_q.sum(axis=1))[:, None]
    else:
        weight = (local - log_q)[:, col]
    f = h * weight
    if estimator != "rb+cv":
        return f.mean(axis=0)
    return (f - _leave_one_out_scale(f, h) * h).mean(axis=0)


def _leave_one_out_scale(f: np.ndarray, h: np.ndarray) -> np.ndarray:
    """(S, P): a = Cov(f, h) / Var(h) per component, for each draw from the other draws."""
    S = f.shape[0]
    if S < 3:
        return np.zeros_like(f)
    n = S - 1
    sf, sh = f.sum(axis=0) - f, h.sum(axis=0) - h
    sfh, shh = (f * h).sum(axis=0) - f * h, (h * h).sum(axis=0) - h * h
    cov = sfh - sf * sh / n
    var = shh - sh * sh / n
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.where(var > 1e-300, cov / var, 0.0)
    return a


class LogJointTerms:
    """log p and the per-coordinate blanket sums for a batch of draws (the one model call)."""

    def __init__(self, model, blankets: Blankets | None):
        self.model = model
        self.blankets = blankets
        self.warnings: list[str] = []

    def __call__(self, zeta: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        with np.errstate(all="ignore"):
            if self.blankets is None:
                return np.asarray(self.model.log_joint(zeta, binary=True), dtype=float), None
            try:
                total, terms = self.model.log_terms(zeta)
            except NeedsPerSample:
                self.blankets = None
                self.warnings.append(
                    "Rao-Blackwellisation turned off: the model must be evaluated draw by draw"
                )
                return self(zeta)
            try:
                return total, self.blankets.local(total, terms)
            except TermLayoutError as e:
                self.blankets = None
                self.warnings.append(
                    f"Rao-Blackwellisation turned off: the model's log-joint terms changed ({e})"
                )
                return total, None


def log_joint_terms(
    model, draws: np.ndarray, rng: np.random.Generator, columns: np.ndarray | None = None
) -> LogJointTerms:
    """The log joint with Markov-blanket sums, the blankets probed at `draws` from the starting q
    (for the coordinates `columns`, default all).

    Each draw is probed as it is and with its binary coordinates flipped: a product z * w hides
    w's terms from the probe wherever z = 0.
    """
    from ppl.inference.blankets import find_blankets
    from ppl.ir.graph import build_graph

    binary = np.zeros(model.dim, dtype=bool)
    for lat in model.latents:
        binary[lat.offset : lat.offset + lat.size] = lat.binary
    points = []
    for point in draws:
        points += [point, np.where(binary, 1.0 - point, point)] if binary.any() else [point]
    try:
        graph = build_graph(model.checked, model)
        blankets = find_blankets(model, graph, points, rng, columns)
        note = None
    except (TermLayoutError, NeedsPerSample) as e:
        blankets = None
        note = f"Rao-Blackwellisation is off for this model ({e or type(e).__name__})"
    terms = LogJointTerms(model, blankets)
    if note is not None:
        terms.warnings.append(note)
    return terms
