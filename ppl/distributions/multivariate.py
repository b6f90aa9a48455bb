"""Multivariate distributions: vector-valued draws (``value_ndim == 1``)."""

from __future__ import annotations

from typing import Any

import autograd.numpy as np
import numpy as onp

from ppl.special import gammaln

from .base import LOG_2PI, Distribution, batch_shape, raw, safe, where, where_support

#: Stan's tolerance when checking that a vector is a simplex.
SIMPLEX_TOL = 1e-8


def _mvn_cholesky_lp(y: Any, mu: Any, L: Any) -> Any:
    """log N(y | mu, L L^T) with everything broadcast to one batch shape first.

    Autograd's ``solve`` does not un-broadcast its gradients, so L and the residual are
    expanded explicitly (by adding zeros, which autograd does un-broadcast) before solving.
    """
    diff = y - mu
    K = np.shape(diff)[-1]
    batch = onp.broadcast_shapes(np.shape(diff)[:-1], np.shape(L)[:-2])
    L_b = L + onp.zeros(batch + (K, K))
    diff_b = diff + onp.zeros(batch + (K,))
    z = np.linalg.solve(L_b, diff_b[..., None])[..., 0]
    log_diag = np.log(np.sum(L_b * onp.eye(K), axis=-1))
    return -0.5 * np.sum(z * z, axis=-1) - np.sum(log_diag, axis=-1) - 0.5 * K * LOG_2PI


def _mvn_draw(rng: onp.random.Generator, mu: onp.ndarray, L: onp.ndarray, size: Any) -> onp.ndarray:
    """mu + L z with z standard normal, over the requested batch shape."""
    shape = batch_shape(size, mu.shape[:-1], L.shape[:-2])
    K = L.shape[-1]
    z = rng.standard_normal(shape + (K,))
    return mu + onp.einsum("...ij,...j->...i", L, z)


class MultiNormal(Distribution):
    """multi_normal(mu, Sigma): mean vector and covariance matrix."""

    name = "multi_normal"
    params = ("mu", "Sigma")
    value_ndim = 1
    param_ndims = (1, 2)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, Sigma: Any) -> Any:
        try:
            L = np.linalg.cholesky(Sigma)
        except onp.linalg.LinAlgError:
            # Some covariance is not positive definite: give those batch entries zero density
            # (-inf) and evaluate the rest with the identity standing in for the bad matrices.
            S = raw(Sigma)
            good = onp.all(onp.linalg.eigvalsh(S) > 0, axis=-1)
            try:
                onp.linalg.cholesky(onp.where(good[..., None, None], S, onp.eye(S.shape[-1])))
            except onp.linalg.LinAlgError:  # eigvalsh and cholesky disagree at the margin
                good = onp.zeros_like(good)
            L = np.linalg.cholesky(where(good[..., None, None], Sigma, onp.eye(S.shape[-1])))
            return where_support(good, _mvn_cholesky_lp(y, mu, L))
        return _mvn_cholesky_lp(y, mu, L)

    def sample(self, rng: onp.random.Generator, mu: Any, Sigma: Any, size: Any = None) -> Any:
        return _mvn_draw(rng, raw(mu), onp.linalg.cholesky(raw(Sigma)), size)


class MultiNormalCholesky(Distribution):
    """multi_normal_cholesky(mu, L): covariance L L^T, L lower triangular with positive diagonal."""

    name = "multi_normal_cholesky"
    params = ("mu", "L")
    value_ndim = 1
    param_ndims = (1, 2)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, L: Any) -> Any:
        return _mvn_cholesky_lp(y, mu, L)

    def sample(self, rng: onp.random.Generator, mu: Any, L: Any, size: Any = None) -> Any:
        return _mvn_draw(rng, raw(mu), onp.tril(raw(L)), size)


class Dirichlet(Distribution):
    """dirichlet(alpha): density over simplexes, alpha a vector of positive prior counts."""

    name = "dirichlet"
    params = ("alpha",)
    value_ndim = 1
    param_ndims = (1,)
    support = "simplex"

    def _log_prob(self, y: Any, alpha: Any) -> Any:
        y_raw = raw(y)
        positive = y_raw > 0
        ok = onp.all(positive, axis=-1) & (onp.abs(onp.sum(y_raw, axis=-1) - 1.0) <= SIMPLEX_TOL)
        ys = safe(positive, y, 1.0)
        lp = (
            gammaln(np.sum(alpha, axis=-1))
            - np.sum(gammaln(alpha), axis=-1)
            + np.sum((alpha - 1.0) * np.log(ys), axis=-1)
        )
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, size: Any = None) -> Any:
        a = raw(alpha)
        shape = batch_shape(size, a.shape[:-1])
        g = rng.gamma(onp.broadcast_to(a, shape + a.shape[-1:]))
        return g / onp.sum(g, axis=-1, keepdims=True)


MULTIVARIATE: tuple[Distribution, ...] = (MultiNormal(), MultiNormalCholesky(), Dirichlet())
