"""ppl.inference.draws: its Sobol points are scipy's scrambled Sobol points, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import qmc

from ppl.inference.draws import fixed_normal_draws, sobol_points


@pytest.mark.parametrize("dim", [1, 2, 3, 7, 10, 40, 257])
@pytest.mark.parametrize("m", [2, 8, 64, 256])
@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1])
def test_sobol_points_are_scipys(dim, m, seed):
    ours = sobol_points(m, dim, seed)
    theirs = qmc.Sobol(d=dim, scramble=True, seed=seed).random(m)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_array_equal(ours, theirs)


def test_sobol_points_in_many_dimensions_are_scipys():
    np.testing.assert_array_equal(
        sobol_points(16, 3000, 7), qmc.Sobol(d=3000, scramble=True, seed=7).random(16)
    )


def test_fixed_normal_draws_are_normal_scores_of_the_points():
    from scipy.special import ndtri

    eps = fixed_normal_draws(50, 4, 3)  # 50 rounds up to 64
    points = qmc.Sobol(d=4, scramble=True, seed=3).random(64)
    np.testing.assert_array_equal(eps, ndtri(np.clip(points, 1e-12, 1 - 1e-12)))
    assert fixed_normal_draws(10, 0, 3).shape == (16, 0)
