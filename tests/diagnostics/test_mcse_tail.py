"""The summaries' own Monte Carlo reliability (ppl.diagnostics.mcse_tail): the vectorised
generalized Pareto fit against PSIS's own, the sd's k-hat on distributions whose tails are known,
and the verdict naming the scalars of a fit whose q is exact but whose draws cannot give the sd
(Neal's funnel)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

import ppl
from ppl.data.build import build
from ppl.diagnostics.mcse_tail import (
    SD_KHAT,
    TAIL_SD,
    gpd_shape,
    scalar_columns,
    summary_tail_faults,
    tail_khats,
)
from ppl.diagnostics.psis import fit_generalized_pareto
from ppl.diagnostics.verdict import unreliable_text
from ppl.errors import UnreliableFitWarning
from ppl.pipeline import fit

ROOT = Path(__file__).resolve().parents[2]
S = 4000


def test_vectorised_fit_is_psis_fit_column_by_column():
    rng = np.random.default_rng(0)
    tails = np.sort(np.abs(rng.standard_t(2, size=(191, 40))) * rng.uniform(0.1, 10, 40), axis=0)
    exceed = tails[1:] - tails[:1]
    exceed[:60, 0] = 0.0  # ties at the cutoff: fitted on the positive exceedances, as PSIS
    k = gpd_shape(exceed)
    ref = [fit_generalized_pareto(exceed[exceed[:, j] > 0, j])[0] for j in range(40)]
    np.testing.assert_allclose(k, ref, rtol=0, atol=1e-12)


def test_columns_without_a_tail_are_not_judged():
    rng = np.random.default_rng(1)
    matrix = np.column_stack([
        np.ones(S),  # constant
        (rng.uniform(size=S) < 0.3).astype(float),  # binary
        rng.poisson(0.5, S).astype(float),  # a few distinct values
        np.r_[np.inf, rng.normal(size=S - 1)],  # not finite
    ])  # fmt: skip
    k = tail_khats(matrix)
    assert np.all(np.isnan(k["sd"][[0, 1, 3]])) and np.all(np.isnan(k["mean"][[0, 1, 3]]))
    assert k["sd"][2] < 0  # a few atoms, each a tie: a bounded tail


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exact_draws_of_light_tails_pass(seed):
    """A normal, a gamma(2) (conjugate posteriors), eight-schools-like scales: never flagged."""
    rng = np.random.default_rng(seed)
    draws = {"mu": rng.normal(3, 2, S), "lam": rng.gamma(2.0, 1.0, (S, 3)),
             "log_tau": rng.normal(1, 1, S)}  # fmt: skip
    faults, info = summary_tail_faults(draws)
    assert faults == [] and info["scalars"] == 5 and info["max_khat_sd"] < 0.5


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_student_t_3_is_not_flagged_and_no_finite_variance_is(seed):
    """t(3) has a finite variance: its sd from 4000 draws was within [0.8, 1.25] of sqrt(3) in
    99 % of 300 replicates, and k-hat of (y - mean)^2 (about 2/3) stays under SD_KHAT. A
    t(1.5) or a half-Cauchy has none: its sd is no estimate of anything, and it is flagged."""
    rng = np.random.default_rng(seed)
    t3, t15, hc = rng.standard_t(3, S), rng.standard_t(1.5, S), np.abs(rng.standard_cauchy(S))
    k = tail_khats(np.column_stack([t3, t15, hc]))
    assert k["sd"][0] < SD_KHAT < min(k["sd"][1:])
    assert k["mean"][0] < 0.5
    faults, _ = summary_tail_faults({"t3": t3, "t15": t15, "hc": hc})
    assert [f["parameters"] for f in faults] == [["t15", "hc"]]


def test_equal_weights_are_the_plain_draws():
    rng = np.random.default_rng(4)
    matrix = rng.standard_t(4, (S, 3))
    plain, weighted = tail_khats(matrix), tail_khats(matrix, np.zeros(S))
    np.testing.assert_allclose(plain["sd"], weighted["sd"], atol=1e-10)


def test_scalars_summarised_otherwise_are_exempt():
    rng = np.random.default_rng(5)
    v = rng.normal(0, 3, S)
    x = np.exp(v / 2)[:, None] * rng.normal(size=(S, 4))
    names = scalar_columns({"v": v, "x": x})[1]
    assert names == ["v", "x[1]", "x[2]", "x[3]", "x[4]"]
    faults, _ = summary_tail_faults({"v": v, "x": x})
    assert faults and faults[0]["parameters"] == ["x"] and faults[0]["how"].startswith(TAIL_SD)
    assert summary_tail_faults({"v": v, "x": x}, not_from_draws=["x"])[0] == []
    some = summary_tail_faults({"v": v, "x": x}, not_from_draws=faults[0]["scalars"])[0]
    assert some == []  # element names too


#: Neal's funnel written non-centred, fitted by ADVI (a named method: no collapse, whose exact
#: summaries `auto` uses for it): its mean-field q is the posterior, its draws' sds of x are not.
FUNNEL = """
parameters { real v; vector[9] x_raw; }
transformed parameters { vector[9] x = exp(v / 2) * x_raw; }
model { v ~ normal(0, 3); x_raw ~ normal(0, 1); }
"""


def _funnel_named(result) -> None:
    """q exact (k-hat good), the verdict names x (not v), advice about the summaries."""
    diag = result.diagnostics
    assert diag["khat"] <= 0.5 and diag["verdict"] == "not reliable"
    tail = [f for f in diag["faults"] if f["how"].startswith(TAIL_SD)]
    assert len(tail) == 1 and tail[0]["parameters"] == ["x"]
    assert "v" not in tail[0]["scalars"] and "x[" in tail[0]["detail"]
    text = unreliable_text(result)
    assert "q itself fits" in text and "quantiles" in text
    assert "--method fullrank" not in text and "more draws will not" in text


@pytest.mark.parametrize("seed", [2, 3])
def test_the_funnel_fitted_exactly_is_named(seed, tmp_path):
    """q is exact (k-hat 0) but the sd of x from 4000 draws was 0.65-1.2x exp(9/4) over six
    seeds."""
    (tmp_path / "funnel.stan").write_text(FUNNEL)
    model = build(str(tmp_path / "funnel.stan"), [], seed=seed)
    _funnel_named(fit(model, "advi", seed=seed, draws=S))


def test_the_funnel_said_alike_by_the_api_and_its_report(tmp_path):
    """Seed 1 through the API: one UnreliableFitWarning naming x, fit.faults, the report's
    verdict line."""
    (tmp_path / "funnel.stan").write_text(FUNNEL)
    model = ppl.Model.from_file(tmp_path / "funnel.stan")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        api = model.fit(method="advi", seed=1, draws=S)
    _funnel_named(api.result)
    said = [str(w.message) for w in caught if issubclass(w.category, UnreliableFitWarning)]
    assert len(said) == 1 and f"x: {TAIL_SD} for {S} draws" in said[0]
    assert said[0] in api.warnings and api.faults == api.result.diagnostics["faults"]
    assert f"verdict: not reliable (x: {TAIL_SD} for {S} draws)" in api.report().splitlines()


def test_advice_for_the_summaries_and_for_q_each_where_due():
    """A tail fault alone: advice about the summaries (not another q, not more draws); with a
    fault of q as well: both."""
    from types import SimpleNamespace

    tail = {"parameters": ["x"], "how": f"{TAIL_SD} for 4000 draws", "detail": "d"}
    narrow = {"parameters": ["a"], "how": "too narrow", "detail": "e"}
    model = SimpleNamespace(ir=SimpleNamespace(passes=()))
    alone = SimpleNamespace(model=model, diagnostics={"khat": 0.1, "q_blocks": 3,
                                                      "faults": [tail]})  # fmt: skip
    text = unreliable_text(alone)
    assert text.startswith(f"the fit is not reliable: x: {TAIL_SD} for 4000 draws (d). ")
    assert "q itself fits (k-hat 0.10)" in text and "--method fullrank" not in text
    both = SimpleNamespace(model=model, diagnostics={"khat": 0.1, "q_blocks": 3,
                                                     "faults": [narrow, tail]})  # fmt: skip
    text = unreliable_text(both)
    assert "--method fullrank" in text and "q itself fits" not in text and "quantiles" in text
