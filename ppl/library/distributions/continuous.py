"""Univariate continuous distributions, with Stan's parameterisations."""

from __future__ import annotations

from typing import Any

import autograd.numpy as np
import numpy as onp

from ppl.library.special import betaln, gammaln

from .base import LOG_2, LOG_2PI, LOG_PI, Distribution, batch_shape, raw, safe, where_support
from .special_extra import log_i0, log_ndtr


def _draw(size: Any, params: tuple[Any, ...], fn: Any) -> Any:
    """Run ``fn(shape, *plain_params)``; a 0-d result comes back as a Python float."""
    plain = [raw(p) for p in params]
    shape = batch_shape(size, *(p.shape for p in plain))
    out = fn(shape, *plain)
    return out.item() if onp.ndim(out) == 0 else out


class Normal(Distribution):
    """normal(mu, sigma): location, scale."""

    name = "normal"
    params = ("mu", "sigma")
    param_ndims = (0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, sigma: Any) -> Any:
        z = (y - mu) / sigma
        return -0.5 * z * z - np.log(sigma) - 0.5 * LOG_2PI

    def sample(self, rng: onp.random.Generator, mu: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (mu, sigma), lambda s, m, sg: rng.normal(m, sg, size=s))


class StudentT(Distribution):
    """student_t(nu, mu, sigma): degrees of freedom, location, scale."""

    name = "student_t"
    params = ("nu", "mu", "sigma")
    param_ndims = (0, 0, 0)
    support = "real"

    def _log_prob(self, y: Any, nu: Any, mu: Any, sigma: Any) -> Any:
        z = (y - mu) / sigma
        return (
            gammaln(0.5 * (nu + 1.0))
            - gammaln(0.5 * nu)
            - 0.5 * (np.log(nu) + LOG_PI)
            - np.log(sigma)
            - 0.5 * (nu + 1.0) * np.log1p(z * z / nu)
        )

    def sample(
        self, rng: onp.random.Generator, nu: Any, mu: Any, sigma: Any, size: Any = None
    ) -> Any:
        return _draw(size, (nu, mu, sigma), lambda s, n, m, sg: m + sg * rng.standard_t(n, size=s))


class Cauchy(Distribution):
    """cauchy(mu, sigma): location, scale."""

    name = "cauchy"
    params = ("mu", "sigma")
    param_ndims = (0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, sigma: Any) -> Any:
        z = (y - mu) / sigma
        return -LOG_PI - np.log(sigma) - np.log1p(z * z)

    def sample(self, rng: onp.random.Generator, mu: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (mu, sigma), lambda s, m, sg: m + sg * rng.standard_cauchy(size=s))


class DoubleExponential(Distribution):
    """double_exponential(mu, sigma): Laplace with location and scale."""

    name = "double_exponential"
    params = ("mu", "sigma")
    param_ndims = (0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, sigma: Any) -> Any:
        return -LOG_2 - np.log(sigma) - np.abs(y - mu) / sigma

    def sample(self, rng: onp.random.Generator, mu: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (mu, sigma), lambda s, m, sg: rng.laplace(m, sg, size=s))


class Logistic(Distribution):
    """logistic(mu, sigma): location, scale."""

    name = "logistic"
    params = ("mu", "sigma")
    param_ndims = (0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, sigma: Any) -> Any:
        z = (y - mu) / sigma
        # log f = -z - log sigma - 2 log(1 + e^-z); logaddexp keeps both tails finite.
        return -z - np.log(sigma) - 2.0 * np.logaddexp(0.0, -z)

    def sample(self, rng: onp.random.Generator, mu: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (mu, sigma), lambda s, m, sg: rng.logistic(m, sg, size=s))


class LogNormal(Distribution):
    """lognormal(mu, sigma): log y ~ normal(mu, sigma)."""

    name = "lognormal"
    params = ("mu", "sigma")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, mu: Any, sigma: Any) -> Any:
        ok = y > 0
        log_y = np.log(safe(ok, y, 1.0))
        z = (log_y - mu) / sigma
        lp = -0.5 * z * z - np.log(sigma) - 0.5 * LOG_2PI - log_y
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, mu: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (mu, sigma), lambda s, m, sg: rng.lognormal(m, sg, size=s))


class Exponential(Distribution):
    """exponential(beta): beta is the rate."""

    name = "exponential"
    params = ("beta",)
    param_ndims = (0,)
    support = "nonnegative"

    def _log_prob(self, y: Any, beta: Any) -> Any:
        return where_support(y >= 0, np.log(beta) - beta * y)

    def sample(self, rng: onp.random.Generator, beta: Any, size: Any = None) -> Any:
        return _draw(size, (beta,), lambda s, b: rng.exponential(1.0 / b, size=s))


