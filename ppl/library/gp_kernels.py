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
from autograd.extend import defvjp, primitive
from autograd.tracer import getval

from ppl.library.cholesky_ops import unbroadcast

#: Draws whose n x n matrix has at least this many entries are computed one at a time, each
#: while it is in cache: over a batch of 24 draws of 405 x 405 (31 MB an array) every pass of
#: the arithmetic went out to memory, 1.75 ms a draw against 0.9 ms one at a time.
PER_DRAW_FROM = 16_384


@primitive
def exp_quad(x, scale=1.0):
    """scale * exp(-|x_i - x_j|^2 / 2) for the rows x_i of x (..., n, k): (..., n, n); `scale`
    (alpha^2, one per batch entry, broadcast) multiplied in the same pass over the matrix."""
    x = onp.asarray(x, dtype=float)
    n = x.shape[-2]
    scale = onp.asarray(scale, dtype=float)
    batch = onp.broadcast_shapes(x.shape[:-2], scale.shape)
    xs = onp.broadcast_to(x, batch + x.shape[-2:]).reshape((-1,) + x.shape[-2:])
    scales = onp.broadcast_to(scale, batch).reshape(-1)
    out = onp.empty((len(xs), n, n))
    step = 1 if n * n >= PER_DRAW_FROM else max(len(xs), 1)
    for lo in range(0, len(xs), step):
        xb, d2 = xs[lo : lo + step], out[lo : lo + step]
        half = -0.5 * onp.sum(xb * xb, axis=-1)
        onp.matmul(xb, onp.swapaxes(xb, -1, -2), out=d2)
        d2 += half[..., :, None]
        d2 += half[..., None, :]
        onp.minimum(d2, 0.0, out=d2)  # rounding above 0 on the diagonal
        onp.exp(d2, out=d2)
        d2 *= scales[lo : lo + step, None, None]
    return out.reshape(batch + (n, n))


def _exp_quad_vjp(K, x, scale=1.0):
    def vjp(g):
        W = g * K  # d K / d x is scale * d E / d x: K = scale * E carries the scale
        W = W + anp.swapaxes(W, -1, -2)
        return unbroadcast(anp.matmul(W, x) - anp.sum(W, axis=-1)[..., None] * x, anp.shape(x))

    return vjp


def _exp_quad_vjp_scale(K, x, scale=1.0):
    def vjp(g):
        s = anp.reshape(scale, anp.shape(scale) + (1, 1))
        # d K / d scale = E = K / scale (where a scale underflowed to 0, E afresh)
        E = exp_quad(x) if onp.any(getval(s) == 0) else K / s
        return unbroadcast(anp.sum(g * E, axis=(-1, -2)), anp.shape(scale))

    return vjp


defvjp(exp_quad, _exp_quad_vjp, _exp_quad_vjp_scale)


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
