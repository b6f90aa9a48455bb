"""More of the Stan library: special functions (Bessel, Lambert W, Owen's T, factorials),
array utilities (dims, reverse, append_array, sort_indices, rank, distances) and the Gaussian
process kernels beyond the squared exponential.

Special functions are autograd primitives over scipy.special whose VJPs are the closed-form
derivatives in their real argument; integer orders (Bessel) carry no gradient.
"""

from __future__ import annotations

import autograd.numpy as np
import numpy as onp
from autograd.extend import defvjp, primitive

from ppl.language.types import INT, MATRIX, REAL, SType, align, align_batch, fast_ndim, fast_shape
from ppl.library import special as sps
from ppl.library.distributions import get_distribution
from ppl.library.distributions.cdfs import CDFS
from ppl.library.distributions.special_extra import owens_t
from ppl.library.function_registry import (
    SignatureError,
    elementwise_rule,
    fixed,
    int_value,
    register,
    type_axes,
)

_LOG_PI = float(onp.log(onp.pi))


def _sp():
    import scipy.special

    return scipy.special


def _elementwise(fn):
    def impl(args, types):
        return fn(*align(list(args), [t.ndim for t in types]))

    return impl


# ---- special functions -----------------------------------------------------------------------


@primitive
def lambert_w0(x):
    return _sp().lambertw(x, 0).real


@primitive
def lambert_wm1(x):
    return _sp().lambertw(x, -1).real


def _lambert_vjp(ans, x):
    # W'(x) = W / (x (1 + W)), and 1 at x = 0 (W0 only)
    small = np.abs(x) < 1e-300
    xs = np.where(small, 1.0, x)
    return lambda g: g * np.where(small, 1.0, ans / (xs * (1.0 + ans)))


defvjp(lambert_w0, _lambert_vjp)
defvjp(lambert_wm1, _lambert_vjp)


def _bessel(name: str, below: float, above: float):
    """Bessel function `name`(v, z); d/dz = below * f(v - 1, z) + above * f(v + 1, z)."""
    fn = primitive(lambda v, z: getattr(_sp(), name)(v, z))
    defvjp(fn, None, lambda ans, v, z: lambda g: g * (below * fn(v - 1, z) + above * fn(v + 1, z)))
    return fn


bessel_first_kind = _bessel("jv", 0.5, -0.5)
bessel_second_kind = _bessel("yv", 0.5, -0.5)
modified_bessel_first_kind = _bessel("iv", 0.5, 0.5)
modified_bessel_second_kind = _bessel("kv", -0.5, -0.5)


@primitive
def log_modified_bessel_first_kind(v, z):
    return np.log(_sp().ive(v, z)) + np.abs(z)


# d/dz log I_v(z) = I_{v+1}(z) / I_v(z) + v / z
defvjp(
    log_modified_bessel_first_kind,
    None,
    lambda ans, v, z: lambda g: g * (_sp().ive(v + 1, z) / _sp().ive(v, z) + v / z),
)


def _lmgamma(k, x):
    k = int_value(k)
    total = 0.25 * k * (k - 1) * _LOG_PI
    for j in range(1, k + 1):
        total = total + sps.gammaln(x + 0.5 * (1 - j))
    return total


_REAL_BINARY = {
    "falling_factorial": lambda x, n: np.exp(sps.gammaln(x + 1) - sps.gammaln(x - n + 1)),
    "log_falling_factorial": lambda x, n: sps.gammaln(x + 1) - sps.gammaln(x - n + 1),
    "rising_factorial": lambda x, n: np.exp(sps.gammaln(x + n) - sps.gammaln(x)),
    "log_rising_factorial": lambda x, n: sps.gammaln(x + n) - sps.gammaln(x),
    "binary_log_loss": lambda y, p: -np.where(y == 1, np.log(p), np.log1p(-p)),
    "owens_t": owens_t,
    "bessel_first_kind": bessel_first_kind,
    "bessel_second_kind": bessel_second_kind,
    "modified_bessel_first_kind": modified_bessel_first_kind,
    "modified_bessel_second_kind": modified_bessel_second_kind,
    "log_modified_bessel_first_kind": log_modified_bessel_first_kind,
    "ldexp": lambda x, n: x * 2.0**n,
}
for _name, _fn in _REAL_BINARY.items():
    register(_name, elementwise_rule, _elementwise(_fn), nargs=(2,))

for _name, _fn in {"lambert_w0": lambert_w0, "lambert_wm1": lambert_wm1}.items():
    register(
        _name,
        lambda types: types[0].with_base("real"),
        (lambda f: lambda args, types: f(args[0]))(_fn),
        nargs=(1,),
    )
