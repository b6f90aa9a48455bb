"""The 200,000-row, 21-parameter logistic regression (models/logistic_regression/simulate.py,
seed 11) fitted in memory by default against its stored NUTS reference (bulk ESS > 12,000): every
mean within 0.1 sd and every sd within 10%, the issue's bar. 4000 draws of q estimate a mean to
0.016 sd and an sd to 1.1%; q is mean-field, whose sds are up to 6% below the posterior's here
(correlations up to 0.22 through the intercept)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.outputs.summary import flatten_draws
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel

FOLDER = Path(__file__).resolve().parents[2] / "models" / "logistic_regression"
sys.path.insert(0, str(FOLDER))
from simulate import simulate  # noqa: E402


@pytest.mark.slow
def test_200k_rows_default_fit_matches_nuts():
    X, y = simulate(200_000, seed=11)
    source = (FOLDER / "fixed_prior.model").read_text()
    model = CompiledModel(check(parse(source, "fixed_prior.model")),
                          {"N": len(y), "K": X.shape[1], "X": X, "y": y})  # fmt: skip
    result = fit(model, "auto", seed=1, draws=4000)
    # k-hat near 0.5 is redrawn from 4x the draws (ppl.diagnostics.verdict) and lands either side
    # of it by noise (0.48-0.52 here): the verdict, not a line through the noise, is the claim
    assert result.vi.converged and result.diagnostics["verdict"] != "not reliable"
    assert result.diagnostics["khat"] <= 0.7
    reference = json.loads((FOLDER / "simulated_200k_nuts_reference.json").read_text())
    names, matrix = flatten_draws(result.draws)
    column = {n: i for i, n in enumerate(names)}
    for name, mean in reference["mean"].items():
        sd = reference["sd"][name]
        draws = matrix[:, column[name]]
        assert abs(draws.mean() - mean) < 0.1 * sd, name
        assert abs(draws.std() / sd - 1) < 0.1, name


def test_log_joint_in_chunks_of_draws_is_the_log_joint():
    """ppl.inference.full_data.WholeRows: value, gradient and Hessian-vector products of the
    chunked log joint (here 3 draws per chunk) equal the plain one's."""
    import autograd.numpy as anp
    from autograd import value_and_grad

    from ppl.inference.full_data import ROW_CELLS, FullDataLogJoint, WholeRows
    from ppl.inference.hessian import batched_hvp

    X, y = simulate(500, seed=2, k=3)
    source = (FOLDER / "fixed_prior.model").read_text()
    model = CompiledModel(check(parse(source, "fixed_prior.model")),
                          {"N": len(y), "K": 3, "X": X, "y": y})  # fmt: skip
    chunked = FullDataLogJoint(WholeRows(model.log_joint, ROW_CELLS // 3))
    rng = np.random.default_rng(0)
    zeta, v = 0.3 * rng.standard_normal((10, 4)), rng.standard_normal((10, 4))
    value, gradient = value_and_grad(lambda z: anp.sum(chunked(z)))(zeta)
    value0, gradient0 = value_and_grad(lambda z: anp.sum(model.log_joint(z)))(zeta)
    assert np.isclose(value, value0, rtol=1e-13)
    np.testing.assert_allclose(gradient, gradient0, rtol=1e-12)
    np.testing.assert_allclose(chunked(zeta), model.log_joint(zeta), rtol=1e-13)
    np.testing.assert_allclose(batched_hvp(chunked, zeta, v), batched_hvp(model.log_joint, zeta, v),
                               rtol=1e-10, atol=1e-10)  # fmt: skip
