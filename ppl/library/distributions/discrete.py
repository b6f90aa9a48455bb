"""Discrete distributions, with Stan's parameterisations.

Values are data (never differentiated); parameters may carry autograd gradients. Values that are
not whole numbers or lie outside the support get ``-inf``.
"""

from __future__ import annotations

from typing import Any

import autograd.numpy as np
import numpy as onp

from ppl.library.special import betaln, expit, gammaln, log_expit, logsumexp

from .base import (
    Distribution,
    batch_shape,
    is_int,
    raw,
    safe,
    where,
    where_support,
    xlog1py,
    xlogy,
)
from .special_extra import log_ndtr


def _int_draw(size: Any, params: tuple[Any, ...], fn: Any) -> Any:
    """Run ``fn(shape, *plain_params)``; a 0-d result comes back as a Python int."""
    plain = [raw(p) for p in params]
    shape = batch_shape(size, *(p.shape for p in plain))
    out = onp.asarray(fn(shape, *plain)).astype(onp.int64)
    return int(out) if out.ndim == 0 else out


def _trials(n: Any) -> Any:
    """Binomial trial counts as numpy's sampler wants them: integers (a loop's batched values
    can arrive as floats)."""
    return onp.asarray(n).astype(onp.int64)


def _log_choose(n: Any, k: Any) -> Any:
    """log of the binomial coefficient n choose k, for 0 <= k <= n."""
    return gammaln(n + 1.0) - gammaln(k + 1.0) - gammaln(n - k + 1.0)


def _binomial_support(n: Any, N: Any) -> tuple[Any, Any]:
    """(mask of valid counts, counts with invalid entries replaced by 0)."""
    n_raw = raw(n)
    ok = is_int(n_raw) & (n_raw >= 0) & (n_raw <= raw(N))
    return ok, safe(ok, n_raw, 0)


def _count_support(n: Any) -> tuple[Any, Any]:
    """(mask of valid non-negative counts, counts with invalid entries replaced by 0)."""
    n_raw = raw(n)
    ok = is_int(n_raw) & (n_raw >= 0)
    return ok, safe(ok, n_raw, 0)


class Bernoulli(Distribution):
    """bernoulli(theta): theta = Pr[y = 1]."""

    name = "bernoulli"
    params = ("theta",)
    param_ndims = (0,)
    discrete = True
    support = "binary"

    def _log_prob(self, y: Any, theta: Any) -> Any:
        y = raw(y)
        ok = (y == 0) | (y == 1)
        ys = safe(ok, y, 0)
        return where_support(ok, xlogy(ys, theta) + xlog1py(1 - ys, -theta))

    def sample(self, rng: onp.random.Generator, theta: Any, size: Any = None) -> Any:
        return _int_draw(size, (theta,), lambda s, t: rng.binomial(1, t, size=s))


class BernoulliLogit(Distribution):
    """bernoulli_logit(alpha): theta = inv_logit(alpha), computed as log-sigmoid for stability."""

    name = "bernoulli_logit"
    params = ("alpha",)
    param_ndims = (0,)
    discrete = True
    support = "binary"

    def _log_prob(self, y: Any, alpha: Any) -> Any:
        y = raw(y)
        ok = (y == 0) | (y == 1)
        if onp.all(ok):  # data checked against its bounds: no -inf to place
            return log_expit((2.0 * y - 1.0) * alpha)
        sign = safe(ok, 2.0 * y - 1.0, 1.0)
        return where_support(ok, log_expit(sign * alpha))

    def sample(self, rng: onp.random.Generator, alpha: Any, size: Any = None) -> Any:
        return _int_draw(size, (alpha,), lambda s, a: rng.binomial(1, expit(a), size=s))


