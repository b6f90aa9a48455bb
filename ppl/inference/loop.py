"""The one loop of the stochastic fits (ADVI, full-rank ADVI, DSVI, SGVB, BBVI, and binary
latents' mixed fit): gradient steps, ELBO estimates every ``eval_elbo`` iterations, the stopping
rule (ppl.inference.stopping), recovery from non-finite values, and checkpoints.

An objective (the family with its gradient estimator) answers ``gradient(theta, rng)`` -- the
ELBO gradient, and this iteration's ELBO estimate when it has one, or None when no draw was
finite -- and ``elbo(theta)``, an ELBO estimate on fixed draws (common random numbers, so the
stopping rule sees progress rather than Monte Carlo noise). A *windowed* objective (score-function
gradients, whose per-iteration estimates are free) is judged instead by the mean of the window's
per-iteration estimates. Its counters travel with a checkpoint (``counters``, ``set_counters``).

Beyond Stan's loop, where users of Stan/PyMC VI complain (docs/advi.md):

* ``average``: the returned parameters are the mean of the last window's iterates (Polyak), far
  less noisy than the last iterate;
* ``backoff``: eta is halved whenever an ELBO estimate falls by more than ``tol_rel_obj``, so a
  too-large eta picked by the adaptation no longer bounces for all of ``max_iter``;
* the best-ELBO parameters are returned, with a warning, if the final ELBO is >5% worse (stan#1588);
* a non-finite gradient at every draw undoes the last step(s) and redoes them with half the step
  size, a bounded number of times, then a ``FitError`` says where and why (pymc#1714).

A checkpoint (ppl.inference.checkpoint) is the loop's whole state between two iterations; restoring
it
replays the draws the uninterrupted run would have made, so the result is the same bit for bit.
A fit of several loops (a Gaussian phase, then a gamma one) checkpoints each as a stage: a resumed
fit takes the finished stages' results from the checkpoint and resumes the one under way.
"""

from __future__ import annotations

import copy
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ppl.errors import FitError
from ppl.inference.checkpoint import Checkpointer, Interrupted
from ppl.inference.optimizers import make_optimizer
from ppl.inference.stepsize import ETA_GRID, PhaseStepSize, StanStepSize
from ppl.inference.stopping import STAN_TOL_REL_OBJ, OptimumRule, StoppingRule
from ppl.progress import start_phase

_MAX_CONSECUTIVE_FAILURES = 10  # Stan retries a failed gradient up to 10 times
_MAX_HALVINGS = 30  # eta shrinks by 2^30 ~ 1e9 at most before we give up
_MAX_ELBO_FAILURES = 3
ADVICE = (
    "Check that every parameter has a proper prior, that the data satisfy the model's constraints, "
    "rescale data and predictors to unit scale, try a smaller initialisation radius, or pass a "
    "smaller eta."
)


class OptimizerSteps:
    """A named optimiser of ppl.inference.optimizers as a step rule (its own eta inside)."""

    def __init__(self, name: str, size: int, **options: float):
        self.optimizer = make_optimizer(name, size, **options)

    def direction(self, grad: np.ndarray) -> np.ndarray:
        return self.optimizer.step(grad)


def step_rule(optimizer: str, eta: float | None, size: int, schedule=StanStepSize):
    """(make the step rule, eta): Stan's sequence (`optimizer` "stan", scaled by eta, None to
    adapt it) or a named optimiser, whose steps the loop scales by 1 (halved on failures)."""
    if optimizer == "stan":
        return schedule, eta
    options = {} if eta is None else {"eta": eta}
    make_optimizer(optimizer, size, **options)  # a bad name or option fails before the loop
    return (lambda n: OptimizerSteps(optimizer, n, **options)), 1.0


@dataclass
class LoopResult:
    """What the loop found: the parameters, the trace and the counters (picklable: a finished
    stage is kept in the checkpoint)."""

    theta: np.ndarray
    elbo: float
    trace: list[tuple[int, float]]
    iterations: int
    converged: bool
    eta: float
    eta_final: float
    warnings: list[str]
    counters: tuple
    seconds: float
    adapt_iterations: int = 0
    eta_trials: list[tuple[float, float]] = field(default_factory=list)
    stopped_by: str = ""  # "optimum", "relative ELBO" or "" (the iteration cap)
    phases: int = 0  # step-size phases the optimum rule finished


