"""`auto`'s Laplace candidate (ppl.inference.laplace, laplace_fit): where the quadratic collapse
found nothing to integrate out exactly and the Gaussians leave k-hat over 0.7, the latents in
which the log joint is concave, all but at most two coordinates, are integrated out by
Laplace's method (INLA's and TMB's step: a Poisson likelihood on a GP's latent field), and the
two or one left get a grid. Not exact: PSIS judges q as any other, and it is kept on a higher
ELBO."""

from __future__ import annotations

import numpy as np

from ppl.methods.collapse import GRID_TITLE

LAPLACE = "Laplace-collapsed q"
LAPLACE_TITLE = "Gaussian at the conditional mode given the rest (Laplace's method, integrated out)"
#: Draws of the best q so far at which -H_xx must be positive definite.
SPLIT_POINTS = 8


def laplace_candidate(model, best, plan, *, seed: int, budget: int | None):
    """The Laplace grid q from the best q so far, or None where the quadratic collapse
    applies (`plan`: ppl.methods.collapse.CollapsePlan) or no split is concave with at most
    two coordinates left."""
    if plan.split is not None:
        return None
    from ppl.inference.laplace import laplace_split
    from ppl.inference.laplace_fit import fit_laplace

    points = np.asarray(best.vi.sample(np.random.default_rng(seed), SPLIT_POINTS), dtype=float)
    if not np.all(np.isfinite(points)):
        return None
    split = laplace_split(model, points)
    if split is None:
        return None
    return fit_laplace(model.log_joint, model.dim, split, best.vi, seed=seed, budget=budget)


def label_laplace(result, q) -> None:
    """The family lines: the integrated latents' Laplace Gaussian, the grid on the rest."""
    for name in result.families:
        result.families[name] = LAPLACE_TITLE if name in q.polish["integrated"] else GRID_TITLE


def laplace_description(q) -> str:
    return (f"{', '.join(q.polish['integrated'])} integrated out by Laplace's method (Newton to "
            f"the mode given the rest, the Gaussian there; {q.polish['cells']} cells, "
            f"{q.polish['newton_mean']:.1f} Newton iterations each on average); a grid on the "
            f"other {q.polish['outer_dim']} coordinates")  # fmt: skip