class Binomial(Distribution):
    """binomial(N, theta): successes in N trials."""

    name = "binomial"
    params = ("N", "theta")
    param_ndims = (0, 0)
    discrete = True
    support = "int_range"

    def _log_prob(self, n: Any, N: Any, theta: Any) -> Any:
        ok, ns = _binomial_support(n, N)
        lp = _log_choose(N, ns) + xlogy(ns, theta) + xlog1py(N - ns, -theta)
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, N: Any, theta: Any, size: Any = None) -> Any:
        return _int_draw(size, (N, theta), lambda s, n, t: rng.binomial(_trials(n), t, size=s))


class BinomialLogit(Distribution):
    """binomial_logit(N, alpha): binomial with theta = inv_logit(alpha), in log-sigmoid form."""

    name = "binomial_logit"
    params = ("N", "alpha")
    param_ndims = (0, 0)
    discrete = True
    support = "int_range"

    def _log_prob(self, n: Any, N: Any, alpha: Any) -> Any:
        ok, ns = _binomial_support(n, N)
        log_p = -np.logaddexp(0.0, -alpha)
        log_q = -np.logaddexp(0.0, alpha)
        lp = _log_choose(N, ns) + ns * log_p + (N - ns) * log_q
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, N: Any, alpha: Any, size: Any = None) -> Any:
        def draw(s, n, a):
            return rng.binomial(_trials(n), expit(a), size=s)

        return _int_draw(size, (N, alpha), draw)


class BetaBinomial(Distribution):
    """beta_binomial(N, alpha, beta): binomial whose theta ~ beta(alpha, beta)."""

    name = "beta_binomial"
    params = ("N", "alpha", "beta")
    param_ndims = (0, 0, 0)
    discrete = True
    support = "int_range"

    def _log_prob(self, n: Any, N: Any, alpha: Any, beta: Any) -> Any:
        ok, ns = _binomial_support(n, N)
        lp = _log_choose(N, ns) + betaln(ns + alpha, N - ns + beta) - betaln(alpha, beta)
        return where_support(ok, lp)

    def sample(
        self, rng: onp.random.Generator, N: Any, alpha: Any, beta: Any, size: Any = None
    ) -> Any:
        return _int_draw(
            size,
            (N, alpha, beta),
            lambda s, n, a, b: rng.binomial(_trials(n), rng.beta(a, b, size=s)),
        )


class Poisson(Distribution):
    """poisson(lambda): rate."""

    name = "poisson"
    params = ("lambda",)
    param_ndims = (0,)
    discrete = True
    support = "nonnegative_int"

    def _log_prob(self, n: Any, lam: Any) -> Any:
        ok, ns = _count_support(n)
        return where_support(ok, xlogy(ns, lam) - lam - gammaln(ns + 1.0))

    def sample(self, rng: onp.random.Generator, lam: Any, size: Any = None) -> Any:
        return _int_draw(size, (lam,), lambda s, lm: rng.poisson(lm, size=s))


class PoissonLog(Distribution):
    """poisson_log(alpha): poisson with log rate alpha (exp only where the formula needs it)."""

    name = "poisson_log"
    params = ("alpha",)
    param_ndims = (0,)
    discrete = True
    support = "nonnegative_int"

    def _log_prob(self, n: Any, alpha: Any) -> Any:
        ok, ns = _count_support(n)
        # n * alpha with 0 * (-inf) = 0, so that alpha = -inf (rate 0) gives log p(0) = 0.
        n_alpha = ns * where(ns == 0, 0.0, alpha)
        return where_support(ok, n_alpha - np.exp(alpha) - gammaln(ns + 1.0))

    def sample(self, rng: onp.random.Generator, alpha: Any, size: Any = None) -> Any:
        return _int_draw(size, (alpha,), lambda s, a: rng.poisson(onp.exp(a), size=s))


