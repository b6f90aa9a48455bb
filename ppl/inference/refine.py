"""Polish a Gaussian fit by maximising a fixed-draw ELBO with L-BFGS (deterministic ADVI).

Stan's stochastic ADVI stops on a 1% relative ELBO change, which on ill-conditioned posteriors
(correlated regression coefficients, parameters on a 1e4 scale) leaves means several posterior sds
off (see docs/accuracy.md). Fixing the Monte Carlo draws turns the ELBO into an ordinary smooth
function of the variational parameters (Giordano, Ingram & Broderick 2024, "Black box variational
inference with a deterministic objective"), which a quasi-Newton method maximises to its optimum
in a few hundred steps; its bias from the finite draws is small and shrinks with their number.
"""

from __future__ import annotations

from collections.abc import Callable

import autograd.numpy as anp
import numpy as np

from ppl.families.gaussian import STRUCTURES
from ppl.inference.deterministic import guarded_mean, minimise, not_worse, reached_optimum
from ppl.inference.draws import fixed_normal_draws
from ppl.inference.hessian import expected_hessian, hessian_by_hvp
from ppl.inference.result import VIResult


def _polished(coords, theta, like: VIResult) -> VIResult:
    """`like` with the mean and scale of the polish's coordinates at theta."""
    mu, L = coords.mean_scale(np.asarray(theta, dtype=float))
    out = _as_method(like, coords.method)
    out.mean, out.scale_tril = mu, L
    return out


_MAX_DENSE_PRECONDITIONER = 200
#: Draws whose Hessians (by Hessian-vector products) average into the preconditioner.
_PRECONDITIONER_DRAWS = 32


def _preconditioner(log_joint: Callable, q: VIResult, eps: np.ndarray) -> np.ndarray:
    """Cholesky factor of the inverse of -E_q[Hessian of log p] at q's mean (regularised).

    Falls back to q's own scales when the dimension is large or the Hessian is unusable.
    """
    D = q.dim
    fallback = np.diag(np.maximum(np.sqrt(np.sum(q.scale_tril**2, axis=1)), 1e-8))
    if D > _MAX_DENSE_PRECONDITIONER:
        return fallback
    points = q.mean + eps[:_PRECONDITIONER_DRAWS] @ q.scale_tril.T
    try:
        with np.errstate(all="ignore"):
            H = -expected_hessian(log_joint, points)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError, ArithmeticError):
        return fallback
    if not np.all(np.isfinite(H)):
        return fallback
    H = 0.5 * (H + H.T)
    lam, V = np.linalg.eigh(H)
    top = np.max(np.abs(lam)) if lam.size else 0.0
    if not top > 0:
        return fallback
    lam = np.maximum(np.abs(lam), top * 1e-12)  # a saddle or flat direction still gets a scale
    cov = (V / lam) @ V.T
    try:
        return np.linalg.cholesky(0.5 * (cov + cov.T))
    except np.linalg.LinAlgError:
        return fallback


def refine(
    log_joint: Callable,
    start: VIResult,
    *,
    draws: int = 64,
    seed: int = 0,
    max_iter: int = 2000,
    rounds: int = 3,
) -> tuple[VIResult, dict]:
    """Maximise the ELBO over `draws` fixed standard-normal draws, starting from `start`.

    Each round re-preconditions at the current fit and runs L-BFGS; rounds stop once one of
    them no longer improves the objective.
    """
    eps = fixed_normal_draws(draws, start.dim, seed)
    draws = len(eps)
    calls = {"n": 0}
    guard = {"on": False}
    q = start
    previous = np.inf
    iterations, message, converged = 0, "", False
    for _ in range(rounds):
        coords = STRUCTURES[q.method].polish_coordinates(q, _preconditioner(log_joint, q, eps))

        def negative_elbo(theta, coords=coords):
            zeta, entropy = coords.draws(theta, eps)
            calls["n"] += 1
            if not guard["on"]:
                return -(anp.mean(log_joint(zeta)) + entropy)
            return -(guarded_mean(log_joint, zeta) + entropy)

        theta0 = coords.initial()
        with np.errstate(all="ignore"):
            first = float(negative_elbo(theta0))
        if not np.isfinite(first):
            guard["on"] = True  # some draws are outside the support: penalise them
        opt, best_theta, best_value = minimise(negative_elbo, theta0, max_iter=max_iter)
        iterations += int(opt.nit)
        message = str(opt.message)
        converged = reached_optimum(opt)
        if best_theta is None:
            break
        q = _polished(coords, best_theta, start)
        improved = previous - best_value
        previous = best_value
        if np.isfinite(improved) and improved < 1e-6 * max(1.0, abs(previous)):
            break
    info = {
        "draws": draws,
        "iterations": iterations,
        "gradient_evaluations": calls["n"] * draws,
        "message": message,
        "objective": -previous,
        "converged": converged,
    }
    return q, info


