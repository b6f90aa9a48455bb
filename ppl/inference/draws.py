"""Fixed standard-normal draws for deterministic ELBO objectives: scrambled Sobol points.

A fixed-draw ELBO is maximised exactly, so its Monte Carlo error becomes a bias of the fit; for
scale parameters (a Gaussian's sd, a gamma's shape) plain random draws leave errors of order
1/sqrt(2n) (9% at n = 64). Randomised quasi-Monte Carlo points fill the space evenly and make the
error of smooth integrands fall nearly as 1/n.

The points are those of `scipy.stats.qmc.Sobol(d, scramble=True, seed=seed).random(m)`, bit for
bit (tests/inference/test_draws.py compares them), computed here in numpy from scipy's table of Joe
and
Kuo's direction numbers: importing `scipy.stats` for them would add 0.4 s to every `ppl fit`.
Where that table is not found, `scipy.stats.qmc` itself is used.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
from scipy.special import ndtri

_MAX_SOBOL_DIM = 21201  # scipy's Sobol direction numbers
_BITS = 30  # scipy's default precision: points are integers / 2**30
_DIRECTION_NUMBERS = Path("stats") / "_sobol_direction_numbers.npz"  # under scipy's package


def fixed_normal_draws(n: int, dim: int, seed: int) -> np.ndarray:
    """(m, dim) standard-normal draws, m = n rounded up to a power of two (Sobol balance)."""
    m = 1 << max(int(np.ceil(np.log2(max(n, 2)))), 1)
    if dim == 0:
        return np.zeros((m, 0))
    if dim > _MAX_SOBOL_DIM:
        return np.random.default_rng(seed).standard_normal((m, dim))
    points = sobol_points(m, dim, seed)
    return ndtri(np.clip(points, 1e-12, 1 - 1e-12))


def sobol_points(m: int, dim: int, seed: int) -> np.ndarray:
    """The first m (a power of two) points of scipy's scrambled Sobol sequence in [0, 1)^dim."""
    table = _direction_table()
    if table is None:  # pragma: no cover - a scipy without the table where it has been
        from scipy.stats import qmc

        return qmc.Sobol(d=dim, scramble=True, seed=seed).random(m)
    rng = np.random.default_rng(seed)
    # linear matrix scramble and digital shift, drawn in scipy's order, shapes and dtype
    shift_bits = rng.integers(0, 2, size=(dim, _BITS), dtype=np.uint32)
    shift = np.dot(shift_bits, 2 ** np.arange(_BITS, dtype=np.uint32))
    lower = np.tril(rng.integers(0, 2, size=(dim, _BITS, _BITS), dtype=np.uint32))
    v = _scramble(_direction_numbers(dim), lower)
    # point k is the shift XOR the direction numbers of the bits set in k's Gray code
    k = np.arange(m, dtype=np.uint64)
    gray = k ^ (k >> np.uint64(1))
    quasi = np.broadcast_to(shift, (m, dim)).copy()
    for b in range(max(int(m - 1).bit_length(), 0)):
        on = ((gray >> np.uint64(b)) & np.uint64(1)).astype(bool)
        quasi[on] ^= v[:, b]
    return quasi * (1.0 / 2**_BITS)


@functools.cache
def _direction_table():
    """(poly, vinit) of scipy's `_sobol_direction_numbers.npz`, or None when it is missing."""
    import scipy

    path = Path(scipy.__file__).parent / _DIRECTION_NUMBERS
    try:
        with np.load(path) as data:
            return data["poly"].astype(np.int64), data["vinit"].astype(np.int64)
    except (OSError, KeyError, ValueError):  # pragma: no cover
        return None


@functools.lru_cache(maxsize=8)
def _direction_numbers(dim: int) -> np.ndarray:
    """(dim, bits) direction numbers v[d, j] (Bratley and Fox's recurrence), column j scaled by
    2**(bits - 1 - j), as uint32; kept per dim, since every round of a fit asks again (read-only:
    the scramble copies)."""
    poly, vinit = _direction_table()
    poly = poly[:dim]
    degree = np.array([int(p).bit_length() - 1 for p in poly])
    v = np.zeros((dim, _BITS), dtype=np.int64)
    v[0] = 1
    given = np.arange(vinit.shape[1])[None, :] < degree[:, None]  # the first `degree` columns
    v[:, : vinit.shape[1]][given] = vinit[:dim][given]
    rows = np.arange(dim)
    for j in range(_BITS):
        todo = (rows > 0) & (degree <= j)
        if not todo.any():
            continue
        d, s, p = rows[todo], degree[todo], poly[todo]
        new = v[d, j - s]
        for k in range(int(s.max())):
            use = (k < s) & (((p >> np.maximum(s - 1 - k, 0)) & 1) == 1)
            new = np.where(use, new ^ (v[d, np.maximum(j - k - 1, 0)] << (k + 1)), new)
        v[d, j] = new
    v <<= np.arange(_BITS - 1, -1, -1)
    v = v.astype(np.uint32)
    v.flags.writeable = False
    return v


def _scramble(v: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Left linear matrix scramble: each direction number's bits (most significant first) times
    the dimension's lower-triangular 0/1 matrix with unit diagonal, modulo 2."""
    lower = lower.copy()
    idx = np.arange(_BITS)
    lower[:, idx, idx] = 1
    weights = np.uint32(1) << np.arange(_BITS - 1, -1, -1, dtype=np.uint32)  # row p -> bit
    rows = np.dot(lower, weights)  # (dim, bits): row p of each matrix as an integer
    both = rows[:, :, None] & v[:, None, :]  # (dim, p, j)
    for shift in (16, 8, 4, 2, 1):  # parity of each: the bit p of the scrambled v[:, j]
        both ^= both >> np.uint32(shift)
    both &= np.uint32(1)
    return np.einsum("dpj,p->dj", both, weights).astype(np.uint32)