class NegBinomial2(Distribution):
    """neg_binomial_2(mu, phi): mean mu, precision phi, variance mu + mu^2 / phi."""

    name = "neg_binomial_2"
    params = ("mu", "phi")
    param_ndims = (0, 0)
    discrete = True
    support = "nonnegative_int"

    def _log_prob(self, n: Any, mu: Any, phi: Any) -> Any:
        ok, ns = _count_support(n)
        lp = (
            gammaln(ns + phi)
            - gammaln(ns + 1.0)
            - gammaln(phi)
            + xlogy(ns, mu)
            - ns * np.log(mu + phi)
            - phi * np.log1p(mu / phi)
        )
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, mu: Any, phi: Any, size: Any = None) -> Any:
        # Gamma-Poisson mixture: exact for any real phi > 0.
        return _int_draw(size, (mu, phi), lambda s, m, p: rng.poisson(rng.gamma(p, m / p, size=s)))


def _one_hot(y: Any, K: int) -> tuple[Any, Any]:
    """(one-hot mask of the 1-based category over a new last axis, mask of valid y)."""
    y = raw(y)
    hot = y[..., None] == onp.arange(1, K + 1)
    return hot, hot.any(axis=-1)


def _categorical_draw(rng: onp.random.Generator, theta: onp.ndarray, size: Any) -> Any:
    """Inverse-CDF draws (1-based) from the simplexes on theta's last axis."""
    shape = batch_shape(size, theta.shape[:-1])
    K = theta.shape[-1]
    cdf = onp.cumsum(onp.broadcast_to(theta, shape + (K,)), axis=-1)
    cdf = cdf / cdf[..., -1:]
    u = rng.uniform(size=shape + (1,))
    out = 1 + onp.sum(cdf[..., :-1] < u, axis=-1)
    return int(out) if out.ndim == 0 else out.astype(onp.int64)


class Categorical(Distribution):
    """categorical(theta): y in 1..K with Pr[y = k] = theta[k]; theta a simplex (last axis)."""

    name = "categorical"
    params = ("theta",)
    param_ndims = (1,)
    discrete = True
    support = "int_range"

    def _log_prob(self, y: Any, theta: Any) -> Any:
        hot, ok = _one_hot(y, np.shape(theta)[-1])
        # Pick log theta[y] by a masked sum (autograd cannot differentiate take_along_axis);
        # unpicked entries become 1 before the log so a zero theta[k] cannot poison gradients.
        picked = np.sum(where(hot, np.log(where(hot, theta, 1.0)), 0.0), axis=-1)
        return where_support(ok, picked)

    def sample(self, rng: onp.random.Generator, theta: Any, size: Any = None) -> Any:
        return _categorical_draw(rng, raw(theta), size)


class CategoricalLogit(Distribution):
    """categorical_logit(beta): categorical with theta = softmax(beta)."""

    name = "categorical_logit"
    params = ("beta",)
    param_ndims = (1,)
    discrete = True
    support = "int_range"

    def _log_prob(self, y: Any, beta: Any) -> Any:
        hot, ok = _one_hot(y, np.shape(beta)[-1])
        picked = np.sum(where(hot, beta, 0.0), axis=-1)
        return where_support(ok, picked - logsumexp(beta, axis=-1))

    def sample(self, rng: onp.random.Generator, beta: Any, size: Any = None) -> Any:
        b = raw(beta)
        theta = onp.exp(b - b.max(axis=-1, keepdims=True))
        return _categorical_draw(rng, theta, size)


class NegBinomial(Distribution):
    """neg_binomial(alpha, beta): shape and inverse scale; mean alpha / beta."""

    name = "neg_binomial"
    params = ("alpha", "beta")
    param_ndims = (0, 0)
    discrete = True
    support = "nonnegative_int"

    def _log_prob(self, n: Any, alpha: Any, beta: Any) -> Any:
        ok, ns = _count_support(n)
        lp = (
            gammaln(ns + alpha)
            - gammaln(ns + 1.0)
            - gammaln(alpha)
            + alpha * (np.log(beta) - np.log1p(beta))
            - ns * np.log1p(beta)
        )
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, beta: Any, size: Any = None) -> Any:
        return _int_draw(
            size, (alpha, beta), lambda s, a, b: rng.poisson(rng.gamma(a, 1.0 / b, size=s))
        )