@dataclass
class LoopState:
    """Everything the loop changes: what a checkpoint saves between two iterations."""

    theta: np.ndarray
    eta: float
    eta0: float
    steps: Any  # the step rule, with its gradient history
    rule: StoppingRule
    window_sum: np.ndarray  # Polyak averaging since the last ELBO evaluation
    trace: list[tuple[int, float]]
    cand: np.ndarray
    cand_elbo: float
    best: tuple[float, np.ndarray, int]
    adapt_used: int = 0
    trials: list[tuple[float, float]] = field(default_factory=list)
    k: int = 0
    window_n: int = 0
    estimates: list[float] = field(default_factory=list)  # a windowed objective's, this window
    # Earlier iterates, newest last: each consecutive failure steps one further back (a single
    # undo is not enough when q has drifted to where most draws already fail).
    history: deque = field(default_factory=lambda: deque(maxlen=_MAX_CONSECUTIVE_FAILURES))
    fails: int = 0
    halvings: int = 0
    elbo_fails: int = 0
    failed_at: list[int] = field(default_factory=list)
    diverging_warned: bool = False
    converged: bool = False
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0  # spent before the last checkpoint
    saved_at: int = -1
    optimum: OptimumRule | None = None  # the default rule (tol_rel_obj None), else Stan's
    # The newest iterate whose gradient had every draw finite: a failure goes back to it (the
    # iterates can drift, a little at a time, to where half the draws fail; one step back from
    # there is still there, and no smaller step helps).
    safe: np.ndarray | None = None
    # The step rule as it was at `safe`: gradients drawn where q overflows can push its
    # squared-gradient history to inf, which freezes those coordinates for good (a step of
    # g / inf); going back to `safe` goes back to its history too.
    safe_steps: Any = None
    given_up: str = ""  # why the loop stopped early with its candidate (no stable step found)


def _trial(objective, theta0: np.ndarray, eta: float, n_iter: int, seed: int, schedule,
           checkpoint: Checkpointer | None = None, average: bool = False):  # fmt: skip
    """Run ``n_iter`` iterations at step size ``eta``; return (ELBO or -inf, iterations, reason).
    A stop request (SIGINT/SIGTERM under --checkpoint) ends the search at once: it has nothing
    worth saving yet. `average`: judge the mean of the second half's iterates (what the loop
    returns), not the last one, whose noise grows with eta (score-function gradients: the
    last iterate's noise made the search prefer eta 0.01, at which the fit then crawled)."""
    rng = np.random.default_rng(seed)  # same draws for every eta: a fair comparison
    theta = theta0.copy()
    steps = schedule(theta.size)
    total, counted = np.zeros_like(theta), 0
    for k in range(1, n_iter + 1):
        if checkpoint is not None and checkpoint.stop_signal is not None:
            name = signal.Signals(checkpoint.stop_signal).name
            raise Interrupted(f"{name} during the step-size search, before the first "
                              "iteration: nothing to save; run the same command again",
                              checkpoint.stop_signal)  # fmt: skip
        out = objective.gradient(theta, rng)
        if out is None:
            return -np.inf, k, f"non-finite log density at every draw (iteration {k})"
        theta = theta + eta * steps.direction(out[0])
        if not np.all(np.isfinite(theta)):
            return -np.inf, k, f"variational parameters overflowed (iteration {k})"
        if average and 2 * k > n_iter:
            total, counted = total + theta, counted + 1
    elbo = objective.elbo(total / counted if counted else theta)
    if not np.isfinite(elbo):
        return -np.inf, n_iter, "non-finite ELBO"
    return elbo, n_iter, ""


def adapt_eta(
    objective,
    theta0: np.ndarray,
    elbo0: float,
    adapt_iter: int,
    seed: int,
    schedule=StanStepSize,
    checkpoint: Checkpointer | None = None,
    grid: tuple[float, ...] = ETA_GRID,
    average: bool = False,
) -> tuple[float, int, list[tuple[float, float]]]:
    """Stan's adapt_eta: try the eta grid from the same start; keep the best by ELBO, stop once
    it gets worse."""
    best_eta, best_elbo, used = None, -np.inf, 0
    trials: list[tuple[float, float]] = []
    reasons: list[str] = []
    for eta in grid:
        elbo, n, reason = _trial(objective, theta0, eta, adapt_iter, seed, schedule, checkpoint,
                                 average)  # fmt: skip
        used += n
        trials.append((eta, float(elbo)))
        reasons.append(f"eta={eta:g}: " + (reason or f"ELBO {elbo:.6g}"))
        if elbo < best_elbo and best_elbo > elbo0:
            break  # Stan's early stop: the previous (larger) eta already improved on the start
        if elbo > best_elbo:
            best_eta, best_elbo = eta, elbo
    # Stan demands strictly beating the initial ELBO; we allow a 5% tie band because when the
    # start is already (near) optimal no step size can improve on it, and that is not a failure.
    if best_eta is None or best_elbo < elbo0 - 0.05 * max(abs(elbo0), 1.0):
        raise FitError(
            "All proposed step-sizes failed. Your model may be either severely ill-conditioned or "
            f"misspecified. Initial ELBO {elbo0:.6g}; after {adapt_iter} iterations each: "
            + "; ".join(reasons)
            + ". "
            + ADVICE
        )
    return best_eta, used, trials


