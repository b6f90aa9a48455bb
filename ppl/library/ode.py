"""ODE solutions with gradients, differentiated by forward sensitivities (the augmented system
dS/dt = J_y S + J_p, S(t0) = [I | 0]) as an autograd primitive.

The right-hand side is any autograd-traceable `rhs(t, y, p)` on batched values (t: (S,), y:
(S, N), p: (S, P), one row per draw); its Jacobian comes from one reverse pass over N stacked
copies of the draws, copy i seeded with e_i (draws are independent, so each row's gradient is its
own). The non-stiff solvers run ppl.library.dopri5 (each draw its own step size) on a tape of that
function and its Jacobian (ppl.library.tape: recorded once per solve, replayed as plain numpy),
when the
caller marks the function as free of branches on its values; otherwise, and for the stiff
solvers, scipy's solve_ivp integrates all draws as one system.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import autograd.numpy as anp
import numpy as np
from autograd import make_vjp
from autograd.extend import defvjp, primitive
from autograd.tracer import isbox

from ppl.errors import SecondDerivativeError
from ppl.library import dopri5
from ppl.library.tape import TapeMismatch, record


@dataclass(frozen=True)
class Solver:
    method: str  # solve_ivp's
    new_style: bool  # ode_*: (f, y0, t0, ts, ...); else (f, y0, t0, ts, theta, x_r, x_i)
    tolerances: str  # "none", "required" (ode_*_tol) or "optional" (integrate_ode_*)


#: Stan's solver names; Adams-Moulton maps to LSODA (it switches between Adams and BDF)
SOLVERS = {
    "ode_rk45": Solver("RK45", True, "none"),
    "ode_rk45_tol": Solver("RK45", True, "required"),
    "ode_ckrk": Solver("RK45", True, "none"),
    "ode_ckrk_tol": Solver("RK45", True, "required"),
    "ode_bdf": Solver("BDF", True, "none"),
    "ode_bdf_tol": Solver("BDF", True, "required"),
    "ode_adams": Solver("LSODA", True, "none"),
    "ode_adams_tol": Solver("LSODA", True, "required"),
    "integrate_ode_rk45": Solver("RK45", False, "optional"),
    "integrate_ode_bdf": Solver("BDF", False, "optional"),
    "integrate_ode_adams": Solver("LSODA", False, "optional"),
}

#: Stan's defaults for the solvers without tolerance arguments
DEFAULT_TOLERANCES = (1e-6, 1e-6, 1_000_000)


@dataclass(eq=False)
class Problem:
    rhs: object  # (t, y (S, N), p (S, P)) -> (S, N)
    n_states: int
    t0: float
    ts: np.ndarray
    method: str
    rtol: float
    atol: float
    max_steps: int
    sensitivities: np.ndarray | None = field(default=None, repr=False)  # (S, T, N, N + P)
    tapeable: bool = False  # rhs has no branch on its values: ppl.library.dopri5 on a tape of it


class ODEError(ValueError):
    """The solver did not reach the last output time."""


def solve(problem: Problem, y0, p):
    """y at problem.ts for every draw: (S, T, N), differentiable in y0 (S, N) and p (S, P)."""
    x = anp.concatenate([y0, p], axis=1)
    if isbox(x):
        return _solve_differentiable(x, problem)
    return _integrate(problem, np.asarray(x, dtype=float), False)[0]


@primitive
def _solve_differentiable(x, problem: Problem):
    y, problem.sensitivities = _integrate(problem, x, True)
    return y


def _solve_vjp(ans, x, problem: Problem):
    sensitivities = problem.sensitivities
    nested = isbox(x)  # this gradient is itself being differentiated (Hessian-vector products)

    def vjp(g):
        if nested or isbox(g):
            raise SecondDerivativeError("second derivatives of ODE solutions are not supported")
        return np.einsum("stn,stnm->sm", g, sensitivities)

    return vjp


defvjp(_solve_differentiable, _solve_vjp)


def _integrate(problem: Problem, x: np.ndarray, with_sensitivities: bool):
    if problem.method == "RK45" and problem.tapeable:
        try:
            return _integrate_taped(problem, x, with_sensitivities)
        except TapeMismatch:
            problem.tapeable = False
    return _integrate_stacked(problem, x, with_sensitivities)


def _integrate_taped(problem: Problem, x: np.ndarray, with_sensitivities: bool):
    """ppl.library.dopri5 on a tape of the right-hand side (and its Jacobian): failed draws are
    NaN."""
    S, M = x.shape
    N = problem.n_states
    y0, p = x[:, :N], x[:, N:]
    t_rows = np.full(S, problem.t0)
    later = (t_rows + 0.5 * (problem.ts[-1] - problem.t0), x * 1.01)  # a second point to check

    if not with_sensitivities:
        tape = record(lambda t, v: problem.rhs(t, v[:, :N], v[:, N:]) + anp.zeros((S, N)),
                      (t_rows, x), check=later)  # fmt: skip

        def f(t, z):
            return tape(t, np.concatenate([z, p], axis=1))

        return dopri5.integrate(f, y0, problem.t0, problem.ts, problem.rtol, problem.atol,
                                problem.max_steps), None  # fmt: skip

    def value_and_jacobian(t, v):
        stacked = anp.concatenate([v] * N, axis=0)
        times = anp.concatenate([t] * N, axis=0)

        def g(u):
            return problem.rhs(times, u[:, :N], u[:, N:]) + anp.zeros((N * S, N))

        vjp, value = make_vjp(g)(stacked)
        grads = vjp(np.repeat(np.eye(N), S, axis=0))  # copy i seeded with e_i
        return anp.concatenate([anp.ravel(value[:S]), anp.ravel(grads)])

    tape = record(value_and_jacobian, (t_rows, x), check=later)

    def f(t, z):
        packed = tape(t, np.concatenate([z[:, :N], p], axis=1))
        dy = packed[: S * N].reshape(S, N)
        J = packed[S * N :].reshape(N, S, M).transpose(1, 0, 2)
        dsens = J[:, :, :N] @ z[:, N:].reshape(S, N, M)
        dsens[:, :, N:] += J[:, :, N:]
        return np.concatenate([dy, dsens.reshape(S, N * M)], axis=1)

    s0 = np.zeros((S, N, M))
    s0[:, :, :N] = np.eye(N)
    z0 = np.concatenate([y0, s0.reshape(S, N * M)], axis=1)
    z = dopri5.integrate(f, z0, problem.t0, problem.ts, problem.rtol, problem.atol,
                         problem.max_steps, control=N)  # fmt: skip
    return z[:, :, :N], z[:, :, N:].reshape(S, len(problem.ts), N, M)


def _integrate_stacked(problem: Problem, x: np.ndarray, with_sensitivities: bool):
    """scipy's solve_ivp on all draws as one system (one step size for all)."""
    from scipy import sparse  # here, not at import: `ppl check` loads no scipy (startup time)
    from scipy.integrate import solve_ivp

    S, M = x.shape
    N = problem.n_states
    y0, p = x[:, :N], x[:, N:]
    if with_sensitivities:
        s0 = np.zeros((S, N, M))
        s0[:, :, :N] = np.eye(N)
        z0 = np.concatenate([y0, s0.reshape(S, N * M)], axis=1)
    else:
        z0 = y0
    width = z0.shape[1]

    def f(t, z):
        z = z.reshape(S, width)
        y = z[:, :N]
        if not with_sensitivities:
            return _batched(problem.rhs(t, y, p), S, N).ravel()
        dy, J = _value_and_jacobian(problem.rhs, t, y, p, S, N)
        sens = z[:, N:].reshape(S, N, M)
        dsens = J[:, :, :N] @ sens
        dsens[:, :, N:] += J[:, :, N:]
        return np.concatenate([dy, dsens.reshape(S, N * M)], axis=1).ravel()

    options = {}
    if problem.method == "BDF":  # one dense block per draw: finite differences in `width` calls
        options["jac_sparsity"] = sparse.block_diag([np.ones((width, width))] * S, format="csr")
    ts = problem.ts
    sol = solve_ivp(
        f,
        (problem.t0, float(ts[-1])),
        z0.ravel(),
        method=problem.method,
        t_eval=ts,
        rtol=problem.rtol,
        atol=problem.atol,
        **options,
    )
    if sol.status != 0 or sol.y.shape[1] != len(ts):
        raise ODEError(f"the ODE solver ({problem.method}) failed: {sol.message}")
    z = sol.y.T.reshape(len(ts), S, width).transpose(1, 0, 2)  # (S, T, width)
    y = z[:, :, :N]
    if not with_sensitivities:
        return y, None
    return y, z[:, :, N:].reshape(S, len(ts), N, M)


def _batched(value, S: int, N: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(value, dtype=float), (S, N))


def _value_and_jacobian(rhs, t, y, p, S: int, N: int):
    """rhs and its Jacobian in (y, p): (S, N) and (S, N, N + P), from one forward and one reverse
    pass over N stacked copies of the draws (copy i seeded with the unit vector e_i)."""
    x = np.concatenate([y, p], axis=1)
    stacked = np.tile(x, (N, 1))  # (N * S, N + P): copy i in rows i*S .. (i+1)*S - 1

    def g(v):
        return rhs(t, v[:, :N], v[:, N:]) + anp.zeros((N * S, N))

    vjp, value = make_vjp(g)(stacked)
    seeds = np.repeat(np.eye(N), S, axis=0)  # row i*S + s: e_i
    J = vjp(seeds).reshape(N, S, -1).transpose(1, 0, 2)
    return np.asarray(value)[:S], J
