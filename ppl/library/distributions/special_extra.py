"""Special functions the newer distributions need, as autograd primitives over scipy.special.

``log_ndtr`` (log Phi) keeps skew_normal and ordered_probit finite far in the tails, and
``log_i0`` (log of the modified Bessel function I0) normalises von_mises without overflow
(``log i0e(k) + |k|``). Each VJP is the closed-form derivative; scipy is imported at the first
call, as in ppl.library.special.
"""

from __future__ import annotations

import autograd.numpy as np
from autograd.extend import defvjp, primitive

from ppl.library.special import erf

_LOG_SQRT_2PI = 0.9189385332046727


def _sp():
    import scipy.special

    return scipy.special


@primitive
def log_ndtr(x):
    """log Phi(x), accurate in both tails."""
    return _sp().log_ndtr(x)


# d/dx log Phi(x) = phi(x) / Phi(x) = exp(log phi(x) - log Phi(x))
defvjp(log_ndtr, lambda ans, x: lambda g: g * np.exp(-0.5 * x * x - _LOG_SQRT_2PI - ans))


@primitive
def log_i0(x):
    """log I0(x), finite for every real x (I0 is even)."""
    return np.log(_sp().i0e(x)) + np.abs(x)


@primitive
def _i1_over_i0(x):
    sp = _sp()
    return sp.i1e(x) / sp.i0e(x)


# d/dx log I0(x) = I1(x) / I0(x), a ratio of the scaled functions (the exponentials cancel)
defvjp(log_i0, lambda ans, x: lambda g: g * _i1_over_i0(x))


def _ratio_derivative(x):
    # d/dx (I1/I0) = 1 - r/x - r^2 (from I1' = I0 - I1/x); at 0 the limit is 1/2
    r = _i1_over_i0(x)
    small = np.abs(x) < 1e-8
    xs = np.where(small, 1.0, x)
    return np.where(small, 0.5, 1.0 - r / xs - r * r)


defvjp(_i1_over_i0, lambda ans, x: lambda g: g * _ratio_derivative(x))


@primitive
def owens_t(h, a):
    """Owen's T function T(h, a) (the skew normal's CDF is Phi(z) - 2 T(z, alpha))."""
    return _sp().owens_t(h, a)


_INV_SQRT_2PI = 0.3989422804014327

defvjp(
    owens_t,
    # dT/dh = -phi(h) erf(a h / sqrt 2) / 2; dT/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))
    lambda ans, h, a: (
        lambda g: g * (-0.5 * _INV_SQRT_2PI * np.exp(-0.5 * h * h) * erf(a * h / np.sqrt(2.0)))
    ),
    lambda ans, h, a: (
        lambda g: g * np.exp(-0.5 * h * h * (1.0 + a * a)) / (2.0 * np.pi * (1.0 + a * a))
    ),
)
