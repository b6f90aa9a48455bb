"""The 200,000-row, 21-parameter logistic regression (models/logistic_regression/simulate.py,
seed 11) fitted in memory by default against its stored NUTS reference (bulk ESS > 4800): every
mean within 0.1 sd and every sd within 10%, the issue's bar. 4000 draws of q estimate a mean to
0.016 sd and an sd to 1.1%; q is mean-field, whose sds are up to 6% below the posterior's here
(correlations up to 0.22 through the intercept)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ppl.checker import check
from ppl.compiler import CompiledModel
from ppl.parser import parse
from ppl.pipeline import fit
from ppl.summary import flatten_draws

FOLDER = Path(__file__).resolve().parent.parent / "models" / "logistic_regression"
sys.path.insert(0, str(FOLDER))
from simulate import simulate  # noqa: E402


def test_200k_rows_default_fit_matches_nuts():
    X, y = simulate(200_000, seed=11)
    source = (FOLDER / "fixed_prior.model").read_text()
    model = CompiledModel(check(parse(source, "fixed_prior.model")),
                          {"N": len(y), "K": X.shape[1], "X": X, "y": y})  # fmt: skip
    result = fit(model, "auto", seed=1, draws=4000)
    assert result.vi.converged and result.diagnostics["khat"] <= 0.5
    reference = json.loads((FOLDER / "simulated_200k_nuts_reference.json").read_text())
    names, matrix = flatten_draws(result.draws)
    column = {n: i for i, n in enumerate(names)}
    for name, mean in reference["mean"].items():
        sd = reference["sd"][name]
        draws = matrix[:, column[name]]
        assert abs(draws.mean() - mean) < 0.1 * sd, name
        assert abs(draws.std() / sd - 1) < 0.1, name
