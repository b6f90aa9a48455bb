"""The ELBO on a fixed set of draws, maximised by L-BFGS, with the set grown until the optimum
stops moving (the sample-average approximation).

With the noise fixed (eps for Gaussian blocks, u = Phi(eps) for gamma blocks) the ELBO is an
ordinary smooth function of q's parameters, so quasi-Newton steps take it to its optimum in tens
of iterations ("DADVI", Giordano, Ingram & Broderick 2024). The optimum of a finite set is off the
true one by its Monte Carlo error; Burroni, Domke & Sheldon (2024) grow the set between solves.
Here: solve on a small scrambled-Sobol set; on a new set four times larger, take one gradient at
that optimum and predict the optimum's move by the L-BFGS inverse-Hessian approximation (by
conjugate gradients where that is near the threshold: REFINE_BAND); stop if q's means would move
by less than `MOVE_TOL` sds and its sds by that fraction, else solve on the larger set from
there, stop if it moved that little, and repeat.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, is_dataclass, replace
from functools import partial

import autograd.numpy as anp
import numpy as np
from autograd import grad, value_and_grad
from autograd.tracer import getval

from ppl.families.gamma import LOG_X_FLOOR
from ppl.families.gamma_quantile import WARM
from ppl.inference.chunked import chunked
from ppl.inference.deterministic import guarded_mean, minimise, reached_optimum
from ppl.inference.draws import fixed_normal_draws
from ppl.inference.pair_scale import PairScale
from ppl.inference.race import Race, Rival
from ppl.inference.sgvb import MixedFamily, SGVBResult
from ppl.progress import start_phase

#: Draws of the first solve, and the growth factor between solves.
FIRST_DRAWS, GROWTH = 8, 4
#: The largest set solved on.
MAX_DRAWS = 512
#: Stop growing when q's means would move by less than this many sds and its sds by less than
#: this fraction, in root mean square over the coordinates, and none by more than 4 times it.
MOVE_TOL = 0.05
#: A solve ends when its last STALL[0] iterations gained less than STALL[1] nats in all: far
#: below the fixed-draw ELBO's Monte Carlo error. On the epilepsy model's gamma frailties the
#: 32-draw solve crept 0.05 nats in its last 660 iterations (21,000 gradient evaluations).
STALL = (50, 0.01)
#: ... and, in the first round, less than MC_STALL times the plain fixed-draw ELBO's Monte Carlo
#: error (the sd of log p over the draws / sqrt(draws)): a gain the draws cannot tell from noise
#: is the next, larger round's to make. The edge partition model's 8-draw round from the plain
#: start ran 767-838 iterations, the last 450 of them gaining 13 nats against a Monte Carlo
#: error of ~9. (Not in later rounds: their creep is what shows an improper posterior,
#: y ~ cauchy(mu, s) with flat priors, s drifting up; and only where q has gamma blocks.)
MC_STALL = 1.0


def whitened_draws(n: int, dim: int, seed: int) -> np.ndarray:
    """Scrambled-Sobol standard-normal draws moved to sample mean exactly 0 and sample
    covariance exactly I (per column's variance when there are fewer draws than dimensions):
    the fixed-draw ELBO of a Gaussian q is then exact for every quadratic part of log p, so
    a Gaussian posterior's optimum needs no more draws than that."""
    eps = fixed_normal_draws(n, dim, seed)
    eps = eps - eps.mean(axis=0)
    if len(eps) > dim + 1:
        try:
            L = np.linalg.cholesky(eps.T @ eps / len(eps))
            return np.linalg.solve(L, eps.T).T
        except np.linalg.LinAlgError:
            pass
    return eps / np.maximum(np.sqrt(np.mean(eps**2, axis=0)), 1e-12)


class FloorExtended:
    """The log joint with draws of a gamma block's log x below LOG_X_FLOOR (where the model's
    exp(zeta) underflows and its density is -inf) evaluated at the floor and continued linearly
    by the gradient there: exact to e^-708 for a density that is a power of x near 0 (a gamma
    prior's), where a non-finite density would count as the worst finite one less a penalty,
    and the control variates' regression would be lost."""

    def __init__(self, log_joint: Callable, columns: np.ndarray):
        self.log_joint, self.columns = log_joint, columns

    def __call__(self, zeta):
        raw = np.asarray(getval(zeta))
        below = np.zeros(raw.shape, dtype=bool)
        below[:, self.columns] = raw[:, self.columns] < LOG_X_FLOOR
        if not below.any():
            return self.log_joint(zeta)
        at = anp.where(below, LOG_X_FLOOR, zeta)
        with np.errstate(all="ignore"):
            slope = np.asarray(grad(lambda z: anp.sum(self.log_joint(z)))(np.asarray(getval(at))))
        slope = np.where(np.isfinite(slope), slope, 0.0)
        extra = anp.sum(anp.where(below, slope * (zeta - LOG_X_FLOOR), 0.0), axis=1)
        return self.log_joint(at) + extra


def floor_extended(log_joint: Callable, family) -> Callable:
    """log_joint, as FloorExtended where q has gamma blocks."""
    base = family.family if isinstance(family, Preconditioned) else family
    columns = np.flatnonzero(getattr(base, "gamma_columns", np.zeros(0, dtype=bool)))
    if len(columns) == 0 or isinstance(log_joint, FloorExtended):
        return log_joint
    return FloorExtended(log_joint, columns)


def movement(change: np.ndarray) -> float:
    """One number for MOVE_TOL's rule from a family's unitless changes: the larger of their
    root mean square and a quarter of the largest."""
    if change.size == 0:
        return 0.0
    with np.errstate(all="ignore"):
        value = float(max(np.sqrt(np.mean(change**2)), np.max(change) / 4))
    return value if np.isfinite(value) else np.inf


class Preconditioned:
    """A family in coordinates a with theta = theta0 + P a: the Gaussian blocks' means move
    along the Cholesky factor of the inverse of their block of the mode's precision -H, so the
    means' sub-problem is well conditioned on a correlated posterior (for a Gaussian one, its
    Hessian is the identity); the other parameters move as they are."""

    def __init__(self, family: MixedFamily, theta0: np.ndarray, precision: np.ndarray | None):
        self.family, self.dim = family, family.dim
        self.theta0 = np.asarray(theta0, dtype=float)
        self.size = len(self.theta0)
        # P is the identity but on the means' positions, where it is the block `factor`: kept
        # as that block, so theta(a) costs O(size + means^2), not a dense size x size product
        # (gamma_normal: 3,686 parameters, 24 of them Gaussian means; 40% of its fit's time)
        self.positions, self.factor = np.zeros(0, dtype=int), np.zeros((0, 0))
        positions, coords = family.mean_positions()
        if precision is not None and len(coords):
            block = precision[np.ix_(coords, coords)]
            try:
                cov = np.linalg.inv(block)
                self.factor = np.linalg.cholesky(0.5 * (cov + cov.T))
            except np.linalg.LinAlgError:  # not positive definite: scale by the diagonal only
                diag = np.abs(np.diag(block))
                self.factor = np.diag(np.where(diag > 0, 1 / np.sqrt(diag), 1.0))
            self.positions = positions
        # theta = theta0 + concatenate([a, factor @ a[positions]])[self._gather]
        self._gather = np.arange(self.size)
        self._gather[self.positions] = self.size + np.arange(len(self.positions))

    @property
    def P(self) -> np.ndarray:
        """The dense matrix of theta = theta0 + P a (for inspection; theta does not use it)."""
        P = np.eye(self.size)
        P[np.ix_(self.positions, self.positions)] = self.factor
        return P

    def theta(self, a):
        if not len(self.positions):
            return self.theta0 + a
        means = anp.dot(self.factor, a[self.positions])
        return self.theta0 + anp.concatenate([a, means])[self._gather]

    def draws(self, a, eps: np.ndarray):
        return self.family.draws(self.theta(a), eps)

    def control_columns(self) -> np.ndarray:
        return self.family.control_columns()

    def control_features(self, zeta):
        return self.family.control_features(zeta)

    def exact_means(self, a):
        return self.family.exact_means(self.theta(a))

    def mean_map(self, a):
        return self.family.mean_map(self.theta(a))

    def changes(self, before, after) -> np.ndarray:
        def theta(a):
            return np.asarray(self.theta(np.asarray(a, dtype=float)))

        return self.family.changes(theta(before), theta(after))


def elbo_on(log_joint: Callable, family: MixedFamily, theta, eps: np.ndarray) -> float:
    """The fixed-draw ELBO (no gradient); -inf when a draw has a non-finite density."""
    log_joint = floor_extended(log_joint, family)
    zeta, entropy = family.draws(np.asarray(theta, dtype=float), eps)
    with np.errstate(all="ignore"):
        lp = np.asarray(log_joint(np.asarray(zeta)), dtype=float)
    return float(np.mean(lp) + entropy) if np.all(np.isfinite(lp)) else -np.inf


def fit_fixed_draws(
    log_joint: Callable,
    family: MixedFamily,
    theta0: np.ndarray,
    *,
    seed: int = 0,
    first_draws: int = FIRST_DRAWS,
    max_draws: int = MAX_DRAWS,
    max_iter: int = 1000,
    progress: Callable[[int, float | None], None] | None = None,
    max_evals: int | None = None,
    rival: Rival | None = None,
    stall: float = STALL[1],
) -> SGVBResult:
    """Maximise the fixed-draw ELBO over q's parameters, growing the draws until q settles;
    `max_evals` gradient evaluations at most (about: a line search may end past it), after
    which q is where the solve was, not converged; with a `rival` (ppl.inference.race) the
    first round stops once it cannot catch it (polish["hopeless"]); a round ends when its last
    STALL[0] iterations gained less than `stall` nats."""
    start = time.perf_counter()
    WARM.clear()  # the gamma quantiles' warm starts: a fit's numbers depend on its seed only
    log_joint = floor_extended(chunked(log_joint), family)  # (chunked: large per-draw arrays)
    theta = np.array(theta0, dtype=float)
    trace: list[tuple[int, float]] = []
    rounds: list[dict] = []
    counter = {"evals": 0}
    iterations = 0
    converged = settled = budget_ended = False
    round_seed = seed
    controls = len(getattr(family, "control_columns", lambda: [])()) > 0
    eps = whitened_draws(first_draws, family.dim, round_seed)
    race = Race(rival, counter, first_draws, max_iter, max_evals)

    def spent() -> bool:  # another evaluation on these draws would pass the budget
        return max_evals is not None and counter["evals"] + len(eps) > max_evals

    while True:
        before = theta
        start_phase(progress, f"ELBO on {len(eps)} fixed draws (L-BFGS)")
        done = iterations

        def step(nit: int, value: float) -> None:
            trace.append((done + nit, -float(value)))  # noqa: B023 - this round's solve
            race.seen(done + nit, -float(value), rounds)  # noqa: B023
            if progress is not None:
                progress(done + nit, -float(value))  # noqa: B023

        mark = len(trace)
        solve = NaturalSolve(log_joint, family, eps, counter, max_iter, first_draws / len(eps),
                             step, _watched(counter, rounds, race.stop(spent, rounds)),
                             stall)  # fmt: skip
        objective, opt, best, value = solve(theta, controls)
        if controls and best is not None and not race.lost \
                and _exploited(log_joint, family, before, best, seed):  # fmt: skip
            # the fixed coefficients let the optimiser game the control variates: drop them
            controls = False
            del trace[mark:]
            race.reset()
            objective, opt, best, value = solve(theta, controls)
        iterations += int(opt.nit)
        if counter["ran_away"]:  # the better of the last optimum and this round's sane best
            best, value = _fresh_choice(log_joint, family, [before, counter["sane"][1]], seed)
        theta = theta if best is None else best
        converged = reached_optimum(opt) and np.isfinite(value)
        moved = movement(family.changes(before, theta)) if rounds else np.inf
        rounds.append({"draws": len(eps), "iterations": int(opt.nit), "elbo": -float(value),
                       "moved": moved, "ran_away": counter["ran_away"]})  # fmt: skip
        if not trace or trace[-1] != (iterations, -float(value)):
            trace.append((iterations, -float(value)))  # the round's optimum (its best point)
        if counter["ran_away"] or not np.isfinite(value) or spent() or race.lost:
            settled = moved <= MOVE_TOL and not counter["ran_away"]
            break
        if moved <= MOVE_TOL:
            settled = True
            break
        round_seed += 1
        if max_evals is not None and counter["evals"] + len(eps) * GROWTH > max_evals:
            budget_ended = True  # no gradient on a larger set within the budget
            break
        # no larger set: whether an independent one of this size would move the optimum says
        # if q settled (a 2000-dimensional Gaussian, solved on 2002 whitened draws, ended "not
        # converged" without this)
        last = len(eps) * GROWTH > max_draws
        draws = whitened_draws(len(eps) * (1 if last else GROWTH), family.dim, round_seed)
        predicted = _predicted_move(log_joint, family, draws, counter, theta, opt, max_evals,
                                    rounds[-1], objective)  # fmt: skip
        rounds[-1]["predicted_move"] = predicted
        if predicted <= MOVE_TOL or last:
            settled = predicted <= MOVE_TOL
            break
        eps = draws
    settled = settled and not (spent() or budget_ended)
    warnings = _warnings(spent() or budget_ended, settled, value, rounds, max_evals)
    result = SGVBResult(family, theta, trace, -float(value), iterations, counter["evals"],
                        converged and settled, "L-BFGS",
                        time.perf_counter() - start, warnings, rounds[-1]["draws"])  # fmt: skip
    result.polish = {"rounds": rounds, "objective": objective, "evaluations": counter,
                     "budget_spent": spent() or budget_ended, "hopeless": race.lost}  # fmt: skip
    return result


def _watched(counter: dict, rounds: list, stop: Callable[[], bool]) -> Callable[[], bool]:
    """`stop`, or once the new round's ELBO ran away (RUNAWAY; armed here)."""
    _watch(counter, rounds)
    return lambda: counter["ran_away"] or stop()


#: A round after the first whose fixed-draw ELBO climbs above the previous round's optimum by
#: more than RUNAWAY times its size (plus one nat) has found a direction in which the ELBO on
#: these draws has no maximum, not the optimum: it stops, and of the previous round's optimum
#: and this round's best point below that ceiling the one with the higher ELBO on FRESH_DRAWS
#: independent draws is kept (either may be over-fitted to its own draws). On the edge
#: partition model the 32-draw round climbed from -846 to +4e153 nats within 61 iterations (q's
#: gamma shapes of phi and a going to 0 together) and the fit ended there.
RUNAWAY = 1e3
#: Independent draws on which the candidates of a round that ran away are compared.
FRESH_DRAWS = 256


def _watch(counter: dict, rounds: list) -> None:
    """Arm a new round's RUNAWAY check."""
    last = rounds[-1]["elbo"] if rounds else None
    ok = last is not None and np.isfinite(last)
    counter["ceiling"] = last + RUNAWAY * (abs(last) + 1.0) if ok else None
    counter["ran_away"] = False
    counter["sane"] = (-np.inf, None)


def _fresh_choice(log_joint: Callable, family, candidates: list, seed: int):
    """(theta, ELBO on FRESH_DRAWS independent draws) of the better candidate."""
    eps = whitened_draws(FRESH_DRAWS, family.dim, seed + 104729)
    scored = [(elbo_on(log_joint, family, th, eps), k) for k, th in enumerate(candidates)
              if th is not None]  # fmt: skip
    value, k = max(scored)
    return np.array(candidates[k], dtype=float), -value


def _warnings(budget_ended: bool, settled: bool, value: float, rounds: list,
              max_evals: int | None) -> list[str]:  # fmt: skip
    """What a fixed-draw fit says when it did not settle."""
    if rounds[-1].get("ran_away"):
        return [f"the fixed-draw ELBO on {rounds[-1]['draws']} draws ran away (it has no "
                "maximum on finite draws along some direction of q's parameters); q is the "
                "better, on independent draws, of the last optimum and the round's best point "
                "before that: NOT converged"]  # fmt: skip
    if budget_ended:
        return [f"the gradient budget ({max_evals} evaluations for this solve) ended it before "
                "the fixed-draw ELBO's optimum was reached: q is not converged"]  # fmt: skip
    if not settled and np.isfinite(value) and len(rounds) > 1:
        return [f"the fixed-draw ELBO's optimum still moved by {rounds[-1]['moved']:.2g} sd when "
                f"the draws grew to {rounds[-1]['draws']}; q carries Monte Carlo error of that "
                "order"]  # fmt: skip
    return []


def _solve(objective: Callable, theta: np.ndarray, max_iter: int, looseness: float,
           step: Callable[[int, float], None] | None = None,
           stop: Callable[[], bool] | None = None, stall: float = STALL[1]):  # fmt: skip
    """L-BFGS on the objective less its value at the start, so that scipy's relative ftol acts
    on the gain in nats (an ELBO of -13,000 would otherwise stop 10^-2 nats early); a solve on
    few draws need not be more precise than they are (`looseness` = first draws / draws)."""
    with np.errstate(all="ignore"):
        offset = float(objective(theta))
    if not np.isfinite(offset):
        offset = 0.0
    shifted = None if step is None else (lambda it, value: step(it, value + offset))
    opt, best, value = minimise(lambda th: objective(th) - offset, theta, max_iter=max_iter,
                                ftol=1e-5 * looseness, gtol=1e-5 * looseness,
                                numpy_lbfgs=True, callback=shifted, stop=stop,
                                stall=(STALL[0], stall))  # fmt: skip
    return opt, best, value + offset


#: A solve is resumed (at most this many times) in coordinates scaled by the inverse Fisher
#: information of q's gamma blocks while their natural-gradient step would still move q by more
#: than NATURAL_TOL (changes as MOVE_TOL's).
NATURAL_RESTARTS, NATURAL_TOL = 4, MOVE_TOL


def natural_factor(family, theta) -> tuple[PairScale, np.ndarray] | None:
    """(R, on): R R^T the inverse Fisher information of q's gamma blocks at theta on their
    parameters' positions (`on`), the identity elsewhere (a PairScale: one 2 x 2 block per
    gamma coordinate); None when q has no gamma block."""
    base, point = family, np.asarray(theta, dtype=float)
    if isinstance(family, Preconditioned):  # P is the identity on the gamma parameters
        base, point = family.family, np.asarray(family.theta(point), dtype=float)
    R, on = PairScale(len(point)), np.zeros(len(point), dtype=bool)
    for block, fam, k in getattr(base, "parts", []):
        factor = getattr(fam, "natural_factor", None)
        if factor is not None:
            L, n = factor(point[k : k + fam.size]), block.size
            first = k + np.arange(n)
            R.set_pairs(first, first + n, L)
            on[first] = on[first + n] = True
    return (R, on) if on.any() and R.finite() else None


@dataclass
class ScaledInverse:
    """The inverse-Hessian approximation of a solve in coordinates c, theta = theta0 + R c, as
    one in theta: R H_c^-1 R^T."""

    inner: object
    R: PairScale

    def matvec(self, g: np.ndarray) -> np.ndarray:
        return self.R @ np.asarray(self.inner.matvec(self.R.rmatvec(g)), dtype=float)


class NaturalSolve:
    """A round's solve (_solve) on the draws eps, resumed from its end in coordinates scaled by
    the gamma blocks' inverse Fisher information (natural_factor) while their natural-gradient
    step there still moves q by more than NATURAL_TOL. The ELBO's curvature in a gamma's log
    mean is its shape, so with raw parameters the stopping rules end a solve of a small-shape
    gamma far from its rate; scaled, every direction has curvature near 1 at q's optimum."""

    def __init__(self, log_joint, family, eps, counter, max_iter, looseness, step, spent,
                 stall: float = STALL[1]):  # fmt: skip
        self.log_joint, self.family, self.eps, self.counter = log_joint, family, eps, counter
        self.max_iter, self.looseness, self.step, self.spent = max_iter, looseness, step, spent
        # (on gamma blocks only: whitened draws make a Gaussian q's fixed-draw ELBO exact for
        # the quadratic part of log p, and its one round is often its last)
        gamma = len(getattr(family, "control_columns", lambda: [])()) > 0
        self.stall = (lambda: max(stall, MC_STALL * counter.get("mc_error", 0.0))) \
            if looseness == 1 and gamma else stall  # fmt: skip

    def _objective(self, at, controls: bool):
        return _negative_elbo(self.log_joint, self.family, self.eps, self.counter,
                              at if controls else None)  # fmt: skip

    def _run(self, objective, start: np.ndarray, R: PairScale | None, done: int):
        """One L-BFGS solve from start, in theta = start + R c when R is given; the optimiser's
        result and the best point and value, in theta."""
        callback = None if self.step is None else partial(_shifted, self.step, done)
        if R is None:
            return _solve(objective, start, self.max_iter - done, self.looseness, callback,
                          self.spent, self.stall)  # fmt: skip
        opt, c_best, value = _solve(_Scaled(objective, start, R), np.zeros(len(start)),
                                    self.max_iter - done, self.looseness, callback,
                                    self.spent, self.stall)  # fmt: skip
        return opt, (None if c_best is None else start + R @ c_best), value

    def __call__(self, theta: np.ndarray, controls: bool):
        objective = self._objective(theta, controls)
        # the first solve in q's own parameters: scaled from the start, the solves of eight
        # schools (seed 1) settled on 8 draws and escalated (12,055 gradients, 3,663 unscaled)
        start, R = np.asarray(theta, dtype=float), None
        opt, best, value = self._run(objective, start, R, 0)
        nit = int(opt.nit)
        for _ in range(NATURAL_RESTARTS):
            if best is None or not np.isfinite(value) or self.spent() or nit >= self.max_iter:
                break  # (the iteration cap, --iter, bounds a solve and its restarts together)
            natural = natural_factor(self.family, best)
            if natural is None:
                break
            # the gradient at best in theta: from the solve's end when it ended there
            x = np.asarray(opt.x, dtype=float)
            x = x if R is None else start + R @ x
            if np.array_equal(x, best):
                jac = np.asarray(opt.jac, dtype=float)
                jac = jac if R is None else R.solve_transposed(jac)
            else:
                with np.errstate(all="ignore"):
                    jac = np.asarray(grad(objective)(best), dtype=float)
            step = np.where(natural[1], -(natural[0] @ natural[0].rmatvec(jac)), 0.0)
            if not np.all(np.isfinite(step)):
                break
            if movement(self.family.changes(best, best + step)) <= NATURAL_TOL:
                break
            start, R, objective = best, natural[0], self._objective(best, controls)
            opt, again, value = self._run(objective, start, R, nit)
            nit += int(opt.nit)
            if again is None:
                break
            best = again
        if is_dataclass(opt):
            opt = replace(opt, nit=nit)
            if R is not None:
                opt = replace(opt, hess_inv=ScaledInverse(opt.hess_inv, R))
        return objective, opt, best, value


def _shifted(step: Callable[[int, float], None], done: int, nit: int, value: float) -> None:
    step(done + nit, value)


class _Scaled:
    """objective(theta0 + R c) as a function of c."""

    def __init__(self, objective, theta0: np.ndarray, R: PairScale):
        self.objective, self.theta0, self.R = objective, theta0, R

    def __call__(self, c):
        return self.objective(self.theta0 + self.R @ c)


def _negative_elbo(log_joint: Callable, family, eps: np.ndarray, counter: dict, theta0=None):
    """-ELBO on the draws eps. Where the family has control features (gamma blocks' log x and
    x), their sample means are replaced by the exact ones through linear control variates,
    with coefficients (the regression of log p on the features) fixed at theta0 for the solve."""
    slopes = None
    if theta0 is not None and len(getattr(family, "control_columns", lambda: [])()):
        slopes = _control_slopes(log_joint, family, eps, np.asarray(theta0, dtype=float))
    return NegativeElbo(log_joint, family, eps, counter, slopes)


#: Rows of draws per log-joint call when gradients at many points are batched into one call
#: (as many as one 512-draw solve evaluates: no more memory than the fit itself needs).
BATCH_ROWS = 512


class NegativeElbo:
    """-ELBO on fixed draws as a function of q's parameters (see _negative_elbo); `gradients`
    takes it at many points in few log-joint calls."""

    def __init__(self, log_joint: Callable, family, eps: np.ndarray, counter: dict, slopes):
        self.log_joint, self.family, self.eps = log_joint, family, eps
        self.counter, self.slopes = counter, slopes

    def _terms(self, theta, zeta, entropy, mean_log_p):
        value = mean_log_p + entropy
        if self.slopes is not None:
            sample_means = anp.mean(self.family.control_features(zeta), axis=0)
            value = value - anp.sum(self.slopes * (sample_means - self.family.exact_means(theta)))
        return -value

    def __call__(self, theta):
        self.counter["evals"] += len(self.eps)
        zeta, entropy = self.family.draws(theta, self.eps)
        values = self.log_joint(zeta)
        if np.all(np.isfinite(getval(values))):
            raw = np.asarray(getval(values), dtype=float)  # the plain ELBO's error (MC_STALL)
            self.counter["mc_error"] = float(np.std(raw) / np.sqrt(len(raw)))
            out = self._terms(theta, zeta, entropy, anp.mean(values))
        else:
            out = self._terms(theta, zeta, entropy, guarded_mean(self.log_joint, zeta))
        ceiling = self.counter.get("ceiling")
        if ceiling is not None:  # RUNAWAY: the best point below the ceiling, or the alarm
            elbo = -float(getval(out))
            if elbo > ceiling:
                self.counter["ran_away"] = True
            elif elbo > self.counter["sane"][0]:
                self.counter["sane"] = (elbo, np.array(getval(theta), dtype=float))
        return out

    def gradients(self, thetas: np.ndarray) -> np.ndarray:
        """Rows: the gradient at each row of `thetas`, the draws of all of a chunk of rows
        through one log-joint call (the per-call cost of the log joint, not its rows, is what a
        small model's gradient costs). A chunk with a non-finite density is redone one point at
        a time, through the guarded objective."""
        thetas = np.atleast_2d(np.asarray(thetas, dtype=float))
        S = len(self.eps)
        per_call = max(1, BATCH_ROWS // S)
        out = np.empty_like(thetas)
        for lo in range(0, len(thetas), per_call):
            chunk = thetas[lo : lo + per_call]
            g = self._chunk_gradients(chunk)
            if g is None:
                g = np.array([grad(self)(th) for th in chunk])
            else:
                self.counter["evals"] += S * len(chunk)
            out[lo : lo + len(chunk)] = g
        return out

    def _chunk_gradients(self, chunk: np.ndarray):
        S, finite = len(self.eps), [True]

        def total(points):
            rows = [self.family.draws(points[k], self.eps) for k in range(len(chunk))]
            values = self.log_joint(anp.concatenate([zeta for zeta, _ in rows]))
            finite[0] = bool(np.all(np.isfinite(getval(values))))
            means = anp.mean(anp.reshape(values, (len(chunk), S)), axis=1)
            return anp.sum(anp.stack([self._terms(points[k], zeta, entropy, means[k])
                                      for k, (zeta, entropy) in enumerate(rows)]))  # fmt: skip

        with np.errstate(all="ignore"):
            g = np.asarray(grad(total)(chunk), dtype=float)
        return g if finite[0] and np.all(np.isfinite(g)) else None


#: Draws of the check that a solve with control variates did not game them.
CHECK_DRAWS = 64


def _exploited(log_joint: Callable, family, before, after, seed: int) -> bool:
    """Is q after a solve with control variates worse than before it, by the plain ELBO on
    independent draws (common random numbers, paired: lower by more than 3 standard errors)?
    Fixed coefficients leave a term whose sample value the optimiser can push far from its
    zero mean where the regression does not hold (e.g. gamma shapes near zero)."""
    eps = whitened_draws(CHECK_DRAWS, family.dim, seed + 7919)
    terms = []
    for theta in (before, after):
        zeta, entropy = family.draws(np.asarray(theta, dtype=float), eps)
        with np.errstate(all="ignore"):
            terms.append(np.asarray(log_joint(np.asarray(zeta)), dtype=float) + float(entropy))
    if not np.all(np.isfinite(terms[1])):
        return True
    if not np.all(np.isfinite(terms[0])):
        return False
    diff = terms[1] - terms[0]
    return bool(np.mean(diff) < -3 * np.std(diff) / np.sqrt(len(diff)))


#: Draws per control feature from which their coefficients are plain least squares.
DRAWS_PER_FEATURE = 4


def _control_slopes(log_joint: Callable, family, eps: np.ndarray, theta0: np.ndarray):
    """Least-squares coefficients of log p on the control features over the draws at theta0
    (None when not finite). Ridge-regularised only when there are fewer than DRAWS_PER_FEATURE
    draws per feature: where log p is linear in them (a gamma prior) least squares gives the
    exact coefficients, and any ridge moves weight from log x, whose column carries log p, to x,
    whose column is tiny at a small shape (a gamma(0.01, 1.01) posterior: x's coefficient came
    out 5.97 for -1.01, which set the rate). With more features than draws the solve is in the
    draws' space (G'(GG' + rI)^-1 y = (G'G + rI)^-1 G'y): gamma_normal's 3,636 features on 32
    draws took two 3,636 x 3,636 solves, 10 s."""
    zeta = np.asarray(family.draws(theta0, eps)[0])
    with np.errstate(all="ignore"):
        lp = np.asarray(log_joint(zeta), dtype=float)
        F = np.asarray(family.control_features(zeta), dtype=float)
        F = F - F.mean(axis=0)
        scale = np.sqrt(np.mean(F**2, axis=0))
        ok = np.all(np.isfinite(lp)) and np.all(np.isfinite(F)) and np.all(scale > 0)
        if not ok:
            return None
        G, y = F / scale, lp - lp.mean()
        ridge = 1e-3 * len(G) if len(G) < DRAWS_PER_FEATURE * G.shape[1] else 0.0
        try:
            if G.shape[1] > len(G):  # more features than draws: the same ridge solution, S x S
                coef = G.T @ np.linalg.solve(G @ G.T + ridge * np.eye(len(G)), y)
            else:
                coef = np.linalg.solve(G.T @ G + ridge * np.eye(G.shape[1]), G.T @ y)
        except np.linalg.LinAlgError:
            return None
    coef = coef / scale
    return coef if np.all(np.isfinite(coef)) else None


#: The L-BFGS prediction of the optimum's move is off by its inverse-Hessian approximation,
#: which depends on the solve's path: against the Newton step on the larger set (its Hessian
#: from differences) it was 0.66-5.6 times as large, median 1.27, on the accuracy suite's
#: Gaussian q's (35 rounds), and on lotka_volterra's 128-draw round
#: it was 0.0706 or 0.0362 (the exact Newton step 0.0299 or 0.0298) as a gamma quantile
#: differed by 1e-13, deciding whether a 512-draw round (31,000 gradients) ran. So where it is
#: within that error of MOVE_TOL (between REFINE_BAND times it) the move is re-predicted by
#: preconditioned conjugate gradients on the larger set's ELBO, the L-BFGS approximation the
#: preconditioner, each Hessian product a difference of gradients along the search direction
#: (its own length: the curvature over the move's scale), until two successive predictions
#: fall on the same side of MOVE_TOL or agree within REFINE_AGREE, at most REFINE_STEPS
#: products (the decision, not the number, is what is asked of it).
REFINE_BAND = (0.7, 3.0)
REFINE_STEPS, REFINE_AGREE = 3, 0.1


def _predicted_move(log_joint, family, eps, counter, theta, opt, max_evals=None,
                    record: dict | None = None, solved=None) -> float:  # fmt: skip
    """How far the optimum would move on the draws `eps`: one gradient there, one quasi-Newton
    step with the last solve's inverse-Hessian approximation, refined (_refined_move) where
    that is near MOVE_TOL; `record` gets the L-BFGS prediction and the products spent.
    `solved`: the objective theta was solved on, whose gradient there (the solve's own
    remainder, not the draws') the refinement takes out of g: in a nearly flat direction of
    q's parameters a Newton step turns a remainder the solve's stopping rule accepted into a
    large move (lkj_varying_slopes: 0.063 predicted, 0.036 moved), which more draws do not
    change."""
    objective = _negative_elbo(log_joint, family, eps, counter, theta)
    with np.errstate(all="ignore"):
        _, g = value_and_grad(objective)(theta)
    g = np.asarray(g, dtype=float)
    if not np.all(np.isfinite(g)) or not hasattr(opt, "hess_inv"):
        return np.inf
    step = -np.asarray(opt.hess_inv.matvec(g), dtype=float)
    with np.errstate(all="ignore"):
        move = movement(family.changes(theta, theta + step))
    if not REFINE_BAND[0] * MOVE_TOL < move <= REFINE_BAND[1] * MOVE_TOL:
        return move
    room = REFINE_STEPS if max_evals is None else (max_evals - counter["evals"]) // len(eps)
    room = max(0, min(REFINE_STEPS, room))
    rhs = g
    if solved is not None:
        with np.errstate(all="ignore"):
            remainder = np.asarray(grad(solved)(theta), dtype=float)
        rhs = g - remainder if np.all(np.isfinite(remainder)) else g
    refined, products = _refined_move(objective, family, theta, g, rhs, opt.hess_inv, move,
                                      room)  # fmt: skip
    if record is not None:
        record.update({"lbfgs_move": move, "refine_products": products})
    return refined


def _refined_move(objective, family, theta, g, rhs, inverse, move: float, steps: int):
    """(the predicted move, products spent): preconditioned CG on the Newton system H x = -rhs
    of `objective` at theta (M = `inverse`), from the L-BFGS step (CG's first direction); each
    product H p the difference of gradients at theta + p and at theta (`g`)."""
    x, r = np.zeros_like(theta), -rhs
    z = np.asarray(inverse.matvec(r), dtype=float)
    p, rz = z.copy(), float(r @ z)
    gradient = grad(objective)
    for k in range(steps):
        with np.errstate(all="ignore"):
            Hp = np.asarray(gradient(theta + p), dtype=float) - g
        curvature = float(p @ Hp)
        if not (np.all(np.isfinite(Hp)) and curvature > 0 and rz > 0):
            return move, k + 1  # not convex along p (or past the density's support)
        alpha = rz / curvature
        x, r = x + alpha * p, r - alpha * Hp
        with np.errstate(all="ignore"):
            new = movement(family.changes(theta, theta + x))
        if not np.isfinite(new):
            return move, k + 1
        same_side = (new <= MOVE_TOL) == (move <= MOVE_TOL)
        agree, move = same_side or abs(new - move) <= REFINE_AGREE * new, new
        if agree:
            return move, k + 1
        z = np.asarray(inverse.matvec(r), dtype=float)
        rz_new = float(r @ z)
        p, rz = z + (rz_new / rz) * p, rz_new
    return move, steps
