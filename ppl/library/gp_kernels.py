"""The squared-exponential kernel's core, exp(-|x_i - x_j|^2 / 2) over the rows of a matrix
per batch entry, as one autograd primitive.

Written in autograd's elementwise operations, its reverse pass went through every step of
|a|^2 + |b|^2 - 2 a.b, the clamp at 0, the exp and their broadcasts, a dozen passes over each
n x n matrix (on the GP regression example, 405 x 405 per draw: a third of a gradient's time).
The rule here is one: with W = G * E (G the incoming gradient), the gradient of row i is
-(sum_j (W + W^T)_ij) x_i + ((W + W^T) x)_i, an n x n product with the n x k rows. It is written
in autograd's operations, so it can be differentiated again (the mode's Hessian).
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as onp
from autograd.extend import defvjp, defvjp_argnums, primitive
from autograd.tracer import getval

from ppl.library.cholesky_ops import is_symmetric, unbroadcast

#: Draws whose n x n matrix has at least this many entries are computed one at a time, each
#: while it is in cache: over a batch of 24 draws of 405 x 405 (31 MB an array) every pass of
#: the arithmetic went out to memory, 1.75 ms a draw against 0.9 ms one at a time.
PER_DRAW_FROM = 16_384


@primitive
def exp_quad(x, scale=1.0):
    """scale * exp(-|x_i - x_j|^2 / 2) for the rows x_i of x (..., n, k): (..., n, n); `scale`
    (alpha^2, one per batch entry, broadcast) multiplied in the same pass over the matrix."""
    x = onp.asarray(x, dtype=float)
    n, k = x.shape[-2:]
    scale = onp.asarray(scale, dtype=float)
    batch = onp.broadcast_shapes(x.shape[:-2], scale.shape)
    xs = onp.broadcast_to(x, batch + x.shape[-2:]).reshape((-1, n, k))
    scales = onp.broadcast_to(scale, batch).reshape(-1)
    out = onp.empty((len(xs), n, n))
    step = 1 if n * n >= PER_DRAW_FROM else max(len(xs), 1)
    for lo in range(0, len(xs), step):
        _exponent(xs[lo : lo + step], scales[lo : lo + step], out[lo : lo + step])
    return out.reshape(batch + (n, n))


def _exponent(xb: onp.ndarray, scales: onp.ndarray, out: onp.ndarray) -> None:
    """out = scales * exp(x_i . x_j - |x_i|^2 / 2 - |x_j|^2 / 2) for a batch of x (b, n, k):
    the halves (and log scale, where every scale is positive and finite) are two more columns
    of one matrix product, [x, h, 1] [x, 1, h]^T, so the n x n matrix is passed over three
    times (product, clamp, exp) where adding each half and multiplying took three more."""
    b, n, k = xb.shape
    half = -0.5 * onp.sum(xb * xb, axis=-1)
    with onp.errstate(divide="ignore", invalid="ignore"):
        log_scales = onp.log(scales)  # a scale of 0 (underflow), < 0 or nan: multiplied in
    fold = bool(onp.all(onp.isfinite(log_scales)))
    if fold:
        half += 0.5 * log_scales[:, None]
    left, right = onp.empty((b, n, k + 2)), onp.empty((b, n, k + 2))
    left[..., :k], left[..., k], left[..., k + 1] = xb, half, 1.0
    right[..., :k], right[..., k], right[..., k + 1] = xb, 1.0, half
    onp.matmul(left, onp.swapaxes(right, -1, -2), out=out)
    # rounding above the diagonal's value (0, or log scale)
    onp.minimum(out, log_scales[:, None, None] if fold else 0.0, out=out)
    onp.exp(out, out=out)
    if not fold:
        out *= scales[:, None, None]


def _exp_quad_vjps(argnums, K, args, kwargs):
    """x's and the scale's rules from one W = G * K (G the incoming gradient): the gradient of
    row i is -(sum_j (W + W^T)_ij) x_i + ((W + W^T) x)_i, and the scale's sum(W) / scale
    (d K / d scale = E = K / scale). A G known symmetric (cholesky's rule hands on a
    SymmetricCotangent) makes W + W^T = 2 W, without the transposed pass."""
    x = args[0]
    scale = args[1] if len(args) > 1 else kwargs.get("scale", 1.0)

    def vjp(g):
        W = g * K
        if is_symmetric(g):
            rows = 2.0 * anp.sum(W, axis=-1)
            W2x = 2.0 * anp.matmul(W, x)
        else:
            W2 = W + anp.swapaxes(W, -1, -2)
            rows = anp.sum(W2, axis=-1)
            W2x = anp.matmul(W2, x)
        out = []
        for argnum in argnums:
            if argnum == 0:
                out.append(unbroadcast(W2x - rows[..., None] * x, anp.shape(x)))
                continue
            if onp.any(getval(scale) == 0):  # E afresh where a scale underflowed to 0
                total = anp.sum(g * exp_quad(x), axis=(-1, -2))
            else:
                total = 0.5 * anp.sum(rows, axis=-1) / scale
            out.append(unbroadcast(total, anp.shape(scale)))
        return tuple(out)

    return vjp


defvjp_argnums(exp_quad, _exp_quad_vjps)


@primitive
def add_to_diagonal(m, d):
    """m + diag(d) on the last two axes, d (..., n) or (..., 1) (batch axes broadcast): one copy
    of m with its diagonal added to, where m + d[..., None] * eye(n) made and read two more
    n x n arrays per batch entry (a fifth of the GP regression example's log density)."""
    m, d = onp.asarray(m), onp.asarray(d)
    n = m.shape[-1]
    shape = onp.broadcast_shapes(m.shape, d.shape[:-1] + (n, n))
    out = onp.array(onp.broadcast_to(m, shape), dtype=onp.result_type(m, d))
    idx = onp.arange(n)
    out[..., idx, idx] += d
    return out


defvjp(
    add_to_diagonal,
    lambda ans, m, d: lambda g: unbroadcast(g, anp.shape(m)),
    lambda ans, m, d: lambda g: unbroadcast(anp.diagonal(g, axis1=-1, axis2=-2), anp.shape(d)),
)
