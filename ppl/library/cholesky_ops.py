"""Cholesky factors and triangular solves as autograd primitives, batched over leading axes.

numpy runs a batch of factorisations through its own loops (`np.linalg.cholesky` took 2.9 ms
per 405 x 405 matrix where LAPACK's dpotrf takes 1.0 ms), and the density of a Cholesky factor
(`multi_normal_cholesky`) solved L z = y with a general LU solve (2.2 ms against 0.03 ms for a
triangular one); autograd's Cholesky rule then did two more LU solves with n right-hand sides.
On the GP regression example (a 405 x 405 factor per draw) these were most of the fit's time.
Here matrices of order LAPACK_FROM and above go one at a time to LAPACK and BLAS (dpotrf,
dtrsm), smaller ones to numpy's batched routines (a batch of thousands of 3 x 3 factors must not
be a Python loop). The reverse-mode rules are written in these primitives and autograd's own
operations, so they can themselves be differentiated (the mode's Hessian takes a gradient of
the gradient).
"""

from __future__ import annotations

import functools
import weakref

import autograd.numpy as anp
import numpy as onp
from autograd.extend import defvjp, defvjp_argnums, primitive
from autograd.tracer import isbox

#: Matrices of this order and above are factorised and solved one per LAPACK/BLAS call.
LAPACK_FROM = 64


def _t(x):
    return anp.swapaxes(x, -1, -2)


def _one_at_a_time(a: onp.ndarray) -> bool:
    return a.shape[-1] >= LAPACK_FROM and a.dtype == onp.float64


@primitive
def cholesky(a):
    """The lower Cholesky factor of each matrix on the last two axes (from its lower triangle,
    as numpy's); onp.linalg.LinAlgError when one is not positive definite."""
    a = onp.asarray(a)
    if not _one_at_a_time(a):
        return onp.linalg.cholesky(a)
    from scipy.linalg.lapack import dpotrf

    n = a.shape[-1]
    out = onp.array(a, order="C").reshape((-1, n, n))
    for m in out:
        # in place, on the transpose: a C-ordered lower triangle is a Fortran-ordered upper one,
        # so LAPACK reads and writes the copy as it is (no transposing copies in or out)
        _, info = dpotrf(m.T, lower=0, clean=1, overwrite_a=1)
        if info != 0:
            raise onp.linalg.LinAlgError("Matrix is not positive definite")
    return out.reshape(a.shape)


@primitive
def solve_lower(L, b, transpose: bool = False):
    """X with L X = b (or L^T X = b when `transpose`), L lower triangular (its upper triangle is
    not read) and b a matrix per batch entry (..., n, k); batch axes broadcast."""
    L, b = onp.asarray(L), onp.asarray(b)
    batch = onp.broadcast_shapes(L.shape[:-2], b.shape[:-2])
    if not (_one_at_a_time(L) and b.dtype == onp.float64):
        tri = onp.tril(L)
        return onp.linalg.solve(onp.swapaxes(tri, -1, -2) if transpose else tri, b + onp.zeros(
            batch + b.shape[-2:]))  # fmt: skip
    from scipy.linalg.blas import dtrsm

    n, k = b.shape[-2:]
    Ls = onp.ascontiguousarray(onp.broadcast_to(L, batch + (n, n)).reshape((-1, n, n)))
    bs = onp.ascontiguousarray(onp.broadcast_to(b, batch + (n, k)).reshape((-1, n, k)))
    out = onp.empty(bs.shape)
    for j in range(len(bs)):
        # solved transposed, X^T = b^T L^-T (or b^T L^-1), so that BLAS reads the C-ordered
        # arrays as they are (Fortran-ordered transposes): no copies, 3.8 ms against 6.5 ms
        out[j] = dtrsm(1.0, Ls[j].T, bs[j].T, side=1, lower=0, trans_a=int(bool(transpose))).T
    return out.reshape(batch + (n, k))


def unbroadcast(x, shape: tuple):
    """x summed down to `shape` over the leading axes and the size-1 axes it broadcast along
    (a primitive's cotangent for an argument numpy broadcast)."""
    extra = anp.ndim(x) - len(shape)
    if extra > 0:
        x = anp.sum(x, axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and anp.shape(x)[i] != 1)
    return anp.sum(x, axis=axes, keepdims=True) if axes else x


