"""Multivariate distributions: vector-valued draws (``value_ndim == 1``)."""

from __future__ import annotations

from typing import Any

import autograd.numpy as np
import numpy as onp

from ppl.library.cholesky_ops import (
    cholesky,
    gaussian_quad,
    log_diagonal,
    solve_lower,
    solve_lower_vector,
)
from ppl.library.special import betaln, gammaln

from .base import LOG_2, LOG_2PI, LOG_PI, Distribution, batch_shape, raw, safe, where, where_support

#: Stan's tolerance when checking that a vector is a simplex.
SIMPLEX_TOL = 1e-8


def _usable_factor(L: Any) -> tuple[Any, Any]:
    """(mask of batch entries whose factor has a positive finite diagonal, factor with the
    identity standing in elsewhere): a singular factor gives -inf, never a LinAlgError."""
    L_raw = raw(L)
    diag = onp.diagonal(L_raw, axis1=-2, axis2=-1)
    ok = onp.all(onp.isfinite(L_raw), axis=(-2, -1)) & onp.all(diag > 0, axis=-1)
    if onp.all(ok):
        return ok, L
    return ok, where(ok[..., None, None], L, onp.eye(L_raw.shape[-1]))


def _mvn_cholesky_lp(y: Any, mu: Any, L: Any) -> Any:
    """log N(y | mu, L L^T), L lower triangular (its upper triangle is not read, as Stan's)."""
    ok, L = _usable_factor(L)
    if not onp.all(ok):
        return where_support(ok, _mvn_cholesky_lp(y, mu, L))
    diff = y - mu
    K = np.shape(diff)[-1]
    # one primitive (triangular solves, broadcasting): its reverse rule lets a factor from
    # cholesky_decompose skip the general Cholesky rule (ppl.library.cholesky_ops)
    return gaussian_quad(diff, L) - 0.5 * K * LOG_2PI


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
            L = cholesky(Sigma)
        except onp.linalg.LinAlgError:
            # Some covariance is not positive definite: give those batch entries zero density
            # (-inf) and evaluate the rest with the identity standing in for the bad matrices.
            S = raw(Sigma)
            good = onp.all(onp.linalg.eigvalsh(S) > 0, axis=-1)
            try:
                onp.linalg.cholesky(onp.where(good[..., None, None], S, onp.eye(S.shape[-1])))
            except onp.linalg.LinAlgError:  # eigvalsh and cholesky disagree at the margin
                good = onp.zeros_like(good)
            L = cholesky(where(good[..., None, None], Sigma, onp.eye(S.shape[-1])))
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


_log_diag = log_diagonal


def _broadcast_solve(L: Any, diff: Any) -> tuple[Any, Any]:
    """(L^-1 diff, L) by a triangular solve (which broadcasts L and diff's batch axes)."""
    return solve_lower_vector(L, diff), L


def _mvt_cholesky_lp(y: Any, nu: Any, mu: Any, L: Any) -> Any:
    """log multi_student_t(y | nu, mu, L L^T)."""
    ok, L = _usable_factor(L)
    if not onp.all(ok):
        return where_support(ok, _mvt_cholesky_lp(y, nu, mu, L))
    z, L_b = _broadcast_solve(L, y - mu)
    K = np.shape(z)[-1]
    maha = np.sum(z * z, axis=-1)
    return (
        gammaln(0.5 * (nu + K))
        - gammaln(0.5 * nu)
        - 0.5 * K * (np.log(nu) + LOG_PI)
        - np.sum(_log_diag(L_b), axis=-1)
        - 0.5 * (nu + K) * np.log1p(maha / nu)
    )


def _mvt_draw(rng, nu, mu, L, size):
    shape = batch_shape(size, nu.shape, mu.shape[:-1], L.shape[:-2])
    w = rng.chisquare(onp.broadcast_to(nu, shape), size=shape) / nu
    return _mvn_draw(rng, onp.zeros(L.shape[-1]), L, shape) / onp.sqrt(w)[..., None] + mu