def elbo_terms(log_joint: Callable, q: VIResult, eps: np.ndarray) -> np.ndarray:
    """Per-draw ELBO integrand log p(zeta) - log q(zeta) at zeta = mean + L eps."""
    zeta = q.mean + eps @ q.scale_tril.T
    with np.errstate(all="ignore"):
        lp = np.asarray(log_joint(zeta), dtype=float)
        log_det = np.sum(np.log(np.abs(np.diag(q.scale_tril))))
        log_q = -0.5 * np.sum(eps**2, axis=1) - log_det - 0.5 * q.dim * np.log(2 * np.pi)
    return np.where(np.isfinite(lp), lp - log_q, -np.inf)


def fresh_elbo(log_joint: Callable, q: VIResult, eps: np.ndarray) -> float:
    """ELBO of q on the given standard-normal draws; non-finite draws count as -inf."""
    terms = elbo_terms(log_joint, q, eps)
    return float(np.mean(terms)) if np.all(np.isfinite(terms)) else -np.inf


def _as_method(q: VIResult, method: str) -> VIResult:
    """A copy of q in the other family: full-rank from mean-field keeps the diagonal, and back."""
    L = STRUCTURES[method].scale_of(q.scale_tril)
    return VIResult(
        method=method,
        mean=q.mean.copy(),
        scale_tril=L.copy(),
        elbo_trace=list(q.elbo_trace),
        elbo=q.elbo,
        iterations=q.iterations,
        grad_evals=q.grad_evals,
        converged=q.converged,
        eta=q.eta,
        seconds=q.seconds,
        warnings=list(q.warnings),
        grad_samples=q.grad_samples,
        adapt_iterations=q.adapt_iterations,
        eta_trials=list(q.eta_trials),
        averaged=q.averaged,
        lp_evals=q.lp_evals,
        dropped_draws=q.dropped_draws,
    )


def laplace(
    log_joint: Callable, init: np.ndarray, method: str, max_iter: int = 3000
) -> VIResult | None:
    """Gaussian at the mode of the unconstrained density with the inverse Hessian as covariance.

    Near-Gaussian posteriors (regressions, even badly scaled ones) get an excellent start this way;
    posteriors without a mode (funnels) give None or a poor candidate that the ELBO comparison
    drops.
    """
    dim = len(init)
    if dim > _MAX_DENSE_PRECONDITIONER:
        return None  # no dense Hessian at this size, so no Laplace candidate: skip the mode search

    def negative_log_joint(z):
        return -log_joint(anp.reshape(z, (1, dim)))[0]

    opt, _, _ = minimise(negative_log_joint, np.asarray(init, float), max_iter=max_iter)
    mode = opt.x
    if not np.isfinite(opt.fun):
        return None
    try:
        with np.errstate(all="ignore"):
            H = -hessian_by_hvp(log_joint, mode)
        cov = np.linalg.inv(H)
        L = np.linalg.cholesky(0.5 * (cov + cov.T))
    except (np.linalg.LinAlgError, ValueError, FloatingPointError):
        return None
    if not (np.all(np.isfinite(L)) and np.all(np.isfinite(mode))):
        return None
    L = STRUCTURES[method].laplace_scale(H, L)
    return VIResult(
        method=method,
        mean=mode,
        scale_tril=L,
        elbo_trace=[],
        elbo=-np.inf,
        iterations=0,
        grad_evals=0,
        converged=False,
        eta=0.0,
        seconds=0.0,
    )