def _solve_vjp_L(X, L, b, transpose=False):
    def vjp(g):
        gb = solve_lower(L, g, not transpose)
        outer = anp.matmul(X, _t(gb)) if transpose else anp.matmul(gb, _t(X))
        return unbroadcast(-anp.tril(outer), anp.shape(L))

    return vjp


def _solve_vjp_b(X, L, b, transpose=False):
    return lambda g: unbroadcast(solve_lower(L, g, not transpose), anp.shape(b))


defvjp(solve_lower, _solve_vjp_L, _solve_vjp_b)


def _cholesky_vjp(L, a):
    """Murray (arXiv:1602.07527): A_bar = sym(L^-T Phi(L^T L_bar) L^-1), Phi the lower
    triangle with its diagonal halved; the two products with L^-1 are triangular solves. A
    cotangent that is a Gaussian density's own (GaussianCotangent, from gaussian_quad on this
    very factor) is turned into A_bar directly: 0.5 (sum w w^T - c A^-1), A^-1 from L
    (inverse_from_factor), written over that inverse: a third of the two solves and the
    product (the GP regression example: a gradient per draw 31 -> 13 ms CPU). Outside a trace,
    A_bar is handed on as a SymmetricCotangent. L is registered in FACTORS while it lives
    (this rule is made for traced calls only, when their node is)."""
    if not isbox(L):
        FACTORS[id(L)] = L

    def vjp(g):
        if type(g) is GaussianCotangent and getattr(g, "factor", None) is L:
            inv = inverse_from_factor(L)  # a fresh array: A_bar is written over it
            inv *= (-0.5 * g.coef)[..., None, None]
            if g.half_outer is not None:
                inv += g.half_outer
            else:
                _add_outer(inv, *g.rank_one)
            return symmetric_cotangent(inv)
        inner = anp.matmul(_t(L), anp.tril(g))
        phi = anp.tril(inner) - 0.5 * inner * onp.eye(inner.shape[-1])
        left = solve_lower(L, phi, True)  # L^-T phi
        S = _t(solve_lower(L, _t(left), True))  # L^-T phi L^-1
        out = 0.5 * (S + _t(S))
        return out if isbox(out) else symmetric_cotangent(out)

    return vjp


defvjp(cholesky, _cholesky_vjp)


def _add_outer(m: onp.ndarray, a: onp.ndarray, v: onp.ndarray) -> None:
    """m += a v v^T in place, per batch entry (BLAS dger one matrix at a time from order
    LAPACK_FROM: no n x n temporary)."""
    if not _one_at_a_time(m):
        m += a[..., None, None] * v[..., :, None] * v[..., None, :]
        return
    from scipy.linalg.blas import dger

    n = m.shape[-1]
    ms, vs = m.reshape((-1, n, n)), onp.ascontiguousarray(v).reshape((-1, n))
    for mk, ak, vk in zip(ms, a.reshape(-1), vs, strict=True):
        dger(float(ak), vk, vk, a=mk.T, overwrite_a=1)  # v v^T is its own transpose


#: Factors made by a traced cholesky (id -> the array, while it lives): their cotangent goes to
#: cholesky's rule alone (through autograd's sums), so a GaussianCotangent may defer its array.
FACTORS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def solve_lower_vector(L, y, transpose: bool = False):
    """x with L x = y (L^T x = y when `transpose`) for vectors y on the last axis."""
    return solve_lower(L, y[..., None], transpose)[..., 0]


def log_diagonal(L):
    """log of the diagonal of (a batch of) square matrices, on the last axis."""
    return anp.log(anp.diagonal(L, axis1=-1, axis2=-2))  # (the axes make_diagonal takes)


