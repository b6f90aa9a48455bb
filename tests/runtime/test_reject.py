"""reject() as Stan has it: the draw that reaches it has density zero, the others are
evaluated as usual, and the message shows the values it was given (Stan concatenates its
arguments). Inside an `if` on a parameter the branch runs once on the draws taking it, so a
rejection there rejects those draws only, without falling back to one draw at a time."""

from __future__ import annotations

import re

import numpy as np

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

SRC = """
data { int N; vector[N] y; }
parameters { real mu; }
model {
  if (mu > 2.5) reject("mu too big: ", mu, " with y ", y);
  y ~ normal(mu, 1);
  mu ~ normal(0, 10);
}
"""


def _model():
    return CompiledModel(check(parse(SRC, "r.stan")), {"N": 3, "y": np.array([1.0, 2.0, 3.0])})


def test_rejected_draws_have_zero_density_and_the_rest_are_unchanged():
    model = _model()
    zeta = np.array([[0.0], [3.0], [1.0], [10.0]])
    values = model.log_joint(zeta)
    assert not model.per_sample  # the batch was not split into single draws
    assert np.isneginf(values[1]) and np.isneginf(values[3])
    one_at_a_time = [float(_model().log_joint(zeta[i : i + 1])[0]) for i in (0, 2)]
    np.testing.assert_allclose(values[[0, 2]], one_at_a_time, rtol=1e-15)
    assert model.last_rejection == "mu too big: 3 with y [1,2,3]"


def test_a_fit_that_meets_reject_says_how_many_draws_and_shows_the_message():
    result = fit(_model(), "auto", seed=1, draws=1000)
    (warning,) = [w for w in result.warnings if "rejected by reject()" in w]
    assert re.search(r'e\.g\. "mu too big: 2\.[5-9]\d* with y \[1,2,3\]"', warning), warning
    assert "?" not in warning


def test_a_draw_whose_matrix_is_singular_is_rejected_not_the_fit():
    """Numerical trouble in one draw (here a singular matrix to invert: rho = 1) rejects that
    draw, as Stan does, located in the message; the other draws of the batch keep their values
    (the batch is split in halves down to the bad draw)."""
    src = """
data { vector[2] y; }
parameters { real<lower=-2, upper=2> rho; }
model { matrix[2, 2] S = [[1, rho], [rho, 1]]; target += -0.5 * quad_form(inverse(S), y); }
"""
    y = np.array([0.3, -0.2])
    model = CompiledModel(check(parse(src, "l.stan")), {"y": y})
    zeta = np.array([[0.0], [np.log(3.0)], [-0.3], [0.7]])  # rho = 0, 1 (singular), ...
    values = model.log_joint(zeta)
    assert np.isneginf(values[1]) and np.isfinite(values[[0, 2, 3]]).all()
    alone = [float(model.log_joint(zeta[i : i + 1])[0]) for i in (0, 2, 3)]
    np.testing.assert_allclose(values[[0, 2, 3]], alone, rtol=1e-14)
    message = model.last_rejection
    assert message.startswith("l.stan:4:") and "Singular matrix" in message