def _best(log_joint: Callable, candidates: list[VIResult], probe: np.ndarray) -> VIResult:
    scores = [fresh_elbo(log_joint, q, probe) for q in candidates]
    return candidates[int(np.argmax(scores))]


def polish(
    log_joint: Callable, sga: VIResult, init: np.ndarray, *, draws: int = 64, seed: int = 0
) -> tuple[VIResult, dict]:
    """Refine a stochastic ADVI fit; full-rank goes through a mean-field stage first.

    Each stage starts from whichever candidate (the ADVI result, a Laplace approximation,
    N(init, 0.1^2 I)) has the highest ELBO on fresh draws, so a stochastic run that wandered off
    or a mode that does not exist cannot poison the deterministic stage.
    """
    method = sga.method
    probe = np.random.default_rng(seed + 7).standard_normal((200, sga.dim))
    lap = laplace(log_joint, init, "fullrank")
    q0 = _as_method(sga, "meanfield")
    q0.mean, q0.scale_tril = np.asarray(init, float).copy(), 0.1 * np.eye(sga.dim)
    candidates = [_as_method(sga, "meanfield"), q0] + (
        [_as_method(lap, "meanfield")] if lap else []
    )
    for c in candidates:
        c.scale_tril = (
            np.minimum(c.scale_tril, 1.0) if c is not candidates[-1] or not lap else c.scale_tril
        )
    D = sga.dim
    # enough fixed draws that the objective cannot be over-fitted by the variational parameters;
    # a mean-field scale sees only its own coordinate's draws, so their number need not grow with D
    mf_draws = 4 * draws
    fr_draws = int(min(max(4 * draws, 4 * (D + D * (D + 1) // 2)), 512))
    q, info = refine(log_joint, _best(log_joint, candidates, probe), draws=mf_draws, seed=seed)
    stages = [dict(info, family="meanfield")]
    if STRUCTURES[method].dense:
        candidates = [_as_method(q, "fullrank"), sga] + ([lap] if lap else [])
        q, info = refine(
            log_joint, _best(log_joint, candidates, probe), draws=fr_draws, seed=seed + 1
        )
        stages.append(dict(info, family="fullrank"))
    evals = sum(s["gradient_evaluations"] for s in stages)
    # keep the stochastic fit if the polished one is not better on independent draws
    # (common random numbers: the per-draw difference has a much smaller Monte Carlo error)
    check = np.random.default_rng(seed + 11).standard_normal((1000, sga.dim))
    new_terms, old_terms = elbo_terms(log_joint, q, check), elbo_terms(log_joint, sga, check)
    polished = float(np.mean(new_terms)) if np.all(np.isfinite(new_terms)) else -np.inf
    original = float(np.mean(old_terms)) if np.all(np.isfinite(old_terms)) else -np.inf
    used = not_worse(new_terms, old_terms)
    out = q if used else sga
    if used:
        # q may descend from the Laplace or the init candidate: the history is the ADVI run's
        steps = sum(st["iterations"] for st in stages)
        out.elbo_trace = list(sga.elbo_trace) + [(sga.iterations + steps, polished)]
        out.warnings = list(sga.warnings)
        out.seconds, out.averaged = sga.seconds, sga.averaged
        out.converged = sga.converged or stages[-1]["converged"]
        if not sga.converged and out.converged:
            out.warnings.append(
                "stochastic ADVI did not converge; the deterministic polish then reached the "
                "optimum of the fixed-draw ELBO"
            )
    out.grad_evals = sga.grad_evals + evals
    out.eta, out.grad_samples, out.eta_trials = sga.eta, sga.grad_samples, list(sga.eta_trials)
    out.stopped_by = sga.stopped_by  # the stochastic stage's test (ppl.inference.loop)
    out.elbo = polished if used else (original if np.isfinite(original) else sga.elbo)
    out.iterations = sga.iterations
    return out, {
        "used": bool(used),
        "stochastic_converged": bool(sga.converged),
        "draws": draws,
        "stages": stages,
        "gradient_evaluations": evals,
        "laplace": lap is not None,
        "elbo_advi": original,
        "elbo_polished": polished,
    }