class Gamma(Distribution):
    """gamma(alpha, beta): shape and rate."""

    name = "gamma"
    params = ("alpha", "beta")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, alpha: Any, beta: Any) -> Any:
        ok = y > 0
        ys = safe(ok, y, 1.0)
        lp = alpha * np.log(beta) - gammaln(alpha) + (alpha - 1.0) * np.log(ys) - beta * ys
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, beta: Any, size: Any = None) -> Any:
        return _draw(size, (alpha, beta), lambda s, a, b: rng.gamma(a, 1.0 / b, size=s))


class InvGamma(Distribution):
    """inv_gamma(alpha, beta): shape and scale (1/y ~ gamma(alpha, rate=beta))."""

    name = "inv_gamma"
    params = ("alpha", "beta")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, alpha: Any, beta: Any) -> Any:
        ok = y > 0
        ys = safe(ok, y, 1.0)
        lp = alpha * np.log(beta) - gammaln(alpha) - (alpha + 1.0) * np.log(ys) - beta / ys
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, beta: Any, size: Any = None) -> Any:
        return _draw(size, (alpha, beta), lambda s, a, b: b / rng.gamma(a, 1.0, size=s))


class Weibull(Distribution):
    """weibull(alpha, sigma): shape and scale."""

    name = "weibull"
    params = ("alpha", "sigma")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, alpha: Any, sigma: Any) -> Any:
        ok = y > 0
        log_z = np.log(safe(ok, y, 1.0)) - np.log(sigma)
        lp = np.log(alpha) - np.log(sigma) + (alpha - 1.0) * log_z - np.exp(alpha * log_z)
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (alpha, sigma), lambda s, a, sg: sg * rng.weibull(a, size=s))


class Beta(Distribution):
    """beta(alpha, beta): two positive prior counts."""

    name = "beta"
    params = ("alpha", "beta")
    param_ndims = (0, 0)
    support = "unit"

    def _log_prob(self, y: Any, alpha: Any, beta: Any) -> Any:
        ok = (y > 0) & (y < 1)
        ys = safe(ok, y, 0.5)
        lp = (alpha - 1.0) * np.log(ys) + (beta - 1.0) * np.log1p(-ys) - betaln(alpha, beta)
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, beta: Any, size: Any = None) -> Any:
        return _draw(size, (alpha, beta), lambda s, a, b: rng.beta(a, b, size=s))


class Uniform(Distribution):
    """uniform(alpha, beta): flat on [alpha, beta]."""

    name = "uniform"
    params = ("alpha", "beta")
    param_ndims = (0, 0)
    support = "interval"

    def _log_prob(self, y: Any, alpha: Any, beta: Any) -> Any:
        ok = (y >= alpha) & (y <= beta)
        # 0 * y keeps y (and its gradient, zero) in the graph and gives the batch shape.
        return where_support(ok, -np.log(beta - alpha) + 0.0 * y)

    def sample(self, rng: onp.random.Generator, alpha: Any, beta: Any, size: Any = None) -> Any:
        return _draw(size, (alpha, beta), lambda s, a, b: rng.uniform(a, b, size=s))


class ChiSquare(Distribution):
    """chi_square(nu): degrees of freedom."""

    name = "chi_square"
    params = ("nu",)
    param_ndims = (0,)
    support = "positive"

    def _log_prob(self, y: Any, nu: Any) -> Any:
        ok = y > 0
        ys = safe(ok, y, 1.0)
        h = 0.5 * nu
        lp = -h * LOG_2 - gammaln(h) + (h - 1.0) * np.log(ys) - 0.5 * ys
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, nu: Any, size: Any = None) -> Any:
        return _draw(size, (nu,), lambda s, n: rng.chisquare(n, size=s))


class InvChiSquare(Distribution):
    """inv_chi_square(nu): 1/y ~ chi_square(nu)."""

    name = "inv_chi_square"
    params = ("nu",)
    param_ndims = (0,)
    support = "positive"

    def _log_prob(self, y: Any, nu: Any) -> Any:
        ok = y > 0
        ys = safe(ok, y, 1.0)
        h = 0.5 * nu
        lp = -h * LOG_2 - gammaln(h) - (h + 1.0) * np.log(ys) - 0.5 / ys
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, nu: Any, size: Any = None) -> Any:
        return _draw(size, (nu,), lambda s, n: 1.0 / rng.chisquare(n, size=s))