def run(
    objective,
    theta0: np.ndarray,
    rng: np.random.Generator,
    *,
    max_iter: int,
    tol_rel_obj: float | None,
    eval_elbo: int = 100,
    eta: float | None = None,
    schedule: Callable[[int], Any] = StanStepSize,
    adapt_iter: int = 50,
    adapt_seed: int = 0,
    eta_grid: tuple[float, ...] = ETA_GRID,
    average: bool = True,
    backoff: bool = True,
    name: str = "ADVI",
    progress: Callable[[int, float | None], None] | None = None,
    monitor: Callable[[int, np.ndarray], None] | None = None,
    checkpoint: Checkpointer | None = None,
) -> LoopResult:
    """Stochastic ascent on `objective` from `theta0` until the stopping rule or `max_iter`.

    ``tol_rel_obj=None`` ends the fit at its optimum (ppl.inference.stopping.OptimumRule:
    stationary phases, their iterate averages, a halved step size between them); a number
    ends it by Stan's relative-ELBO rule at that tolerance.

    ``schedule(size)`` makes the step rule (``direction(grad)``, scaled by eta; see step_rule);
    ``eta=None`` adapts eta over Stan's grid first. ``progress(iteration, elbo_or_None)`` is
    called after every iteration, ``monitor(iteration, mean)`` at every ELBO evaluation.
    ``checkpoint`` saves the state every ``checkpoint.every`` iterations and on a stop request,
    and resumes from it. Raises ``FitError`` when no finite approximation can be found.
    """
    start = time.perf_counter()
    stage, finished, resumed = (None, None, None) if checkpoint is None else checkpoint.begin()
    if finished is not None:
        return finished
    if checkpoint is not None:
        checkpoint.between_loops = False
    windowed = getattr(objective, "windowed", False)
    if resumed is not None:
        s: LoopState = resumed["loop"]
        rng.bit_generator.state = resumed["rng"]
        objective.set_counters(resumed["counters"])
        checkpoint.restore_extras()
        start -= s.seconds
    else:
        s = _start(
            objective, np.array(theta0, dtype=float), eta, schedule, windowed,
            new_rule=lambda elbo0: StoppingRule(max_iter, eval_elbo, tol_rel_obj or
                                                STAN_TOL_REL_OBJ, elbo0),
            adapt=(adapt_iter, adapt_seed, eta_grid), progress=progress, checkpoint=checkpoint,
            optimum=tol_rel_obj is None,
        )  # fmt: skip
    moments = _moments(objective)

    start_phase(progress, f"stochastic ELBO optimisation (eta {s.eta:g})")

    def snapshot() -> dict:
        s.seconds = time.perf_counter() - start
        return {"loop": s, "rng": rng.bit_generator.state, "counters": objective.counters()}

    while s.k < max_iter:
        if checkpoint is not None:
            if checkpoint.stop_signal is not None:
                checkpoint.save(stage, snapshot())
                raise checkpoint.interrupted(s.k)
            if s.k % checkpoint.every == 0 and s.k != s.saved_at:
                s.saved_at = s.k
                checkpoint.save(stage, snapshot())
        out = _gradient(objective, s, rng)
        if out is None:
            _step_back(objective, s, name)
            if s.given_up:
                break
            continue
        s.fails = 0
        grad, estimate = out
        _step(s, grad, name)
        k = s.k
        if s.optimum is not None:
            s.optimum.observe(s.theta, k, moments)
        if windowed and estimate is not None:
            s.estimates.append(estimate)

        elbo_k = None
        if k % eval_elbo == 0:
            elbo_k = _judge(objective, s, name, eval_elbo, average, backoff, windowed)
            if s.optimum is not None and elbo_k is not None:
                _phase(objective, s, moments, windowed)
            if monitor is not None:
                monitor(k, objective.mean(s.cand))
        if progress is not None:
            progress(k, elbo_k)
        if s.converged:
            break

    result = _finish(objective, s, rng, max_iter, tol_rel_obj, average, windowed, start)
    if checkpoint is not None:
        checkpoint.finish(stage, result)
    return result