register(
    "inv_erfc",
    lambda types: types[0].with_base("real"),
    lambda args, types: sps.erfcinv(args[0]),
    nargs=(1,),
)
register(
    "lmgamma",
    lambda types: types[1].with_base("real"),
    lambda args, types: _lmgamma(*args),
    size_args=(0,),
    nargs=(2,),
)


def _choose(args, types):
    n, k = align(list(args), [t.ndim for t in types])
    n, k = onp.asarray(n), onp.asarray(k)
    out = onp.rint(_sp().comb(n, k)).astype(int)
    return out if out.ndim else int(out)


register("choose", lambda types: elementwise_rule(types).with_base("int"), _choose, nargs=(2,))


# ---- arrays ----------------------------------------------------------------------------------


def _dims(args, types):
    shape = fast_shape(args[0])
    nd = types[0].ndim
    return onp.asarray(shape[len(shape) - nd :] if nd else (), dtype=int)


def _first_type_axis(t: SType) -> int:
    return -t.ndim


def _reverse(args, types):
    t = types[0]
    if t.is_scalar:
        return args[0]
    return np.flip(args[0], axis=_first_type_axis(t))


def _append_array(args, types):
    ta, tb = types
    if (ta.kind, ta.adims) != (tb.kind, tb.adims):
        raise SignatureError(f"append_array needs two arrays of one type, got {ta} and {tb}")
    a, b = align_batch(list(args), [ta.ndim, tb.ndim])
    nd = ta.ndim
    batch = onp.broadcast_shapes(
        fast_shape(a)[: fast_ndim(a) - nd], fast_shape(b)[: fast_ndim(b) - nd]
    )
    a = a + onp.zeros(batch + (1,) * nd)
    b = b + onp.zeros(batch + (1,) * nd)
    return np.concatenate([a, b], axis=-nd)


def _append_array_rule(types):
    ta, tb = types
    if not ta.adims or (ta.kind, ta.adims) != (tb.kind, tb.adims):
        raise SignatureError(f"append_array needs two arrays of one type, got {ta} and {tb}")
    return ta if ta.base == tb.base else ta.with_base("real")


def _sort_indices(descending: bool):
    def impl(args, types):
        x = onp.asarray(getattr(args[0], "_value", args[0]), dtype=float)
        order = onp.argsort(-x if descending else x, axis=-1, kind="stable")
        return order + 1

    return impl


def _rank(args, types):
    x = onp.asarray(getattr(args[0], "_value", args[0]), dtype=float)
    s = int_value(args[1])
    n = x.shape[-1]
    if not 1 <= s <= n:
        raise SignatureError(f"rank: index {s} out of range 1..{n}")
    out = onp.sum(x < x[..., s - 1 : s], axis=-1)
    return out if out.ndim else int(out)


def _squared_distance(args, types):
    a, b = align(list(args), [t.ndim for t in types])
    d = a - b
    axes = type_axes(types[0]) if types[0].ndim else type_axes(types[1])
    return np.sum(d * d, axis=axes) if axes else d * d


def _distance(args, types):
    d2 = _squared_distance(args, types)
    positive = d2 > 0
    return np.where(positive, np.sqrt(np.where(positive, d2, 1.0)), 0.0)


def _norm1(args, types):
    t = types[0]
    return np.sum(np.abs(args[0]), axis=type_axes(t)) if t.ndim else np.abs(args[0])


def _to_array_2d(args, types):
    return args[0]


register("dims", fixed(SType("int", "scalar", 1)), _dims, nargs=(1,))
register("reverse", lambda types: types[0], _reverse, nargs=(1,))
register("append_array", _append_array_rule, _append_array, nargs=(2,))
register("sort_indices_asc", fixed(SType("int", "scalar", 1)), _sort_indices(False), nargs=(1,))
register("sort_indices_desc", fixed(SType("int", "scalar", 1)), _sort_indices(True), nargs=(1,))
register("rank", fixed(INT), _rank, size_args=(1,), nargs=(2,))
register("squared_distance", fixed(REAL), _squared_distance, nargs=(2,))
register("distance", fixed(REAL), _distance, nargs=(2,))
register("norm1", fixed(REAL), _norm1, nargs=(1,))
register("to_array_2d", fixed(SType("real", "scalar", 2)), _to_array_2d, nargs=(1,))


# ---- Gaussian process kernels ----------------------------------------------------------------


def _points(x, t: SType):
    """GP inputs as (..., N, D) whatever their declared type (array of reals or of vectors)."""
    return x[..., None] if t.kind == "scalar" else x