class ScaledInvChiSquare(Distribution):
    """scaled_inv_chi_square(nu, s): inv_gamma(nu/2, nu s^2 / 2)."""

    name = "scaled_inv_chi_square"
    params = ("nu", "s")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, nu: Any, s: Any) -> Any:
        ok = y > 0
        ys = safe(ok, y, 1.0)
        h = 0.5 * nu
        lp = h * np.log(h) - gammaln(h) + nu * np.log(s) - (h + 1.0) * np.log(ys) - h * s * s / ys
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, nu: Any, s: Any, size: Any = None) -> Any:
        return _draw(size, (nu, s), lambda sh, n, sc: n * sc * sc / rng.chisquare(n, size=sh))


class Pareto(Distribution):
    """pareto(y_min, alpha): scale (lower bound) and shape."""

    name = "pareto"
    params = ("y_min", "alpha")
    param_ndims = (0, 0)
    support = "positive"  # really [y_min, inf); y_min > 0 so this is the tightest fixed set

    def _log_prob(self, y: Any, y_min: Any, alpha: Any) -> Any:
        ok = y >= y_min
        ys = safe(ok, y, 1.0)
        lp = np.log(alpha) + alpha * np.log(y_min) - (alpha + 1.0) * np.log(ys)
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, y_min: Any, alpha: Any, size: Any = None) -> Any:
        return _draw(size, (y_min, alpha), lambda s, m, a: m * (1.0 + rng.pareto(a, size=s)))


class StdNormal(Distribution):
    """std_normal(): normal(0, 1), no parameters."""

    name = "std_normal"
    params = ()
    param_ndims = ()
    support = "real"

    def _log_prob(self, y: Any) -> Any:
        return -0.5 * y * y - 0.5 * LOG_2PI

    def sample(self, rng: onp.random.Generator, size: Any = None) -> Any:
        return _draw(size, (), lambda s: rng.standard_normal(size=s))


class SkewNormal(Distribution):
    """skew_normal(xi, omega, alpha): location, scale, shape (Azzalini's 2 phi(z) Phi(alpha z))."""

    name = "skew_normal"
    params = ("xi", "omega", "alpha")
    param_ndims = (0, 0, 0)
    support = "real"

    def _log_prob(self, y: Any, xi: Any, omega: Any, alpha: Any) -> Any:
        z = (y - xi) / omega
        return LOG_2 - np.log(omega) - 0.5 * LOG_2PI - 0.5 * z * z + log_ndtr(alpha * z)

    def sample(
        self, rng: onp.random.Generator, xi: Any, omega: Any, alpha: Any, size: Any = None
    ) -> Any:
        def draw(s, x, o, a):
            delta = a / onp.sqrt(1.0 + a * a)
            u0, v = rng.standard_normal(size=s), rng.standard_normal(size=s)
            u1 = delta * u0 + onp.sqrt(1.0 - delta * delta) * v
            return x + o * onp.where(u0 >= 0, u1, -u1)

        return _draw(size, (xi, omega, alpha), draw)


class VonMises(Distribution):
    """von_mises(mu, kappa): location, concentration; exp(kappa cos(y - mu)) / (2 pi I0(kappa))."""

    name = "von_mises"
    params = ("mu", "kappa")
    param_ndims = (0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, kappa: Any) -> Any:
        return kappa * np.cos(y - mu) - LOG_2PI - log_i0(kappa)

    def sample(self, rng: onp.random.Generator, mu: Any, kappa: Any, size: Any = None) -> Any:
        return _draw(size, (mu, kappa), lambda s, m, k: rng.vonmises(m, k, size=s))


class Gumbel(Distribution):
    """gumbel(mu, beta): location, scale; exp(-z - exp(-z)) / beta."""

    name = "gumbel"
    params = ("mu", "beta")
    param_ndims = (0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, beta: Any) -> Any:
        z = (y - mu) / beta
        return -np.log(beta) - z - np.exp(-z)

    def sample(self, rng: onp.random.Generator, mu: Any, beta: Any, size: Any = None) -> Any:
        return _draw(size, (mu, beta), lambda s, m, b: rng.gumbel(m, b, size=s))


class ExpModNormal(Distribution):
    """exp_mod_normal(mu, sigma, lambda): normal(mu, sigma) plus an exponential of rate lambda."""

    name = "exp_mod_normal"
    params = ("mu", "sigma", "lambda")
    param_ndims = (0, 0, 0)
    support = "real"

    def _log_prob(self, y: Any, mu: Any, sigma: Any, lam: Any) -> Any:
        # lambda/2 exp(lambda/2 (2 mu + lambda sigma^2 - 2y)) erfc(...) with erfc = 2 Phi(-.)
        return (
            np.log(lam)
            + lam * (mu + 0.5 * lam * sigma * sigma - y)
            + log_ndtr((y - mu) / sigma - lam * sigma)
        )

    def sample(
        self, rng: onp.random.Generator, mu: Any, sigma: Any, lam: Any, size: Any = None
    ) -> Any:
        return _draw(
            size,
            (mu, sigma, lam),
            lambda s, m, sg, lm: rng.normal(m, sg, size=s) + rng.exponential(1.0 / lm, size=s),
        )


