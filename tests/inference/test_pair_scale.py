"""PairScale (the sparse natural scaling of the fixed-draw road) against its dense matrix."""

import autograd.numpy as anp
import numpy as np
from autograd import grad

from ppl.inference.pair_scale import PairScale


def _scale(seed: int = 0) -> PairScale:
    rng = np.random.default_rng(seed)
    R = PairScale(9)
    blocks = rng.normal(size=(3, 2, 2)) + 2 * np.eye(2)
    R.set_pairs(np.array([0, 2, 5]), np.array([3, 7, 6]), blocks)
    return R


def test_products_and_solve_match_the_dense_matrix():
    R, v = _scale(), np.random.default_rng(1).normal(size=9)
    dense = R.toarray()
    assert np.allclose(R @ v, dense @ v)
    assert np.allclose(R.rmatvec(v), dense.T @ v)
    assert np.allclose(R.solve_transposed(v), np.linalg.solve(dense.T, v))


def test_product_is_differentiable():
    R, w = _scale(2), np.arange(9.0)
    g = grad(lambda c: anp.sum(w * (R @ c) ** 2))(np.ones(9))
    dense = R.toarray()
    assert np.allclose(g, dense.T @ (2 * w * (dense @ np.ones(9))))
