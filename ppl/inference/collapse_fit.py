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
MOMENT_DRAWS = 1024
#: The largest draw set of the Gaussian on g (a few coordinates: its optimum's Monte Carlo error
#: at 128 draws is under a tenth of q's sds).
COLLAPSED_MAX_DRAWS = 128


@dataclass
class CollapsedResult(VIResult):
    """q(g) times the exact conditional of the integrated coordinates; `outer` is q(g) (a
    Gaussian VIResult or a flow's), `collapsed` the integral; mean and scale_tril are q's
    moments on the whole space, from MOMENT_DRAWS draws."""

    outer: VIResult | None = None
    collapsed: Collapsed | None = None
    polish: dict = field(default_factory=dict)

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
                  budget: int | None = None, max_iter: int | None = None) -> CollapsedResult:  # fmt: skip
    """A full-rank Gaussian on g by L-BFGS on fixed draws of the collapsed density, started at
    the first fit's moments of g; `budget` in gradient evaluations (the collapsed density's
    own count: its products included)."""
    points = np.asarray(first_vi.sample(np.random.default_rng(seed + 1), 256), dtype=float)
    collapsed = Collapsed(log_joint, split, points[:, split.inner].mean(axis=0), dim)
    g = points[:, split.outer]
    if len(split.outer) in CELLS:
        grid = fit_grid(collapsed, g.mean(axis=0), np.diag(np.maximum(g.std(axis=0), 1e-6)))
        return assemble(grid, collapsed, grid, seed)
    family = FullRankGaussian(g.mean(axis=0), np.diag(np.maximum(g.std(axis=0), 1e-6)))
    Dg = len(split.outer)
    fit = fit_fixed_draws(collapsed, family, family.initial(), seed=seed,
                          first_draws=max(FIRST_DRAWS, 2 * Dg), max_draws=COLLAPSED_MAX_DRAWS,
                          max_iter=capped(500, max_iter),
                          max_evals=None if budget is None else budget // cost_per_draw(split))  # fmt: skip
    mean, L = family.mean_scale(fit.theta)
    outer = VIResult("fullrank", mean, L, fit.elbo_trace, fit.elbo, fit.iterations, 0,
                     fit.converged, 0.0, fit.seconds, list(fit.warnings))  # fmt: skip
    if not np.isfinite(fit.elbo):
        raise CandidateFailed("the collapsed density's fixed-draw ELBO is not finite",
                              collapsed.work)  # fmt: skip
    return assemble(outer, collapsed, fit, seed)


def assemble(outer: VIResult, collapsed: Collapsed, fit, seed: int) -> CollapsedResult:
    """The whole-space result of q(g) = `outer` (its fit: trace, iterations, convergence)."""
    q = CollapsedResult("fullrank", np.zeros(collapsed.dim), np.eye(collapsed.dim),
                        fit.elbo_trace, fit.elbo, fit.iterations, 0, fit.converged, 0.0,
                        fit.seconds, list(fit.warnings), outer=outer,
                        collapsed=collapsed)  # fmt: skip
    zeta = q.sample(np.random.default_rng(seed + 2), MOMENT_DRAWS)
    q.mean = zeta.mean(axis=0)
    cov = np.atleast_2d(np.cov(zeta, rowvar=False))
    try:
        q.scale_tril = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        q.scale_tril = np.diag(np.sqrt(np.maximum(np.diag(cov), 0.0)))
    q.grad_evals = collapsed.work
    q.polish = {"integrated": list(collapsed.split.names), "outer_dim": len(collapsed.split.outer),
                "colours": len(collapsed.split.colours), "outer": outer.method}  # fmt: skip
    return q


def cost_per_draw(split: Split) -> int:
    """Gradient evaluations per draw of one value-and-gradient of the collapsed density: two
    gradients, and a product (two) per colour at the point and at 2 Dg shifted points."""
    return 2 + 2 * len(split.colours) * (1 + 2 * len(split.outer))