def inverse_from_factor(L: onp.ndarray) -> onp.ndarray:
    """(L L^T)^-1 from the lower factor L (batched over the leading axes), one matrix at a time
    from order LAPACK_FROM: L^-1 by blocks (_upper_inverse) and L^-T L^-1 by LAPACK's dlauum,
    1.5 against dpotri's 2.8 ms at order 405 (its dtrtri is not blocked in the OpenBLAS scipy
    ships: 2.3 ms for a third of a factorisation's flops); numpy's inverse below LAPACK_FROM."""
    L = onp.asarray(L)
    if not _one_at_a_time(L):
        eye = onp.broadcast_to(onp.eye(L.shape[-1]), L.shape)
        Linv = onp.linalg.solve(onp.tril(L), eye)
        return onp.matmul(onp.swapaxes(Linv, -1, -2), Linv)
    from scipy.linalg.lapack import dlauum

    n = L.shape[-1]
    flat = L.reshape((-1, n, n))
    out = onp.empty_like(flat)
    for k, m in enumerate(flat):
        # m.T is L^T in Fortran order, A's upper factor U: U^-1 U^-T = A^-1 has its upper
        # triangle from dlauum (Fortran-ordered), its strict lower part is then mirrored
        inv, info = dlauum(_upper_inverse(m.T), lower=0, overwrite_c=1)
        if info != 0:
            raise onp.linalg.LinAlgError("singular Cholesky factor")
        onp.copyto(out[k], inv.T)  # the lower triangle right, the upper one stale
        onp.copyto(out[k], inv, where=_upper(n))
    return out.reshape(L.shape)


#: _upper_inverse inverts blocks of this order and below with LAPACK's dtrtri.
INVERSE_BLOCK = 64


def _upper_inverse(U: onp.ndarray) -> onp.ndarray:
    """U^-1 for an upper triangular U (its strict lower part not read; zero in the result,
    Fortran-ordered) by halves: [[A, B], [0, C]]^-1 = [[A^-1, -A^-1 B C^-1], [0, C^-1]], two
    triangular products (dtrmm, blocked) per level where dtrtri went one column at a time."""
    from scipy.linalg.blas import dtrmm
    from scipy.linalg.lapack import dtrtri

    n = U.shape[0]
    if n <= INVERSE_BLOCK:
        inv, info = dtrtri(onp.triu(U), lower=0)
        if info != 0:
            raise onp.linalg.LinAlgError("singular Cholesky factor")
        return inv
    h = n // 2
    out = onp.empty((n, n), order="F")
    out[:h, :h] = A_inv = _upper_inverse(U[:h, :h])
    out[h:, h:] = C_inv = _upper_inverse(U[h:, h:])
    right = dtrmm(-1.0, A_inv, U[:h, h:], side=0, lower=0)  # -A^-1 B
    out[:h, h:] = dtrmm(1.0, C_inv, right, side=1, lower=0, overwrite_b=1)
    out[h:, :h] = 0.0
    return out


@functools.cache
def _upper(n: int) -> onp.ndarray:
    """The upper triangle's mask of an n x n matrix (one pass mirrors a triangle: two triu
    calls and a sum made three n x n arrays per matrix)."""
    return onp.triu(onp.ones((n, n), dtype=bool))