def _start(
    objective, theta0: np.ndarray, eta: float | None, schedule, windowed: bool, *,
    new_rule: Callable[[float | None], StoppingRule], adapt: tuple[int, int, tuple],
    progress, checkpoint: Checkpointer | None, optimum: bool = False,
) -> LoopState:  # fmt: skip
    """The state at iteration 0 of a fresh fit: eta adapted over Stan's grid when not given
    (`adapt`: its iterations per trial, its seed and the grid). `optimum`: ended by the optimum
    rule, which decreases eta itself by phases (so Stan's sequence loses its t^-1/2 decay)."""
    if optimum and schedule is StanStepSize:
        schedule = PhaseStepSize
    elbo0 = None if windowed else objective.elbo(theta0)
    if elbo0 is not None and not np.isfinite(elbo0):
        raise FitError(objective.cannot_start(theta0) + " " + ADVICE)
    adapt_used, trials = 0, []
    if eta is None:
        start_phase(progress, "step-size adaptation (Stan's eta grid)")
        counters = objective.counters()
        eta, adapt_used, trials = adapt_eta(
            objective, theta0, objective.elbo(theta0) if windowed else elbo0, adapt[0],
            adapt[1], schedule, checkpoint, adapt[2], average=windowed,
        )  # fmt: skip
        if windowed:  # its dropped-draw count is the fit's (the search's trials may overflow)
            objective.set_counters(counters)
    no_elbo = -np.inf if elbo0 is None else elbo0
    return LoopState(
        theta=theta0.copy(),
        eta=float(eta),
        eta0=float(eta),
        steps=schedule(theta0.size),
        rule=new_rule(elbo0),
        window_sum=np.zeros_like(theta0),
        trace=[] if elbo0 is None else [(0, elbo0)],
        cand=theta0,
        cand_elbo=no_elbo,
        best=(no_elbo, theta0, 0),
        adapt_used=adapt_used,
        trials=trials,
        optimum=OptimumRule(theta0.size) if optimum else None,
    )


def _gradient(objective, s: LoopState, rng: np.random.Generator):
    """(gradient, estimate) at the iterate, or None when not finite; an iterate where every
    draw was finite becomes the one a failure goes back to."""
    dropped = objective.dropped_of_draws()[0]
    out = objective.gradient(s.theta, rng)
    if out is None or not np.all(np.isfinite(out[0])):
        return None
    if objective.dropped_of_draws()[0] == dropped:
        s.safe, s.safe_steps = s.theta, copy.deepcopy(s.steps)
    return out


def _step_back(objective, s: LoopState, name: str) -> None:
    """No finite gradient at any draw: go back to the newest iterate where every draw was finite
    (else one step further back per consecutive failure) with half the step size. Once that has
    failed too often, stop with the candidate if its ELBO is still finite (the fit ends NOT
    converged, saying why), else raise."""
    s.fails += 1
    if s.fails > _MAX_CONSECUTIVE_FAILURES or s.halvings >= _MAX_HALVINGS:
        why = (f"the log density or its gradient was non-finite at all "
               f"{objective.draws_per_step} draws in {s.fails} consecutive attempts, after "
               f"halving the step size {s.halvings} times (eta {s.eta0:g} -> "
               f"{s.eta:.3g})")  # fmt: skip
        if _still_finite(objective, s):
            s.given_up = f"{name} stopped at iteration {s.k + 1}: {why}."
            return
        raise FitError(f"{name} failed at iteration {s.k + 1}: {why}. "
                       f"{objective.where(s.theta)}" + ADVICE)  # fmt: skip
    if s.safe is not None and s.safe is not s.theta:
        restored = s.safe
        s.steps = copy.deepcopy(s.safe_steps)
    elif s.history:
        restored = s.history.pop()
    else:
        return
    s.eta /= 2.0
    s.halvings += 1
    s.failed_at.append(s.k)
    if s.window_n:
        s.window_sum += restored - s.theta
    s.theta = restored