class NegBinomial2Log(Distribution):
    """neg_binomial_2_log(eta, phi): neg_binomial_2 with mean exp(eta), kept in log space."""

    name = "neg_binomial_2_log"
    params = ("eta", "phi")
    param_ndims = (0, 0)
    discrete = True
    support = "nonnegative_int"

    def _log_prob(self, n: Any, eta: Any, phi: Any) -> Any:
        ok, ns = _count_support(n)
        log_phi = np.log(phi)
        log_mu_phi = np.logaddexp(eta, log_phi)  # log(mu + phi)
        lp = (
            gammaln(ns + phi)
            - gammaln(ns + 1.0)
            - gammaln(phi)
            + ns * (eta - log_mu_phi)
            + phi * (log_phi - log_mu_phi)
        )
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, eta: Any, phi: Any, size: Any = None) -> Any:
        return _int_draw(
            size, (eta, phi), lambda s, e, p: rng.poisson(rng.gamma(p, onp.exp(e) / p, size=s))
        )


def _softplus(x: Any) -> Any:
    return np.logaddexp(0.0, x)


def _ordinal_bounds(k: Any, c: Any) -> tuple[Any, Any, Any, Any, Any]:
    """(first, last, c_{k-1}, c_k, ok) for outcomes k in 1..K, K - 1 cut points on c's last axis.

    Cut points are picked by masked sums (no fancy indexing, so autograd differentiates them);
    c_{k-1} is 0 where k = 1 and c_k is 0 where k = K (those branches are never used).
    """
    hot, ok = _one_hot(k, np.shape(c)[-1] + 1)
    c_lo = np.sum(where(hot[..., 1:], c, 0.0), axis=-1)
    c_hi = np.sum(where(hot[..., :-1], c, 0.0), axis=-1)
    return hot[..., 0], hot[..., -1], c_lo, c_hi, ok


class OrderedLogistic(Distribution):
    """ordered_logistic(eta, c): k in 1..K, Pr = logit^-1(eta - c_{k-1}) - logit^-1(eta - c_k)."""

    name = "ordered_logistic"
    params = ("eta", "c")
    param_ndims = (0, 1)
    discrete = True
    support = "int_range"

    def _log_prob(self, k: Any, eta: Any, c: Any) -> Any:
        first, last, c_lo, c_hi, ok = _ordinal_bounds(k, c)
        a = eta - c_lo  # > b for increasing cut points
        b = eta - c_hi
        a_s = where(first, b + 1.0, a)
        b_s = where(last, a_s - 1.0, b)
        # log(s(a) - s(b)) = a + log(1 - exp(b - a)) - softplus(a) - softplus(b)
        middle = a_s + np.log(-np.expm1(b_s - a_s)) - _softplus(a_s) - _softplus(b_s)
        lp = where(first, -_softplus(b), where(last, -_softplus(-a), middle))
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, eta: Any, c: Any, size: Any = None) -> Any:
        e, cuts = raw(eta), raw(c)
        lower = expit(e[..., None] - cuts)  # Pr[k > j] for j = 1..K-1
        theta = -onp.diff(
            onp.concatenate(
                [onp.ones_like(lower[..., :1]), lower, onp.zeros_like(lower[..., :1])], axis=-1
            ),
            axis=-1,
        )
        return _categorical_draw(rng, onp.clip(theta, 0.0, None), size)


def _log_diff_ndtr(a: Any, b: Any) -> Any:
    """log(Phi(a) - Phi(b)) for a > b, in the tail where the difference is best resolved."""
    upper = a + b > 0  # both mostly in the upper tail: Phi(a) - Phi(b) = Phi(-b) - Phi(-a)
    hi = where(upper, -b, a)
    lo = where(upper, -a, b)
    log_hi = log_ndtr(hi)
    return log_hi + np.log(-np.expm1(log_ndtr(lo) - log_hi))