class MultiStudentT(Distribution):
    """multi_student_t(nu, mu, Sigma): degrees of freedom, location vector, scale matrix."""

    name = "multi_student_t"
    params = ("nu", "mu", "Sigma")
    value_ndim = 1
    param_ndims = (0, 1, 2)
    support = "real"

    def _log_prob(self, y: Any, nu: Any, mu: Any, Sigma: Any) -> Any:
        return _mvt_cholesky_lp(y, nu, mu, cholesky(Sigma))

    def sample(self, rng, nu: Any, mu: Any, Sigma: Any, size: Any = None) -> Any:
        return _mvt_draw(rng, raw(nu), raw(mu), onp.linalg.cholesky(raw(Sigma)), size)


class MultiStudentTCholesky(Distribution):
    """multi_student_t_cholesky(nu, mu, L): scale matrix L L^T."""

    name = "multi_student_t_cholesky"
    params = ("nu", "mu", "L")
    value_ndim = 1
    param_ndims = (0, 1, 2)
    support = "real"

    def _log_prob(self, y: Any, nu: Any, mu: Any, L: Any) -> Any:
        return _mvt_cholesky_lp(y, nu, mu, L)

    def sample(self, rng, nu: Any, mu: Any, L: Any, size: Any = None) -> Any:
        return _mvt_draw(rng, raw(nu), raw(mu), onp.tril(raw(L)), size)


class MultiNormalPrec(Distribution):
    """multi_normal_prec(mu, Omega): mean vector and precision matrix (inverse covariance)."""

    name = "multi_normal_prec"
    params = ("mu", "Omega")
    value_ndim = 1
    param_ndims = (1, 2)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, Omega: Any) -> Any:
        # Omega = L L^T: the quadratic form is |L^T (y - mu)|^2 and log|Sigma| = -2 sum log L_kk
        L = cholesky(Omega)
        diff = y - mu
        z = np.matmul(np.swapaxes(L, -1, -2), diff[..., None])[..., 0]
        K = np.shape(diff)[-1]
        return -0.5 * np.sum(z * z, axis=-1) + np.sum(_log_diag(L), axis=-1) - 0.5 * K * LOG_2PI

    def sample(self, rng, mu: Any, Omega: Any, size: Any = None) -> Any:
        return _mvn_draw(rng, raw(mu), onp.linalg.cholesky(onp.linalg.inv(raw(Omega))), size)


def lkj_log_normaliser(eta: Any, K: int) -> Any:
    """log of the LKJ normalising integral of det(R)^(eta - 1) over K x K correlation matrices.

    Lewandowski, Kurowicka and Joe (2009): 2^(sum_k (2 eta - 2 + K - k)(K - k))
    prod_k B(eta + (K - k - 1)/2, eta + (K - k - 1)/2)^(K - k), k = 1..K-1.
    """
    total = 0.0
    for k in range(1, K):
        b = eta + 0.5 * (K - k - 1)
        total = total + (2.0 * eta - 2.0 + K - k) * (K - k) * LOG_2 + (K - k) * betaln(b, b)
    return total


class LkjCorr(Distribution):
    """lkj_corr(eta): density over correlation matrices proportional to det(Sigma)^(eta - 1)."""

    name = "lkj_corr"
    params = ("eta",)
    value_ndim = 2
    param_ndims = (0,)
    support = "corr_matrix"
    has_rng = False  # Stan's lkj_corr_rng(K, eta) takes the dimension

    def _log_prob(self, y: Any, eta: Any) -> Any:
        K = np.shape(y)[-1]
        logdet = 2.0 * np.sum(_log_diag(cholesky(y)), axis=-1)
        return (eta - 1.0) * logdet - lkj_log_normaliser(eta, K)


class LkjCorrCholesky(Distribution):
    """lkj_corr_cholesky(eta): the Cholesky factor L of an LKJ(eta) correlation matrix.

    log p(L) = sum_{k=2}^K (K - k + 2 eta - 2) log L_kk - log normaliser.
    """

    name = "lkj_corr_cholesky"
    params = ("eta",)
    value_ndim = 2
    param_ndims = (0,)
    support = "cholesky_factor_corr"
    has_rng = False  # Stan's lkj_corr_cholesky_rng(K, eta) takes the dimension

    def _log_prob(self, L: Any, eta: Any) -> Any:
        K = np.shape(L)[-1]
        k = onp.arange(1, K + 1)
        eta_k = np.reshape(eta, np.shape(eta) + (1,))
        weights = where(k >= 2, K - k + 2.0 * eta_k - 2.0, 0.0)
        log_diag = _log_diag(L)
        return np.sum(weights * log_diag, axis=-1) - lkj_log_normaliser(eta, K)


