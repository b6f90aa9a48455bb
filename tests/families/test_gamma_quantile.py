"""The warm-started gamma quantile (ppl.families.gamma_quantile) against scipy's gammaincinv and
50-digit mpmath: warm starts from shapes moved by 1e-6 to 2x (with and without the last
d log x / da), on a grid of shapes 1e-3..1e4 and uniforms to 1e-300 and 1 - 2^-53."""

from __future__ import annotations

import mpmath as mp
import numpy as np
import pytest
from scipy.special import gammaincinv

from ppl.families.gamma import _std_quantile, gamma_dlogx_da
from ppl.families.gamma_quantile import WARM, halley

U_MIN, U_MAX = 1e-300, 1.0 - 2.0**-53


def _grid(seed: int):
    rng = np.random.default_rng(seed)
    S, K = 16, 200
    a = np.exp(rng.uniform(np.log(1e-3), np.log(1e4), K))[None, :] * np.ones((S, 1))
    u = rng.uniform(size=(S, K))
    u[0, :5], u[1, :5], u[2, :5], u[3, :5] = U_MIN, U_MAX, 1e-12, 1 - 1e-12
    return rng, a, u


@pytest.mark.parametrize("slope", [False, True])
@pytest.mark.parametrize("move", [1e-6, 1e-3, 0.1, 2.0])
def test_a_warm_start_gives_gammaincinvs_quantile_to_1e_10(move, slope):
    rng, a, u = _grid(int(move * 1e6) + slope)
    WARM.clear()
    _, log_x = _std_quantile(a, u)
    if slope:
        WARM.slope(u, a, gamma_dlogx_da(a, log_x))
    a1 = a * np.exp(move * rng.normal(size=(1, a.shape[1])))
    x, _ = _std_quantile(a1, u)
    ref = gammaincinv(a1, u)
    normal = ref >= 1e-100  # below, both are the small-x relation's (test_gamma_family)
    assert np.max(np.abs(x[normal] / ref[normal] - 1)) < 1e-10


def test_the_warm_start_is_used_and_exact_where_scipys_loses_digits():
    """A small shape with u just above 1/2: P's rounding is 1/a times as large in log x, so the
    Halley steps take 1 - Q there; checked against mpmath at 40 digits."""
    mp.mp.dps = 40
    a = np.array([6.389e-4, 1.005e-4, 3.0, 250.0])
    u = np.array([0.8645162010568520, 0.977689864747184, 0.3, 0.999])
    start = np.log(gammaincinv(a, u)) + 1e-4  # a warm start 1e-4 off in log x
    from scipy.special import gammaln

    t, converged = halley(a, u, start, gammaln(a))
    assert converged.all()
    for ak, uk, tk in zip(a, u, t, strict=True):
        exact = _exact_log_quantile(mp.mpf(float(ak)), mp.mpf(float(uk)), float(tk))
        assert abs(float(mp.e ** (mp.mpf(float(tk)) - exact)) - 1) < 1e-13


def _exact_log_quantile(a, u, guess: float):
    return mp.findroot(lambda lx: mp.gammainc(a, mp.e**lx, mp.inf, regularized=True) - (1 - u),
                       mp.mpf(guess), tol=1e-30)  # fmt: skip


def test_a_cold_start_is_gammaincinvs_and_other_uniforms_do_not_share_it():
    _, a, u = _grid(7)
    WARM.clear()
    x, _ = _std_quantile(a, u)
    ref = gammaincinv(a, u)
    normal = ref >= 1e-100
    assert np.allclose(x[normal], ref[normal], rtol=1e-13, atol=0)  # (through log x)
    assert WARM.get(np.clip(u, U_MIN, U_MAX)) is not None
    assert WARM.get(np.clip(u[::-1], U_MIN, U_MAX)) is None


def test_the_warm_starts_keep_a_bounded_number_of_elements():
    from ppl.families.gamma_quantile import CACHE_MAX_SIZE, CACHE_TOTAL

    WARM.clear()
    rng = np.random.default_rng(0)
    for _ in range(3 * CACHE_TOTAL // CACHE_MAX_SIZE):
        u = rng.uniform(size=CACHE_MAX_SIZE)
        WARM.put(u, np.ones_like(u), np.zeros_like(u))
    assert sum(e[0].size for e in WARM.entries.values()) <= CACHE_TOTAL
    assert WARM.get(u) is not None  # the newest is kept
    WARM.clear()