class OrderedProbit(Distribution):
    """ordered_probit(eta, c): k in 1..K, Pr = Phi(eta - c_{k-1}) - Phi(eta - c_k)."""

    name = "ordered_probit"
    params = ("eta", "c")
    param_ndims = (0, 1)
    discrete = True
    support = "int_range"

    def _log_prob(self, k: Any, eta: Any, c: Any) -> Any:
        first, last, c_lo, c_hi, ok = _ordinal_bounds(k, c)
        a = eta - c_lo
        b = eta - c_hi
        a_s = where(first, b + 1.0, a)
        b_s = where(last, a_s - 1.0, b)
        lp = where(first, log_ndtr(-b), where(last, log_ndtr(a), _log_diff_ndtr(a_s, b_s)))
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, eta: Any, c: Any, size: Any = None) -> Any:
        from scipy.special import ndtr

        lower = ndtr(raw(eta)[..., None] - raw(c))
        theta = -onp.diff(
            onp.concatenate(
                [onp.ones_like(lower[..., :1]), lower, onp.zeros_like(lower[..., :1])], axis=-1
            ),
            axis=-1,
        )
        return _categorical_draw(rng, onp.clip(theta, 0.0, None), size)


class DiscreteRange(Distribution):
    """discrete_range(lower, upper): uniform on the integers lower..upper."""

    name = "discrete_range"
    params = ("lower", "upper")
    param_ndims = (0, 0)
    discrete = True
    support = "int_range"

    def _log_prob(self, y: Any, lower: Any, upper: Any) -> Any:
        yr = raw(y)
        ok = is_int(yr) & (yr >= raw(lower)) & (yr <= raw(upper))
        return where_support(ok, -np.log(upper - lower + 1.0) + 0.0 * yr)

    def sample(self, rng: onp.random.Generator, lower: Any, upper: Any, size: Any = None) -> Any:
        return _int_draw(size, (lower, upper), lambda s, lo, hi: rng.integers(lo, hi + 1, size=s))


class Multinomial(Distribution):
    """multinomial(theta): counts y[1..K] over sum(y) trials with probabilities theta."""

    name = "multinomial"
    params = ("theta",)
    value_ndim = 1
    param_ndims = (1,)
    discrete = True
    support = "nonnegative_int"
    has_rng = False  # Stan's multinomial_rng(theta, N) takes the number of trials

    def _log_prob(self, y: Any, theta: Any) -> Any:
        yr = raw(y)
        ok = onp.all(is_int(yr) & (yr >= 0), axis=-1)
        ys = safe(is_int(yr) & (yr >= 0), yr, 0)
        n = onp.sum(ys, axis=-1)
        return where_support(
            ok,
            gammaln(n + 1.0)
            - np.sum(gammaln(ys + 1.0), axis=-1)
            + np.sum(xlogy(ys, theta), axis=-1),
        )


class MultinomialLogit(Multinomial):
    """multinomial_logit(gamma): multinomial with theta = softmax(gamma)."""

    name = "multinomial_logit"
    params = ("gamma",)

    def _log_prob(self, y: Any, gamma: Any) -> Any:
        return super()._log_prob(y, np.exp(gamma - logsumexp(gamma, axis=-1, keepdims=True)))


DISCRETE: tuple[Distribution, ...] = (
    Bernoulli(),
    BernoulliLogit(),
    Binomial(),
    BinomialLogit(),
    BetaBinomial(),
    Poisson(),
    PoissonLog(),
    NegBinomial2(),
    Categorical(),
    CategoricalLogit(),
    NegBinomial(),
    NegBinomial2Log(),
    OrderedLogistic(),
    OrderedProbit(),
    DiscreteRange(),
    Multinomial(),
    MultinomialLogit(),
)
