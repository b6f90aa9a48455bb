"""The mode of the unconstrained log density by L-BFGS: where the deterministic road starts.

Stan's optimiser and Pathfinder start the same way: from a uniform(-2, 2) draw on the
unconstrained scale (a new one when the density is not finite there), quasi-Newton steps climb to
the mode in tens of gradients. Posteriors without a mode (funnels, whose density grows without
bound as a scale goes to zero) end at the iteration cap far down the funnel; the caller compares
the Gaussian built there with other starts by the ELBO, so such a point costs gradients, not
correctness.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from autograd import value_and_grad
from autograd.tracer import getval

from ppl.inference.deterministic import minimise, reached_optimum
from ppl.progress import start_phase

#: Stan's default: draws of the initial point before giving up on a non-finite density.
INIT_TRIES = 100


@dataclass
class Mode:
    point: np.ndarray  # (D,) the best point found
    log_density: float  # the log joint there
    init: np.ndarray  # the start it climbed from
    grad_evals: int
    iterations: int
    converged: bool  # L-BFGS met its tolerance (False for a funnel or the cap)
    #: (iteration, log density, point) of the last HISTORY iterations: how the search ended
    history: list = field(default_factory=list)
    spent: bool = False  # ended by the gradient budget


#: Iterations of the mode search whose points are kept (ppl.inference.suspect reads how the
#: search ended: still climbing, and along which coordinates).
HISTORY = 100


def finite_start(log_joint: Callable, init: np.ndarray, rng: np.random.Generator,
                 radius: float = 2.0) -> tuple[np.ndarray, int]:  # fmt: skip
    """`init`, or the first of up to INIT_TRIES uniform(-radius, radius) draws where the log
    density and its gradient are finite (Stan's rule: a finite density with a non-finite
    gradient, e.g. a scale underflowing to 0, leaves L-BFGS no step, and the fit ended at its
    start); returns (start, evaluations used)."""
    value_and_gradient = value_and_grad(lambda z: log_joint(z[None, :])[0])
    x = np.asarray(init, dtype=float)
    for tries in range(1, INIT_TRIES + 1):
        with np.errstate(all="ignore"):
            value, gradient = value_and_gradient(x)
        if np.isfinite(float(value)) and np.all(np.isfinite(gradient)):
            return x, tries
        x = rng.uniform(-radius, radius, size=x.shape)
    return np.asarray(init, dtype=float), INIT_TRIES


def find_mode(
    log_joint: Callable,
    init: np.ndarray,
    rng: np.random.Generator,
    *,
    max_iter: int = 400,
    max_evals: int | None = None,
    progress=None,
    label: str = "mode by L-BFGS",
    ftol: float = 1e-12,
    gtol: float = 1e-8,
    until: Callable[[np.ndarray], bool] | None = None,
) -> Mode:
    """Maximise the unconstrained log joint from `init` (or a finite start near it), in at
    most `max_iter` iterations and about `max_evals` gradients."""
    start_phase(progress, label, "log density")
    start, used = finite_start(log_joint, init, rng)
    calls = {"n": 0, "z": start}
    dim = len(start)
    history: deque = deque(maxlen=HISTORY)

    def negative_log_joint(z):
        calls["n"] += 1
        calls["z"] = z
        return -log_joint(z.reshape(1, dim))[0]

    def seen(it, value):
        history.append((it, -float(value), np.array(getval(calls["z"]), dtype=float)))
        if progress is not None:
            progress(it, -value)

    def stop() -> bool:
        if until is not None and until(np.asarray(getval(calls["z"]), dtype=float)):
            return True  # the caller has seen enough (a second search back in the first basin)
        return max_evals is not None and calls["n"] + used + 1 > max_evals

    opt, best, value = minimise(negative_log_joint, start, max_iter=max_iter, ftol=ftol,
                                gtol=gtol, numpy_lbfgs=True, callback=seen,
                                stop=stop)  # fmt: skip
    point = start if best is None else best
    return Mode(point, -float(value), start, calls["n"] + used, int(opt.nit),
                reached_optimum(opt), list(history),
                max_evals is not None and calls["n"] + used >= max_evals)  # fmt: skip
