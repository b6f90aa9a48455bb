"""q(g) N(x; x*(g), P(g)^-1): the latents the log joint is quadratic in, integrated out exactly
(ppl.inference.collapse), and VI on what is left: a full-rank Gaussian on g by L-BFGS on fixed
draws of the collapsed density, then, where its tail is still off, a normalizing flow on g. The
result is a VIResult on the whole unconstrained space with exact draws and log q, so the PSIS
check, the verdict and the outputs read it as any other q."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ppl.families.gaussian import FullRankGaussian
from ppl.inference.auto import CandidateFailed, capped
from ppl.inference.collapse import LOG_2PI, Collapsed, Split, find_split
from ppl.inference.collapse_grid import CELLS, fit_grid
from ppl.inference.result import VIResult
from ppl.inference.saa import FIRST_DRAWS, fit_fixed_draws

#: Draws of the first fit's q at which the split is tested, and those q's moments come from.
SPLIT_POINTS = 8
MOMENT_DRAWS = 256
#: The largest draw set of the Gaussian on g: rounds on 8 and 32 draws, then a check on 32
#: independent ones. Each draw costs 2 + 6 x colours gradients; on measurement error a round on
#: 128 draws (15,000 gradients) moved q by 0.03 sd and ran past the budget, and PSIS corrects
#: what Monte Carlo error is left (its summaries: every mean within 0.1 sd on seeds 1 and 3).
COLLAPSED_MAX_DRAWS = 64


@dataclass
class CollapsedResult(VIResult):
    """q(g) times the exact conditional of the integrated coordinates; `outer` is q(g) (a
    Gaussian VIResult or a flow's), `collapsed` the integral; mean and scale_tril are q's
    moments on the whole space, from MOMENT_DRAWS draws."""

    outer: VIResult | None = None
    collapsed: Collapsed | None = None
    polish: dict = field(default_factory=dict)
    summaries: dict = field(default_factory=dict)  # Rao-Blackwellised moments, computed once

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        g = np.asarray(self.outer.sample(rng, n), dtype=float)
        x_star, L, *_ = self.collapsed.conditional(g)
        eps = rng.standard_normal(x_star.shape)
        x = x_star + np.linalg.solve(np.swapaxes(L, 1, 2), eps[:, :, None])[:, :, 0]
        return self.collapsed.full(g, x)

    def log_q(self, zeta: np.ndarray) -> np.ndarray:
        split = self.collapsed.split
        zeta = np.atleast_2d(np.asarray(zeta, dtype=float))
        g, x = zeta[:, split.outer], zeta[:, split.inner]
        x_star, L, *_, ok = self.collapsed.conditional(g)
        r = np.einsum("sji,sj->si", L, x - x_star)  # L' (x - x*)
        log_det = np.sum(np.log(np.diagonal(L, axis1=1, axis2=2)), axis=1)
        inner = log_det - 0.5 * len(split.inner) * LOG_2PI - 0.5 * np.sum(r**2, axis=1)
        return np.where(ok, np.asarray(self.outer.log_q(g), dtype=float) + inner, -np.inf)

    def log_density(self, zeta: np.ndarray) -> np.ndarray:
        return self.log_q(zeta)

    @property
    def outer_dim(self) -> int:
        return len(self.collapsed.split.outer)


def split_of(model, first_vi, seed: int) -> Split | None:
    """The coordinates to integrate out, tested at draws of the first fit's q."""
    rng = np.random.default_rng(seed)
    points = np.asarray(first_vi.sample(rng, SPLIT_POINTS), dtype=float)
    if not np.all(np.isfinite(points)):
        return None
    return find_split(model, points, rng)


def fit_collapsed(log_joint, dim: int, split: Split, first_vi, *, seed: int = 0,
                  budget: int | None = None,
                  max_iter: int | None = None) -> CollapsedResult:  # fmt: skip
    """A full-rank Gaussian on g by L-BFGS on fixed draws of the collapsed density, started at
    the first fit's moments of g; `budget` in gradient evaluations (the collapsed density's
    own count: its products included)."""
    points = np.asarray(first_vi.sample(np.random.default_rng(seed + 1), 256), dtype=float)
    collapsed = Collapsed(log_joint, split, points[:, split.inner].mean(axis=0), dim)
    centre, frame = start_frame(collapsed, points[:, split.outer], budget)
    if len(split.outer) in CELLS:
        grid = fit_grid(collapsed, centre, frame)
        return assemble(grid, collapsed, grid, seed)
    family = FullRankGaussian(centre, frame)
    Dg = len(split.outer)
    within = None if budget is None else _draws_within(budget, collapsed)
    fit = fit_fixed_draws(collapsed, family, family.initial(), seed=seed,
                          first_draws=max(FIRST_DRAWS, 2 * Dg), max_draws=COLLAPSED_MAX_DRAWS,
                          max_iter=capped(500, max_iter), max_evals=within)  # fmt: skip
    mean, L = family.mean_scale(fit.theta)
    # a round the budget ended before its first evaluation has no ELBO; theta is the last one's
    finite = [r["elbo"] for r in fit.polish["rounds"] if np.isfinite(r["elbo"])]
    fit.elbo = finite[-1] if finite else fit.elbo
    outer = VIResult("fullrank", mean, L, fit.elbo_trace, fit.elbo, fit.iterations, 0,
                     fit.converged, 0.0, fit.seconds, list(fit.warnings))  # fmt: skip
    if not np.isfinite(fit.elbo):
        raise CandidateFailed("the collapsed density's fixed-draw ELBO is not finite",
                              collapsed.work)  # fmt: skip
    return assemble(outer, collapsed, fit, seed)


def start_frame(collapsed: Collapsed, g: np.ndarray,
                budget: int | None = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The mode of the collapsed density in g (L-BFGS from the first fit's mean of g, or from 0
    where that is outside its support: a first fit on an unbounded spike of the whole density,
    which the integral smooths away) and the Cholesky factor of its Laplace covariance, or of
    the first fit's sds where the curvature is not negative definite."""
    from scipy.optimize import minimize

    sd = np.maximum(g.std(axis=0), 1e-3)
    starts = [g.mean(axis=0), np.zeros(g.shape[1])]
    values = [float(collapsed(s[None, :])[0]) for s in starts]
    start = starts[0] if np.isfinite(values[0]) else starts[1]
    if not np.isfinite(max(values)):
        raise CandidateFailed("the collapsed density is not finite at the first fit's mean or at 0",
                              collapsed.work)  # fmt: skip

    def gradient(x):  # within the budget (gamma_normal's Hessian: 114,054 where 13,500 were left)
        if budget is not None and collapsed.work > budget:
            raise CandidateFailed("its mode and Laplace frame used up the gradient budget",
                                  collapsed.work)  # fmt: skip
        return collapsed._gradient(x[None, :])[0]

    def negative(x):
        value = collapsed(x[None, :])
        if not np.isfinite(value[0]):
            return 1e300, np.zeros_like(x)
        return -float(value[0]), -gradient(x)

    with np.errstate(all="ignore"):
        opt = minimize(negative, start, jac=True, method="L-BFGS-B", options={"maxiter": 200})
    mode = opt.x if np.isfinite(opt.fun) and opt.fun < 1e300 else start
    step = 1e-4 * np.maximum(1.0, np.abs(mode))
    H = np.array([(gradient(mode + e) - gradient(mode - e)) / (2 * e[k])
                  for k, e in enumerate(np.diag(step))])  # fmt: skip
    try:
        return mode, np.linalg.cholesky(np.linalg.inv(-0.5 * (H + H.T)))
    except np.linalg.LinAlgError:
        return mode, np.diag(sd)


def assemble(outer: VIResult, collapsed: Collapsed, fit, seed: int) -> CollapsedResult:
    """The whole-space result of q(g) = `outer` (its fit: trace, iterations, convergence)."""
    q = CollapsedResult("fullrank", np.zeros(collapsed.dim), np.eye(collapsed.dim),
                        fit.elbo_trace, fit.elbo, fit.iterations, 0, fit.converged, 0.0,
                        fit.seconds, list(fit.warnings), outer=outer,
                        collapsed=collapsed)  # fmt: skip
    set_moments(q, seed)
    q.grad_evals = collapsed.work
    q.polish = {"integrated": list(collapsed.split.names), "outer_dim": len(collapsed.split.outer),
                "colours": len(collapsed.split.colours), "outer": outer.method}  # fmt: skip
    return q


def set_moments(q: VIResult, seed: int) -> None:
    """q's mean and the Cholesky factor of its covariance on the whole space, from
    MOMENT_DRAWS of its draws (for whatever reads q's moments)."""
    zeta = q.sample(np.random.default_rng(seed + 2), MOMENT_DRAWS)
    q.mean = zeta.mean(axis=0)
    cov = np.atleast_2d(np.cov(zeta, rowvar=False))
    try:
        q.scale_tril = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        q.scale_tril = np.diag(np.sqrt(np.maximum(np.diag(cov), 0.0)))


def _draws_within(budget: int, collapsed: Collapsed) -> int:
    """Draw evaluations the Gaussian's solve may spend: the budget less what was spent and
    what the moments' draws will cost."""
    reserve = MOMENT_DRAWS * (3 + 2 * len(collapsed.split.colours))
    return max(0, budget - collapsed.work - reserve) // cost_per_draw(collapsed.split)


def cost_per_draw(split: Split) -> int:
    """Gradient evaluations per draw of one value-and-gradient of the collapsed density: two
    gradients, a product (two) per colour, and a third-derivative pass (four) per colour."""
    return 2 + 6 * len(split.colours)