def _still_finite(objective, s: LoopState) -> bool:
    """Whether the loop's candidate (a window or phase average, or the start) still has a finite
    ELBO: then stopping with it beats an error the user cannot act on."""
    if not s.trace:
        return False
    if getattr(objective, "windowed", False):
        return bool(np.isfinite(s.cand_elbo))
    return bool(np.isfinite(objective.elbo(s.cand)))


def _step(s: LoopState, grad: np.ndarray, name: str) -> None:
    """One gradient step (shrunk until the parameters stay finite), into the Polyak window."""
    direction = s.steps.direction(grad)
    new = s.theta + s.eta * direction
    while not np.all(np.isfinite(new)) and s.halvings < _MAX_HALVINGS:
        s.eta /= 2.0  # overflow (e.g. exp(omega)): shrink this step until it is finite
        s.halvings += 1
        s.failed_at.append(s.k + 1)
        new = s.theta + s.eta * direction
    if not np.all(np.isfinite(new)):
        raise FitError(
            f"{name} failed at iteration {s.k + 1}: the variational parameters "
            f"overflowed even with eta={s.eta:.3g}. " + ADVICE
        )
    s.history.append(s.theta)
    s.theta = new
    s.k += 1
    s.window_sum += s.theta
    s.window_n += 1


def _judge(
    objective, s: LoopState, name: str, eval_elbo: int, average: bool, backoff: bool,
    windowed: bool,
) -> float | None:  # fmt: skip
    """At the end of a window: its ELBO estimate (None if non-finite, raising after a few in a
    row) fed to the stopping rule, the best iterate, eta's backoff and the divergence warning."""
    k = s.k
    elbo_k = _evaluate(objective, s, average, windowed)
    if not np.isfinite(elbo_k):
        s.elbo_fails += 1
        if s.elbo_fails >= _MAX_ELBO_FAILURES:
            raise FitError(
                f"{name} failed at iteration {k}: the ELBO estimate was "
                f"non-finite at {s.elbo_fails} evaluations in a row. " + ADVICE
            )
        s.warnings.append(f"The ELBO estimate at iteration {k} was non-finite and skipped.")
        return None
    s.elbo_fails = 0
    if backoff and len(s.trace) > 1 and s.rule.fell(elbo_k):
        s.eta /= 2.0  # the iterates bounce instead of climbing: the step is too large
    s.cand_elbo = elbo_k
    s.trace.append((k, elbo_k))
    if elbo_k > s.best[0]:
        s.best = (elbo_k, s.cand, k)
    met = s.rule.update(elbo_k)
    if s.optimum is None:
        s.converged = met
    rel_mean, rel_med = s.rule.mean_median()
    if k > 10 * eval_elbo and max(rel_mean, rel_med) > 0.5 and not s.diverging_warned:
        s.diverging_warned = True
        s.warnings.append(
            f"MAY BE DIVERGING... INSPECT ELBO: at iteration {k} the mean / median "
            f"relative ELBO change was {rel_mean:.3g} / {rel_med:.3g} (> 0.5)."
        )
    return elbo_k


def _moments(objective) -> Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """q's (mean, sd) per coordinate, as the optimum rule judges it: the objective's own, or
    the parameters themselves in their own units when it has none."""
    own = getattr(objective, "moments", None)
    if own is not None:
        return own
    return lambda theta: (np.asarray(theta, dtype=float), np.ones(np.size(theta)))


def _phase(objective, s: LoopState, moments, windowed: bool) -> None:
    """The optimum rule at an ELBO evaluation: at the end of a stationary phase its iterate
    average becomes the candidate, and the step size is halved unless the fit has converged."""
    verdict = s.optimum.decide(s.theta, s.k, moments)
    if verdict is None:
        return
    s.cand = s.optimum.average
    if not windowed:
        elbo = objective.elbo(s.cand)
        if np.isfinite(elbo):
            s.cand_elbo = elbo
            if elbo > s.best[0]:
                s.best = (elbo, s.cand, s.k)
    if verdict == "converged":
        s.converged = True
    else:
        s.eta *= 0.5


def _evaluate(objective, s: LoopState, average: bool, windowed: bool) -> float:
    """The window's candidate (the mean of its iterates, or the last) and its ELBO estimate."""
    s.cand = s.window_sum / s.window_n if average else s.theta
    s.window_sum, s.window_n = np.zeros_like(s.theta), 0
    if windowed:
        elbo = float(np.mean(s.estimates)) if s.estimates else float("nan")
        s.estimates = []
        return elbo
    elbo = objective.elbo(s.cand)
    if not np.isfinite(elbo) and average:
        s.cand, elbo = s.theta, objective.elbo(s.theta)
    return elbo


