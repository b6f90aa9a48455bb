"""Stan's generalised linear model densities: y ~ family(link^-1(alpha + x * beta)) in one call.

Each takes the design matrix x (rows are observations), an intercept alpha (a scalar, or a
vector with one entry per row; per-category for categorical_logit_glm) and coefficients beta,
and sums the per-row log densities over the rows, as Stan's `_glm` functions do. Scalars given
for vector parameters are padded to a trailing axis of length 1 by the caller's alignment (see
``param_min_ndims``), so they broadcast over the rows.
"""

from __future__ import annotations

from typing import Any

import autograd.numpy as np

from .base import Distribution, raw, rows_times
from .continuous import Normal
from .discrete import BernoulliLogit, CategoricalLogit, NegBinomial2Log, PoissonLog


def linear_predictor(x: Any, alpha: Any, beta: Any) -> Any:
    """alpha + x beta over the rows of x, batch axes broadcast (beta on its last axis)."""
    return alpha + rows_times(x, beta)


class _GLM(Distribution):
    value_ndim = 1
    discrete = True
    has_rng = False
    family: Distribution

    def _log_prob(self, y: Any, x: Any, alpha: Any, beta: Any, *extra: Any) -> Any:
        eta = linear_predictor(x, alpha, beta)
        return np.sum(self.family._log_prob(y, eta, *extra), axis=-1)


class BernoulliLogitGLM(_GLM):
    """bernoulli_logit_glm(x, alpha, beta): y[n] ~ bernoulli_logit(alpha + x[n] * beta)."""

    name = "bernoulli_logit_glm"
    params = ("x", "alpha", "beta")
    param_ndims = (2, 1, 1)
    param_min_ndims = (2, 0, 1)
    support = "binary"
    family = BernoulliLogit()


class PoissonLogGLM(_GLM):
    """poisson_log_glm(x, alpha, beta): y[n] ~ poisson_log(alpha + x[n] * beta)."""

    name = "poisson_log_glm"
    params = ("x", "alpha", "beta")
    param_ndims = (2, 1, 1)
    param_min_ndims = (2, 0, 1)
    support = "nonnegative_int"
    family = PoissonLog()


class NegBinomial2LogGLM(_GLM):
    """neg_binomial_2_log_glm(x, alpha, beta, phi): y[n] ~ neg_binomial_2_log(eta[n], phi)."""

    name = "neg_binomial_2_log_glm"
    params = ("x", "alpha", "beta", "phi")
    param_ndims = (2, 1, 1, 1)
    param_min_ndims = (2, 0, 1, 0)
    support = "nonnegative_int"
    family = NegBinomial2Log()


class NormalIdGLM(_GLM):
    """normal_id_glm(x, alpha, beta, sigma): y[n] ~ normal(alpha + x[n] * beta, sigma)."""

    name = "normal_id_glm"
    params = ("x", "alpha", "beta", "sigma")
    param_ndims = (2, 1, 1, 1)
    param_min_ndims = (2, 0, 1, 0)
    discrete = False
    support = "real"
    family = Normal()


class CategoricalLogitGLM(_GLM):
    """categorical_logit_glm(x, alpha, beta): y[n] ~ categorical_logit(alpha + x[n] * beta)."""

    name = "categorical_logit_glm"
    params = ("x", "alpha", "beta")
    param_ndims = (2, 1, 2)
    support = "int_range"

    def _log_prob(self, y: Any, x: Any, alpha: Any, beta: Any) -> Any:
        eta = alpha[..., None, :] + np.matmul(x, beta)  # (..., N, K)
        lp = CategoricalLogit()._log_prob(raw(y), eta)
        return np.sum(lp, axis=-1)


GLMS: tuple[Distribution, ...] = (
    BernoulliLogitGLM(),
    PoissonLogGLM(),
    NegBinomial2LogGLM(),
    NormalIdGLM(),
    CategoricalLogitGLM(),
)
