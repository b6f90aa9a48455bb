"""iid Gaussian rows with a shared covariance are scored through Y'Y: same numbers, O(D^3) cost."""

from __future__ import annotations

import numpy as np
import pytest
from autograd import grad

from ppl.ir.passes import ALL
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.library.distributions import DISTRIBUTIONS
from ppl.runtime.compiler import CompiledModel

MODEL = """
data { int N; int D; array[N] vector[D] y; }
parameters { vector[D] mu; cholesky_factor_cov[D] L; }
transformed parameters { matrix[D, D] Sigma = multiply_lower_tri_self_transpose(L); }
model { STATEMENT }
"""
VECTORISED = "y ~ multi_normal(mu, Sigma);"
PER_ROW = "for (n in 1:N) target += multi_normal_lpdf(y[n] | mu, Sigma);"
CHOLESKY = "y ~ multi_normal_cholesky(mu, L);"


def _model(statement: str, y: np.ndarray, passes=ALL) -> CompiledModel:
    text = MODEL.replace("STATEMENT", statement)
    data = {"N": np.asarray(len(y)), "D": np.asarray(y.shape[1]), "y": y}
    return CompiledModel(check(parse(text, "t.model")), data, passes=passes)


@pytest.mark.parametrize("statement", [VECTORISED, CHOLESKY])
def test_sufficient_statistics_match_the_row_by_row_density_and_gradient(statement):
    rng = np.random.default_rng(0)
    y = rng.normal(size=(40, 3)) + np.array([1.0, -2.0, 0.5])
    fast, slow = _model(statement, y), _model(PER_ROW, y)
    zeta = rng.normal(size=(5, fast.dim)) * 0.4
    np.testing.assert_allclose(fast.log_joint(zeta), slow.log_joint(zeta), rtol=1e-10)
    g_fast = grad(lambda z: fast.log_joint(z).sum())(zeta)
    g_slow = grad(lambda z: slow.log_joint(z).sum())(zeta)
    np.testing.assert_allclose(g_fast, g_slow, rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("passes, scored", [(ALL, []), ((), [(1, 5000, 4)])])
def test_rows_are_never_scored_one_by_one(monkeypatch, passes, scored):
    """With the pass (ppl.ir.passes.sufficient_statistics), never; without it, by the general
    path."""
    calls = []
    dist = DISTRIBUTIONS["multi_normal"]
    original = dist.log_prob

    def counting(*args):
        calls.append(np.shape(args[0]))
        return original(*args)

    monkeypatch.setattr(dist, "log_prob", counting)
    y = np.random.default_rng(1).normal(size=(5000, 4))
    model = _model(VECTORISED, y, passes)
    model.log_joint(np.zeros((3, model.dim)))
    assert calls == scored  # with the pass, the (N, D) data never reach the per-row density
