"""Black-box variational inference: score-function gradients (Ranganath, Gerrish & Blei 2014).

The gradient of the ELBO is E_q[grad log q(z) (log p(x, z) - log q(z))] (eq. 3): it needs only
values of the log joint, so it works for latents that cannot be reparameterised (binary ones) and
for any family. The estimator -- Rao-Blackwellised over Markov blankets (eqs. 5-6), with control
variates (eqs. 8-10) -- is ppl.inference.estimators'; the family the composite one of
ppl.families.composite; the loop the stochastic fits' one (ppl.inference.loop).

Steps: the paper's AdaGrad (`optimizer="adagrad"`) shrinks every step by the whole gradient
history, so the large early score gradients freeze the scale parameters: on a 30-point linear
regression it needed 3200 iterations to an ELBO 0.6 nats short of ADVI's, where Stan's ADVI step
sequence (`"stan"`, the default: a decaying eta k^-1/2 over a moving RMS of the gradient) took 800
to match it. Any optimiser of `ppl.inference.optimizers` can be named. Stopping follows Stan's
relative-ELBO rule (ppl.inference.stopping) on the mean of each window of per-iteration ELBO
estimates, and the returned parameters are the average of the last window's iterates (the
score-function noise would otherwise stay in them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ppl.errors import FitError
from ppl.families.composite import MixedFamily, blocks_of
from ppl.inference import loop
from ppl.inference.checkpoint import Checkpointer
from ppl.inference.estimators import ESTIMATORS, LogJointTerms, log_joint_terms, score_gradient
from ppl.inference.optimizers import make_optimizer
from ppl.inference.stepsize import SCORE_ETA_GRID

__all__ = ["ESTIMATORS", "BBVIResult", "ScoreObjective", "fit_bbvi", "fit_stochastic",
           "setup_bbvi"]  # fmt: skip


@dataclass
class BBVIResult:
    family: object  # the objective: sample(theta, rng, n) and describe(theta)
    theta: np.ndarray
    elbo_trace: list[tuple[int, float]]
    elbo: float
    iterations: int
    grad_evals: int
    converged: bool
    eta: float
    seconds: float
    estimator: str
    optimizer: str = "stan"
    warnings: list[str] = field(default_factory=list)
    grad_samples: int = 100
    averaged: bool = True
    stopped_by: str = ""  # the loop's test that ended the fit (ppl.inference.loop.LoopResult)
    adapt_iterations: int = 0  # iterations of the step-size search (not in `iterations`)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.family.sample(self.theta, rng, n)

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        return self.family.log_q(self.theta, zeta)


class FamilyObjective:
    """A score-function objective for the loop: what it answers from its family alone (draws,
    log q, the description) and its bookkeeping. Subclasses give ``estimate(theta, rng)`` --
    (gradient, ELBO estimate, draws dropped), or None if most draws were not finite -- and
    ``fresh_elbo(theta, rng, n)``."""

    family: MixedFamily
    windowed = True  # the loop judges it by the mean of its per-iteration estimates
    steps = dropped = 0
    elbo_samples = 1000
    search_seed = 0  # the step-size search's draws: the same for every candidate eta

    def elbo(self, theta: np.ndarray) -> float:
        """The ELBO on fixed draws (common random numbers): what the step-size search compares
        its candidates by (a windowed objective's loop otherwise judges its own estimates)."""
        return self.fresh_elbo(theta, np.random.default_rng(self.search_seed), self.elbo_samples)

    def gradient(self, theta: np.ndarray, rng: np.random.Generator):
        self.steps += 1
        out = self.estimate(theta, rng)
        if out is None:
            self.dropped += self.draws_per_step
            return None
        grad, elbo, bad = out
        self.dropped += bad
        return grad, elbo

    def final_elbo(self, theta: np.ndarray, elbo: float, rng: np.random.Generator) -> float:
        """On fresh draws: the window means carry the iterates' noise."""
        return self.fresh_elbo(theta, rng, self.elbo_samples)

    def sample(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
        return self.family.rvs(theta, rng, n)

    def moments(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """q's mean and sd per block coordinate (the optimum rule's view). A binary block is
        judged by q(z = 1) in absolute units (sd 0): its logits may rightly run off to +-inf."""
        theta = np.asarray(theta, dtype=float)
        means, sds = [], []
        for _, fam, k in self.family.parts:
            part = theta[k : k + fam.size]
            if hasattr(fam, "moments"):
                mean, sd = fam.moments(part)
            else:
                mean, sd = 1.0 / (1.0 + np.exp(-part)), np.zeros(part.size)
            means.append(mean)
            sds.append(sd)
        return np.concatenate(means), np.concatenate(sds)

    def log_q(self, theta: np.ndarray, zeta: np.ndarray) -> np.ndarray:
        return self.family.log_q_terms(theta, zeta).sum(axis=1)

    def describe(self, theta: np.ndarray) -> dict[str, dict]:
        return self.family.describe(theta)

    def where(self, theta: np.ndarray) -> str:
        return ""

    def cannot_start(self, theta0: np.ndarray) -> str:  # a windowed objective has no start ELBO
        return ""

    def counters(self) -> tuple:
        return (self.steps, self.dropped)

    def set_counters(self, counters: tuple) -> None:
        self.steps, self.dropped = counters

    def dropped_of_draws(self) -> tuple[int, int]:
        return self.dropped, self.steps * self.draws_per_step


class ScoreObjective(FamilyObjective):
    """The ELBO of a composite family with score-function gradients (every latent)."""

    def __init__(self, family: MixedFamily, terms: LogJointTerms, estimator: str, draws: int):
        if estimator not in ESTIMATORS:
            raise FitError(f"unknown BBVI estimator {estimator!r}; choose one of {ESTIMATORS}")
        self.family, self.terms, self.estimator = family, terms, estimator
        self.draws_per_step = draws

    @property
    def warnings(self) -> list[str]:
        return self.terms.warnings

    def estimate(self, theta: np.ndarray, rng: np.random.Generator):
        zeta = self.family.rvs(theta, rng, self.draws_per_step)
        total, local = self.terms(zeta)
        ok = np.isfinite(total)
        if local is not None:
            ok &= np.all(np.isfinite(local), axis=1)
        if ok.sum() < max(3, self.draws_per_step // 2):
            return None
        zeta, total = zeta[ok], total[ok]
        local = None if local is None else local[ok]
        log_q = self.family.log_q_terms(theta, zeta)
        grad = score_gradient(self.family, theta, zeta, total, local, self.estimator, log_q)
        return grad, float(np.mean(total - log_q.sum(axis=1))), int((~ok).sum())

    def fresh_elbo(self, theta: np.ndarray, rng: np.random.Generator, n: int) -> float:
        zeta = self.family.rvs(theta, rng, n)
        total, _ = self.terms(zeta)
        with np.errstate(invalid="ignore"):
            values = total - self.family.log_q_terms(theta, zeta).sum(axis=1)
        return float(np.mean(values)) if np.all(np.isfinite(values)) else -np.inf


def fit_bbvi(
    terms: LogJointTerms,
    family: MixedFamily,
    init_zeta: np.ndarray,
    *,
    estimator: str = "rb+cv",
    grad_samples: int = 100,
    theta0: np.ndarray | None = None,
    **options,
) -> BBVIResult:
    """Score-function BBVI: `fit_stochastic` on a ScoreObjective."""
    objective = ScoreObjective(family, terms, estimator, grad_samples)
    theta = family.initial(init_zeta) if theta0 is None else np.array(theta0, dtype=float)
    result = fit_stochastic(objective, theta, **options)
    result.estimator, result.grad_samples = estimator, grad_samples
    result.grad_evals = result.iterations * grad_samples
    return result


def chain(first: BBVIResult, second: BBVIResult) -> BBVIResult:
    """`second`, continued from `first`: iterations, trace and warnings of both (the first
    phase's marked as such: its "not converged" is not the result's)."""
    second.iterations += first.iterations
    second.grad_evals += first.grad_evals
    second.adapt_iterations += first.adapt_iterations
    shifted = [(i + first.iterations, e) for i, e in second.elbo_trace]
    second.elbo_trace = first.elbo_trace + shifted
    earlier = [f"(first phase, Gaussian start) {w}" for w in first.warnings]
    second.warnings = [w for w in earlier if w not in second.warnings] + second.warnings
    return second


def fit_stochastic(
    objective,
    theta0: np.ndarray,
    *,
    optimizer: str = "stan",
    eta: float | None = None,
    max_iter: int = 10000,
    tol_rel_obj: float | None = 0.01,
    eval_elbo: int = 100,
    elbo_samples: int = 1000,
    seed: int = 0,
    progress: Callable[[int, float | None], None] | None = None,
    checkpoint: Checkpointer | None = None,
    search: bool = False,
) -> BBVIResult:
    """A score-function objective in the stochastic fits' loop (Stan's steps at eta = 1 unless
    given, or a named optimiser), until the windowed ELBO stops changing.

    `search` (Stan's steps, no eta given): eta is chosen by Stan's search over 1, 0.1, 0.01, each
    candidate judged by the ELBO on the same fixed draws (``FamilyObjective.elbo``), so the
    comparison is not Monte Carlo noise. Stan's steps move every parameter by about eta at
    first whatever its gradient, and a log sd moved by +3 makes q's draws overflow
    (docs/bbvi.md)."""
    rng = np.random.default_rng(seed)
    theta0 = np.array(theta0, dtype=float)
    if optimizer == "stan":
        eta = 1.0 if eta is None and not search else eta
        schedule, step = loop.step_rule(optimizer, eta, theta0.size)
    else:
        schedule, step = loop.step_rule(optimizer, eta, theta0.size)
        options = {} if eta is None else {"eta": eta}
        eta = make_optimizer(optimizer, theta0.size, **options).options.get("eta", float("nan"))
    objective.elbo_samples = elbo_samples
    objective.search_seed = seed + 1
    out = loop.run(
        objective, theta0, rng, max_iter=max_iter, tol_rel_obj=tol_rel_obj, eval_elbo=eval_elbo,
        eta=step, schedule=schedule, average=True, backoff=False, name="BBVI",
        progress=progress, checkpoint=checkpoint, adapt_seed=seed + 2, eta_grid=SCORE_ETA_GRID,
    )  # fmt: skip
    return BBVIResult(
        objective, out.theta, out.trace, out.elbo, out.iterations, out.iterations,
        out.converged, out.eta if optimizer == "stan" else eta, out.seconds,
        getattr(objective, "estimator", ""), optimizer, warnings=out.warnings,
        stopped_by=out.stopped_by, adapt_iterations=out.adapt_iterations,
    )  # fmt: skip


def setup_bbvi(
    model, families: dict[str, str], init: np.ndarray, rng: np.random.Generator
) -> tuple[MixedFamily, LogJointTerms, np.ndarray]:
    """The family, the blanket-summing log joint and the starting parameters for `model`.

    `families` maps each latent to gaussian / gamma / bernoulli; binary latents start with
    q(z = 1) = 1/2.
    """
    family = MixedFamily(blocks_of(model, families), model.dim)
    theta0 = family.initial(init)
    return family, log_joint_terms(model, family.rvs(theta0, rng, 2), rng), theta0
