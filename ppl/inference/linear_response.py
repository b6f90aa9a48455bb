"""Linear-response covariances: the posterior covariance a mean-field fit implies but does not
represent (Giordano, Broderick & Jordan 2018; the DADVI paper, Giordano, Ingram & Broderick
2024, section on LR covariances).

A mean-field q's own sds shrink where parameters are correlated (it matches conditional, not
marginal, variances). Perturbing the log joint by t' zeta moves the optimum of the ELBO; the
response of E_q[zeta] to t is a covariance estimate, exact for Gaussian posteriors:

    Sigma_LR = J H^-1 J',   H = Hessian of -ELBO in q's parameters eta at the optimum,
                            J = d E_q[zeta] / d eta.

Here the ELBO is the fit's own fixed-draw objective, H comes from Hessian-vector products
(forward differences of the exact gradient, so they pass through every family's sampler), one
per parameter, and J from the family's mean map.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from autograd import grad, jacobian

#: Parameters (2 per unconstrained coordinate) up to which H is formed from products.
MAX_LR_PARAMETERS = 600


def elbo_hessian(negative_elbo: Callable, theta: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """The Hessian of the fixed-draw -ELBO at theta from one Hessian-vector product per
    parameter, each a forward difference of the exact gradient along a unit vector (exact for
    the quadratic part; the rest is off by O(step), far below the covariance's own error).
    An objective with a `gradients` method (ppl.inference.saa.NegativeElbo) takes them all in
    a few batched calls."""
    theta = np.asarray(theta, dtype=float)
    h = step * np.maximum(1.0, np.abs(theta))
    points = np.vstack([theta, theta + np.diag(h)])
    if hasattr(negative_elbo, "gradients"):
        grads = negative_elbo.gradients(points)
    else:
        gradient = grad(negative_elbo)
        grads = np.array([np.asarray(gradient(p), dtype=float) for p in points])
    H = ((grads[1:] - grads[0]) / h[:, None]).T
    return 0.5 * (H + H.T)


def lr_covariance(negative_elbo: Callable, mean_map: Callable, theta: np.ndarray) -> np.ndarray:
    """Sigma_LR = J H^-1 J' at the optimum theta of `negative_elbo` (None-free: raises
    LinAlgError when H is not positive definite, i.e. theta is not a strict optimum)."""
    H = elbo_hessian(negative_elbo, theta)
    J = np.asarray(jacobian(mean_map)(np.asarray(theta, dtype=float)))
    factor = np.linalg.cholesky(H)
    A = np.linalg.solve(factor, J.T)
    cov = A.T @ A
    return 0.5 * (cov + cov.T)
