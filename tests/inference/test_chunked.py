"""ppl.inference.chunked: the log joint differentiated a chunk of draws at a time gives the
same values and gradients as in one pass, to second order (the linear-response Hessian), and
only where the model's value-only calls are small (large per-draw arrays)."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import grad

from ppl.inference.chunked import BATCH, ChunkedLogJoint, chunked


class _Model:
    def __init__(self, draws_per_call: int):
        self.draws_per_call = draws_per_call
        self.calls: list[int] = []

    def log_joint(self, zeta):
        self.calls.append(len(zeta))
        return anp.sum(anp.sin(zeta) * zeta**2, axis=1) - anp.exp(zeta[:, 0])


def test_values_and_gradients_match_one_pass_to_second_order():
    model = _Model(7)
    wrapped = chunked(model.log_joint)
    assert isinstance(wrapped, ChunkedLogJoint)
    rng = np.random.default_rng(0)
    zeta, w, v = rng.normal(size=(30, 4)), rng.uniform(size=30), rng.normal(size=(30, 4))

    def plain(z):
        return anp.sum(w * model.log_joint(z))

    def mine(z):
        return anp.sum(w * wrapped(z))

    np.testing.assert_allclose(mine(zeta), plain(zeta), rtol=1e-14)
    model.calls.clear()
    np.testing.assert_allclose(grad(mine)(zeta), grad(plain)(zeta), rtol=1e-13)
    assert max(model.calls[:5]) == 7  # the chunks, then the one-pass reference
    h_mine = grad(lambda z: anp.sum(grad(mine)(z) * v))(zeta)
    h_plain = grad(lambda z: anp.sum(grad(plain)(z) * v))(zeta)
    np.testing.assert_allclose(h_mine, h_plain, rtol=1e-12, atol=1e-12)


def test_ordinary_models_are_left_as_they_are():
    model = _Model(BATCH)
    assert chunked(model.log_joint) == model.log_joint

    def loose(z):
        return anp.sum(z, axis=1)

    assert chunked(loose) is loose