def _finish(objective, s: LoopState, rng, max_iter, tol_rel_obj, average, windowed, start):
    k, best, warnings = s.k, s.best, s.warnings
    cand, cand_elbo = s.cand, s.cand_elbo
    tail = None if s.optimum is None or s.converged else s.optimum.current_average(k)
    if tail is not None and not windowed:  # the cap: the average of this phase's second half
        tail_elbo = objective.elbo(tail)
        if np.isfinite(tail_elbo):
            cand, cand_elbo = tail, tail_elbo
            if tail_elbo > best[0]:
                best = (tail_elbo, tail, k)
    elif s.window_n and not windowed:  # max_iter is not a multiple of eval_elbo: finish the window
        cand = s.window_sum / s.window_n if average else s.theta
        cand_elbo = objective.elbo(cand)
        if not np.isfinite(cand_elbo) and average:
            cand, cand_elbo = s.theta, objective.elbo(s.theta)
        if np.isfinite(cand_elbo) and cand_elbo > best[0]:
            best = (cand_elbo, cand, k)
    elif windowed and not s.trace:  # stopped before a whole window: its iterates as they are
        cand, cand_elbo = s.theta, -np.inf
    final_theta, final_elbo = cand, cand_elbo
    if np.isfinite(best[0]) and (
        not np.isfinite(final_elbo) or (best[0] - final_elbo) / max(abs(final_elbo), 1.0) > 0.05
    ):
        if np.isfinite(final_elbo):
            warnings.append(
                f"The ELBO at a previous iteration is larger than the ELBO upon "
                f"{'convergence' if s.converged else 'stopping'}! ({best[0]:.6g} at iteration "
                f"{best[2]} vs {final_elbo:.6g} at iteration {k}); returning the approximation "
                "from that iteration. It may not have converged to a good optimum."
            )
        final_elbo, final_theta = best[0], best[1]
    final_elbo = objective.final_elbo(final_theta, final_elbo, rng)
    if not np.isfinite(final_elbo) and not windowed:
        raise FitError("ADVI produced no finite ELBO estimate. " + ADVICE)
    if s.given_up:
        warnings.append(f"{s.given_up} The approximation is the last finite candidate, NOT "
                        "converged; a smaller --eta may let the fit go on.")  # fmt: skip
    elif not s.converged:
        criterion = f"tol_rel_obj={tol_rel_obj or STAN_TOL_REL_OBJ:g}"
        if s.optimum is not None:
            o = s.optimum
            last = (f"the last two differed by {o.last_change:.2g} sd"
                    if np.isfinite(o.last_change) else f"{o.phases} stationary phases")  # fmt: skip
            criterion = (f"iterates stationary, and two successive averages within {o.tol:g} sd "
                         f"beyond their noise; {last}")  # fmt: skip
        warnings.append(
            f"The maximum number of iterations ({max_iter}) was reached without meeting the "
            f"convergence criterion ({criterion}); the approximation may not be "
            "meaningful. Run longer with --iter, or inspect the ELBO trace."
        )  # fmt: skip
    if s.halvings:
        failed = s.failed_at
        warnings.append(
            f"The step size was halved {s.halvings} times (eta {s.eta0:g} -> {s.eta:.3g}) to "
            f"recover from non-finite log densities or gradients (at iterations {failed[:10]}"
            f"{' ...' if len(failed) > 10 else ''})."
        )
    warnings = list(getattr(objective, "warnings", [])) + warnings
    dropped, draws = objective.dropped_of_draws()
    if dropped:
        warnings.append(
            f"{dropped} of {draws} Monte Carlo draws ({100.0 * dropped / draws:.2g}%) "
            "had a non-finite log density or gradient and were dropped; if this is more than a few "
            "percent the approximation may be biased. " + ADVICE
        )
    return LoopResult(
        theta=final_theta, elbo=float(final_elbo), trace=s.trace, iterations=k,
        converged=s.converged, eta=s.eta0, eta_final=s.eta, warnings=warnings,
        counters=objective.counters(), seconds=time.perf_counter() - start,
        adapt_iterations=s.adapt_used, eta_trials=s.trials,
        stopped_by=("" if not s.converged else "relative ELBO" if s.optimum is None
                    else "optimum"),
        phases=0 if s.optimum is None else s.optimum.phases,
    )  # fmt: skip