class Frechet(Distribution):
    """frechet(alpha, sigma): shape, scale; (a/s) (y/s)^(-1-a) exp(-(y/s)^-a)."""

    name = "frechet"
    params = ("alpha", "sigma")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, alpha: Any, sigma: Any) -> Any:
        ok = y > 0
        log_z = np.log(safe(ok, y, 1.0)) - np.log(sigma)
        lp = np.log(alpha) - np.log(sigma) - (1.0 + alpha) * log_z - np.exp(-alpha * log_z)
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (alpha, sigma), lambda s, a, sg: sg / rng.weibull(a, size=s))


class Rayleigh(Distribution):
    """rayleigh(sigma): scale; y / sigma^2 exp(-y^2 / (2 sigma^2))."""

    name = "rayleigh"
    params = ("sigma",)
    param_ndims = (0,)
    support = "nonnegative"

    def _log_prob(self, y: Any, sigma: Any) -> Any:
        ok = y > 0
        ys = safe(ok, y, 1.0)
        lp = np.log(ys) - 2.0 * np.log(sigma) - 0.5 * ys * ys / (sigma * sigma)
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, sigma: Any, size: Any = None) -> Any:
        return _draw(size, (sigma,), lambda s, sg: rng.rayleigh(sg, size=s))


class ParetoType2(Distribution):
    """pareto_type_2(mu, lambda, alpha): location, scale, shape (Lomax shifted by mu)."""

    name = "pareto_type_2"
    params = ("mu", "lambda", "alpha")
    param_ndims = (0, 0, 0)
    support = "real"  # really [mu, inf)

    def _log_prob(self, y: Any, mu: Any, lam: Any, alpha: Any) -> Any:
        ok = y >= mu
        z = safe(ok, (y - mu) / lam, 0.0)
        lp = np.log(alpha) - np.log(lam) - (alpha + 1.0) * np.log1p(z)
        return where_support(ok, lp)

    def sample(
        self, rng: onp.random.Generator, mu: Any, lam: Any, alpha: Any, size: Any = None
    ) -> Any:
        return _draw(size, (mu, lam, alpha), lambda s, m, lm, a: m + lm * rng.pareto(a, size=s))


class BetaProportion(Distribution):
    """beta_proportion(mu, kappa): beta(mu kappa, (1 - mu) kappa), mean mu and precision kappa."""

    name = "beta_proportion"
    params = ("mu", "kappa")
    param_ndims = (0, 0)
    support = "unit"

    def _log_prob(self, y: Any, mu: Any, kappa: Any) -> Any:
        return Beta()._log_prob(y, mu * kappa, (1.0 - mu) * kappa)

    def sample(self, rng: onp.random.Generator, mu: Any, kappa: Any, size: Any = None) -> Any:
        return _draw(size, (mu, kappa), lambda s, m, k: rng.beta(m * k, (1 - m) * k, size=s))


class LogLogistic(Distribution):
    """loglogistic(alpha, beta): scale, shape; (b/a)(y/a)^(b-1) / (1 + (y/a)^b)^2."""

    name = "loglogistic"
    params = ("alpha", "beta")
    param_ndims = (0, 0)
    support = "positive"

    def _log_prob(self, y: Any, alpha: Any, beta: Any) -> Any:
        ok = y > 0
        log_z = np.log(safe(ok, y, 1.0)) - np.log(alpha)
        lp = (
            np.log(beta)
            - np.log(alpha)
            + (beta - 1.0) * log_z
            - 2.0 * np.logaddexp(0.0, beta * log_z)
        )
        return where_support(ok, lp)

    def sample(self, rng: onp.random.Generator, alpha: Any, beta: Any, size: Any = None) -> Any:
        def draw(s, a, b):
            u = rng.uniform(size=s)
            return a * (u / (1.0 - u)) ** (1.0 / b)

        return _draw(size, (alpha, beta), draw)


CONTINUOUS: tuple[Distribution, ...] = (
    Normal(),
    StudentT(),
    Cauchy(),
    DoubleExponential(),
    Logistic(),
    LogNormal(),
    Exponential(),
    Gamma(),
    InvGamma(),
    Weibull(),
    Beta(),
    Uniform(),
    ChiSquare(),
    InvChiSquare(),
    ScaledInvChiSquare(),
    Pareto(),
    StdNormal(),
    SkewNormal(),
    VonMises(),
    Gumbel(),
    ExpModNormal(),
    Frechet(),
    Rayleigh(),
    ParetoType2(),
    BetaProportion(),
    LogLogistic(),
)