def _log_multigamma(a: Any, K: int) -> Any:
    """log Gamma_K(a) = K(K-1)/4 log pi + sum_j log Gamma(a + (1 - j)/2)."""
    total = 0.25 * K * (K - 1) * LOG_PI
    for j in range(1, K + 1):
        total = total + gammaln(a + 0.5 * (1 - j))
    return total


def _chol_logdet(S: Any) -> tuple[Any, Any]:
    L = cholesky(S)
    return L, 2.0 * np.sum(_log_diag(L), axis=-1)


def _trace_solve(L: Any, W: Any) -> Any:
    """tr((L L^T)^-1 W) through two triangular solves."""
    K = np.shape(L)[-1]
    A = solve_lower(L, W)
    B = solve_lower(L, np.swapaxes(A, -1, -2))
    return np.sum(B * onp.eye(K), axis=(-2, -1))


def _matrix_draws(rng, family, nu, Sigma, size):
    """One scipy draw per batch entry (generated quantities only: not a hot path)."""
    shape = batch_shape(size, nu.shape, Sigma.shape[:-2])
    K = Sigma.shape[-1]
    nus = onp.broadcast_to(nu, shape).reshape(-1)
    sigmas = onp.broadcast_to(Sigma, shape + (K, K)).reshape(-1, K, K)
    out = [
        family(df=float(n), scale=S).rvs(random_state=rng) for n, S in zip(nus, sigmas, strict=True)
    ]
    return onp.reshape(onp.array(out), shape + (K, K))


class Wishart(Distribution):
    """wishart(nu, Sigma): degrees of freedom nu > K - 1 and scale matrix Sigma."""

    name = "wishart"
    params = ("nu", "Sigma")
    value_ndim = 2
    param_ndims = (0, 2)
    support = "positive_definite"

    def _log_prob(self, W: Any, nu: Any, Sigma: Any) -> Any:
        K = np.shape(W)[-1]
        _, logdet_w = _chol_logdet(W)
        L_s, logdet_s = _chol_logdet(Sigma)
        return (
            0.5 * (nu - K - 1.0) * logdet_w
            - 0.5 * _trace_solve(L_s, W)
            - 0.5 * nu * K * LOG_2
            - 0.5 * nu * logdet_s
            - _log_multigamma(0.5 * nu, K)
        )

    def sample(self, rng, nu: Any, Sigma: Any, size: Any = None) -> Any:
        from scipy.stats import wishart

        return _matrix_draws(rng, wishart, raw(nu), raw(Sigma), size)


class InvWishart(Distribution):
    """inv_wishart(nu, Sigma): W^-1 ~ wishart(nu, Sigma^-1)."""

    name = "inv_wishart"
    params = ("nu", "Sigma")
    value_ndim = 2
    param_ndims = (0, 2)
    support = "positive_definite"

    def _log_prob(self, W: Any, nu: Any, Sigma: Any) -> Any:
        K = np.shape(W)[-1]
        L_w, logdet_w = _chol_logdet(W)
        _, logdet_s = _chol_logdet(Sigma)
        return (
            0.5 * nu * logdet_s
            - 0.5 * (nu + K + 1.0) * logdet_w
            - 0.5 * _trace_solve(L_w, Sigma)
            - 0.5 * nu * K * LOG_2
            - _log_multigamma(0.5 * nu, K)
        )

    def sample(self, rng, nu: Any, Sigma: Any, size: Any = None) -> Any:
        from scipy.stats import invwishart

        return _matrix_draws(rng, invwishart, raw(nu), raw(Sigma), size)


MULTIVARIATE: tuple[Distribution, ...] = (
    MultiNormal(),
    MultiNormalCholesky(),
    Dirichlet(),
    MultiStudentT(),
    MultiStudentTCholesky(),
    MultiNormalPrec(),
    LkjCorr(),
    LkjCorrCholesky(),
    Wishart(),
    InvWishart(),
)