def _sq_dists(x1, t1: SType, x2, t2: SType):
    """Squared distances from explicit differences (N x M x D memory): exact zeros on the
    diagonal, which the non-smooth kernels (exponential, Matern) need."""
    a, b = align_batch([_points(x1, t1), _points(x2, t2)], [2, 2])
    diff = a[..., :, None, :] - b[..., None, :, :]
    return np.sum(diff * diff, axis=-1)


def _dists(d2):
    positive = d2 > 0
    return np.where(positive, np.sqrt(np.where(positive, d2, 1.0)), 0.0)


def _scalar_params(d2, *params):
    """Kernel parameters aligned with the (..., N, M) distance matrix."""
    arrs = align_batch([d2, *params], [2] + [0] * len(params))
    return arrs[0], [np.reshape(p, fast_shape(p) + (1, 1)) for p in arrs[1:]]


def _kernel(n_params: int, formula):
    def impl(args, types):
        if len(args) == n_params + 2:  # cross-covariance: k(x1, x2, ...)
            x1, x2, params = args[0], args[1], args[2:]
            t1, t2 = types[0], types[1]
        else:
            x1 = x2 = args[0]
            t1 = t2 = types[0]
            params = args[1:]
        d2, ps = _scalar_params(_sq_dists(x1, t1, x2, t2), *params)
        return formula(d2, *ps)

    return impl


def _kernel_rule(n_params: int):
    def rule(types):
        points = types[:2] if len(types) == n_params + 2 else types[:1]
        for t in points:
            if t.adims != 1 or t.kind not in ("scalar", "vector"):
                raise SignatureError("GP inputs are an array of reals or an array of vectors")
        for t in types[len(points) :]:
            if not t.is_scalar:
                raise SignatureError("GP kernel parameters are scalars")
        return MATRIX

    return rule


_SQRT3, _SQRT5 = float(onp.sqrt(3.0)), float(onp.sqrt(5.0))
_KERNELS = {
    "gp_exponential_cov": (2, lambda d2, a, r: a * a * np.exp(-_dists(d2) / r)),
    "gp_matern32_cov": (
        2,
        lambda d2, a, r: a * a * (1.0 + _SQRT3 * _dists(d2) / r) * np.exp(-_SQRT3 * _dists(d2) / r),
    ),
    "gp_matern52_cov": (
        2,
        lambda d2, a, r: (
            a
            * a
            * (1.0 + _SQRT5 * _dists(d2) / r + 5.0 * d2 / (3.0 * r * r))
            * np.exp(-_SQRT5 * _dists(d2) / r)
        ),
    ),
    "gp_periodic_cov": (
        3,
        lambda d2, a, r, p: a * a * np.exp(-2.0 * np.sin(np.pi * _dists(d2) / p) ** 2 / (r * r)),
    ),
}
for _name, (_n, _formula) in _KERNELS.items():
    register(_name, _kernel_rule(_n), _kernel(_n, _formula), nargs=(_n + 1, _n + 2))


def _dot_prod_cov(args, types):
    if len(args) == 3:
        x1, x2, sigma = args
        t1, t2 = types[0], types[1]
    else:
        x1, sigma = args
        x2, t1, t2 = x1, types[0], types[0]
    a, b = align_batch([_points(x1, t1), _points(x2, t2)], [2, 2])
    dot = np.matmul(a, np.swapaxes(b, -1, -2))
    dot, (s,) = _scalar_params(dot, sigma)
    return s * s + dot


register("gp_dot_prod_cov", _kernel_rule(1), _dot_prod_cov, nargs=(2, 3))


# ---- cumulative distribution functions ---------------------------------------------------------


def _cdf_function(fn, exponentiate: bool):
    """`dist_lcdf(y | ...)`: the log CDF summed over the elements (Stan's vectorised form);
    `dist_cdf` is its exponential, the product of the CDFs."""

    def impl(args, types):
        ndims = [t.ndim for t in types]
        values = align(list(args), ndims)
        lp = fn(*values)
        k = max(ndims)
        total = np.sum(lp, axis=tuple(range(-k, 0))) if k else lp
        return np.exp(total) if exponentiate else total

    return impl


def _cdf_rule(n_params: int):
    def rule(types):
        for t in types:
            if t.kind == "matrix" and t.adims:
                raise SignatureError("arguments are scalars, vectors or arrays")
        return REAL

    return rule


for _dist_name, (_lcdf, _lccdf) in CDFS.items():
    _n = len(get_distribution(_dist_name).params)
    for _suffix, _fn, _exp in (
        ("_lcdf", _lcdf, False),
        ("_lccdf", _lccdf, False),
        ("_cdf", _lcdf, True),
    ):
        register(_dist_name + _suffix, _cdf_rule(_n), _cdf_function(_fn, _exp), nargs=(_n + 1,))