class TaggedCotangent(onp.ndarray):
    """A cotangent as the dense array it is, tagged with what its consumer may use to save work.
    Any arithmetic on it gives a plain array (autograd adding a second cotangent, say), and a
    view of it (reshape, slicing) keeps the class but not the tag, so a tag is only trusted on
    the very array its producer made and handed on as all of the cotangent."""

    def plain(self) -> onp.ndarray:
        """The cotangent as a plain array."""
        return onp.asarray(self)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        inputs = tuple(_plain(x) for x in inputs)
        if "out" in kwargs:
            kwargs["out"] = tuple(_plain(x) for x in kwargs["out"])
        return getattr(ufunc, method)(*inputs, **kwargs)

    def __array_function__(self, func, types, args, kwargs):
        args = tuple(_plain(x) for x in args)
        kwargs = {k: _plain(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


def _plain(x):
    return x.plain() if isinstance(x, TaggedCotangent) else x


class GaussianCotangent(TaggedCotangent):
    """The cotangent of a Cholesky factor L from a Gaussian log density on it (gaussian_quad),
    carrying what makes the cotangent of A = L L^T cheap: `half_outer`, half the sum of the
    weighted w w^T (w = A^-1 (y - mu)), or where there is one w per factor `rank_one`, (half
    its weight, w), for cholesky's rule to add in place; `coef`, the sum of the weights of the
    log determinant, per batch entry of L; and `factor`, the L they belong to.

    Where L is the output of a traced cholesky (FACTORS), its cotangent can only reach
    cholesky's rule, which reads those three, or autograd's sum with L's other cotangents, a
    ufunc: the dense array is then made only there (`dense`, a function), and the array itself
    is a read-only nan placeholder (a fifth of a GP regression gradient's reverse pass)."""

    half_outer: onp.ndarray | None
    rank_one: tuple[onp.ndarray, onp.ndarray]
    coef: onp.ndarray
    factor: onp.ndarray
    dense = None

    def plain(self) -> onp.ndarray:
        return self.dense() if self.dense is not None else onp.asarray(self)


class SymmetricCotangent(TaggedCotangent):
    """A cotangent known symmetric on its last two axes (a covariance's, from cholesky's rule):
    a consumer may skip symmetrising it (gp_kernels.exp_quad's rule). `whole` is set on the
    array made by symmetric_cotangent only, not on its views."""

    whole = False


def symmetric_cotangent(x: onp.ndarray) -> SymmetricCotangent:
    """x (symmetric on its last two axes) tagged as such, without a copy."""
    out = onp.asarray(x).view(SymmetricCotangent)
    out.whole = True
    return out


def is_symmetric(g) -> bool:
    """Whether g is a whole SymmetricCotangent (made by symmetric_cotangent, not a view)."""
    return type(g) is SymmetricCotangent and g.whole


def _register_cotangent() -> None:
    from autograd.core import VSpace

    for cls in (GaussianCotangent, SymmetricCotangent):
        VSpace.mappings[cls] = VSpace.mappings[onp.ndarray]


_register_cotangent()


@primitive
def gaussian_quad(diff, L):
    """-|z|^2 / 2 - sum log diag L with L z = diff (batched, broadcasting): log N(y | mu, L L^T)
    without its constant, diff = y - mu. Its reverse rule hands L a GaussianCotangent."""
    diff, L = onp.asarray(diff), onp.asarray(L)
    z = solve_lower_vector(L, diff)
    return -0.5 * onp.sum(z * z, axis=-1) - onp.sum(onp.log(onp.diagonal(L, 0, -2, -1)), axis=-1)


def _quad_vjps(argnums, ans, args, kwargs):
    """Both arguments' rules from one pair of solves, z = L^-1 diff and w = L^-T z."""
    diff, L = args

    def vjp(g):
        z = solve_lower_vector(L, diff)
        w = solve_lower_vector(L, z, True)
        return tuple(
            unbroadcast(-g[..., None] * w, anp.shape(diff)) if argnum == 0
            else _quad_cotangent_L(g, ans, diff, L, z, w)
            for argnum in argnums
        )  # fmt: skip

    return vjp


def _quad_cotangent_L(g, ans, diff, L, z, w):
    """L's cotangent tril(g w z^T) - diag(g / diag L); outside a trace, a GaussianCotangent,
    made in one array (no n x n identity, triangle copy or difference of its own)."""
    n = anp.shape(L)[-1]
    inv_diag = 1.0 / anp.diagonal(L, axis1=-1, axis2=-2)
    weighted = g[..., None] * w
    if any(isbox(x) for x in (g, diff, L)):  # a gradient being differentiated: the plain rule
        dense = anp.tril(weighted[..., :, None] * z[..., None, :])
        dense = dense - (g[..., None] * inv_diag)[..., None] * onp.eye(n)
        return unbroadcast(dense, anp.shape(L))

    def dense() -> onp.ndarray:
        out = weighted[..., :, None] * z[..., None, :]
        onp.copyto(out, 0.0, where=_strict_upper(n))
        idx = onp.arange(n)
        out[..., idx, idx] -= g[..., None] * inv_diag
        return onp.asarray(unbroadcast(out, L.shape))

    if FACTORS.get(id(L)) is L:
        out = onp.broadcast_to(onp.float64(onp.nan), L.shape).view(GaussianCotangent)
        out.dense = dense
    else:
        out = dense().view(GaussianCotangent)
    if anp.shape(w) == L.shape[:-1]:  # one y per factor: w w^T added in place by the rule
        out.half_outer, out.rank_one = None, (0.5 * (g + onp.zeros(anp.shape(ans))), w)
    else:
        out.half_outer = unbroadcast((0.5 * weighted)[..., :, None] * w[..., None, :], L.shape)
    out.coef = unbroadcast(g + onp.zeros(anp.shape(ans)), L.shape[:-2])
    out.factor = L
    return out


@functools.cache
def _strict_upper(n: int) -> onp.ndarray:
    return onp.triu(onp.ones((n, n), dtype=bool), 1)


defvjp_argnums(gaussian_quad, _quad_vjps)
