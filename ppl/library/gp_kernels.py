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

from ppl.library.cholesky_ops import unbroadcast


@primitive
def exp_quad(x):
    """exp(-|x_i - x_j|^2 / 2) for the rows x_i of x (..., n, k): (..., n, n)."""
    x = onp.asarray(x, dtype=float)
    sq = onp.sum(x * x, axis=-1)
    d2 = onp.matmul(x, onp.swapaxes(x, -1, -2))
    d2 *= -2.0
    d2 += sq[..., :, None]
    d2 += sq[..., None, :]
    onp.maximum(d2, 0.0, out=d2)  # rounding below 0 on the diagonal
    d2 *= -0.5
    return onp.exp(d2, out=d2)


def _exp_quad_vjp(E, x):
    def vjp(g):
        W = g * E
        W = W + anp.swapaxes(W, -1, -2)
        return anp.matmul(W, x) - anp.sum(W, axis=-1)[..., None] * x

    return vjp


defvjp(exp_quad, _exp_quad_vjp)


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
