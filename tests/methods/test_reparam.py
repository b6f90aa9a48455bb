"""Non-centring on the default road (ppl.methods.reparam): kept where it reaches a higher ELBO
(eight schools centred, Neal's funnel: checked against exact posteriors), skipped where the
data inform the statement (the centred fit is kept, no refit), forced or refused by
`reparam`, reported in the user's own parameters."""

from __future__ import annotations

import numpy as np
import pytest

from ppl.errors import ModelError
from ppl.language.frontend import model_from_text
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel
from tests.ir.test_noncentre import EIGHT_SCHOOLS, SCHOOLS

FUNNEL = """
parameters { real v; vector[9] x; }
model {
  v ~ normal(0, 3);
  x ~ normal(0, exp(v / 2));
}
"""

#: Eight schools' exact posterior of (mu, tau): theta integrated out (y_j ~ N(mu, sigma_j^2 +
#: tau^2)) and (mu, log tau) on a 1401 x 6001 grid (posteriordb's reference: 4.4 +- 3.3, 3.6
#: +- 3.2)
EXACT = {"mu": (4.397, 3.318), "tau": (3.598, 3.220)}

INFORMED = """
data { int<lower=0> J; vector[J] y; }
parameters { real mu; real<lower=0> tau; vector[J] theta; }
model {
  mu ~ normal(0, 10);
  tau ~ normal(0, 10);
  theta ~ normal(mu, tau);
  y ~ normal(theta, 0.1);
}
"""
INFORMED_DATA = {"J": 8, "y": np.array([3.1, -2.0, 5.5, 0.4, 7.2, -4.1, 1.0, 2.2])}


def _model(source, data):
    return CompiledModel(model_from_text(source, "test.stan"), data)


@pytest.mark.slow
def test_eight_schools_centred_is_non_centred_and_near_the_exact_posterior():
    model = _model(EIGHT_SCHOOLS, SCHOOLS)
    centred = fit(model, reparam="none")
    result = fit(model)
    assert [lat.name for lat in result.model.latents] == ["mu", "tau", "theta_raw"]
    assert list(result.draws) == ["mu", "tau", "theta", "first"]
    assert result.draws["theta"].shape == (1000, 8)
    assert any("non-centred" in n and "kept" in n for n in result.notes), result.notes
    assert result.families["theta"].endswith("on theta_raw (non-centred)")
    # both ELBOs bound the same log evidence: the higher is the better q; the centred program's
    # road ends at the collapse (mu and theta integrated out: exact but for tau's grid), so
    # the two tie to Monte Carlo error
    error = 3 * max(result.diagnostics["elbo_mcse"], centred.diagnostics["elbo_mcse"])
    assert result.diagnostics["elbo"] > centred.diagnostics["elbo"] - error
    assert result.diagnostics["khat"] <= 0.5  # the centred one is a flow by now, its k-hat varies
    for name, (mean, sd) in EXACT.items():
        draws = result.draws[name]
        assert abs(draws.mean() - mean) < 0.25 * sd, name
        assert 0.7 < draws.std() / sd < 1.25, name


@pytest.mark.slow
def test_funnel_non_centred_is_exact():
    model = _model(FUNNEL, {})
    centred = fit(model, reparam="none")
    result = fit(model)
    v = result.draws["v"]
    assert abs(v.mean()) < 0.2 and abs(v.std() / 3.0 - 1) < 0.05  # v ~ N(0, 3) exactly
    x = result.draws["x"]
    assert x.shape == (1000, 9)
    # log evidence 0 (a normalised density): both ELBOs are below it, the non-centred at it (to
    # 1e-3: the road may keep the collapsed q for its exact summaries, ppl.methods.collapse_road,
    # whose piecewise-constant grid on v costs under 0.001 nats)
    assert centred.diagnostics["elbo"] < -1.0
    assert any("non-centred" in n and "kept" in n for n in result.notes), result.notes
    assert abs(result.diagnostics["elbo"]) < 1e-3


def test_informative_data_keep_the_centred_fit_without_a_refit():
    model = _model(INFORMED, INFORMED_DATA)
    kept = fit(model)
    alone = fit(model, reparam="none")
    assert [lat.name for lat in kept.model.latents] == ["mu", "tau", "theta"]
    assert any("left centred" in n and "theta 1.00" in n for n in kept.notes), kept.notes
    assert kept.vi.grad_evals == alone.vi.grad_evals  # no second fit
    np.testing.assert_allclose(kept.draws["theta"], alone.draws["theta"])


def test_reparam_noncentre_forces_it_for_any_method_and_none_refuses_it():
    model = _model(EIGHT_SCHOOLS, SCHOOLS)
    forced = fit(model, method="advi", reparam="noncentre", iterations=2000)
    assert [lat.name for lat in forced.model.latents] == ["mu", "tau", "theta_raw"]
    assert list(forced.draws) == ["mu", "tau", "theta", "first"]
    np.testing.assert_allclose(forced.draws["first"], forced.draws["theta"][:, 0])
    with pytest.raises(ModelError, match="--reparam"):
        fit(model, reparam="sideways")
