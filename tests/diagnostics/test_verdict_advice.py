"""The advice of a "not reliable" warning never repeats what the fit already did (issue 31, issue
34): no full-rank family after a dense q or after the road tried a Gaussian with correlations
and kept the factorised one; no non-centring after the road non-centred the model or found its
non-centred refit worse."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from ppl.diagnostics.verdict import _advice, unreliable_text
from ppl.ir.passes.noncentre import NAME as NONCENTRE

ROOT = Path(__file__).resolve().parents[2]
FULL_RANK = "--method fullrank"
NON_CENTRE = "non-centred scales"


def result(passes=(), **diagnostics):
    model = SimpleNamespace(ir=SimpleNamespace(passes=tuple(passes)))
    return SimpleNamespace(model=model, diagnostics=diagnostics)


def test_a_factorised_q_nothing_tried_gets_both():
    advice = _advice(result(q_blocks=3))
    assert FULL_RANK in advice and "NUTS" in advice


def test_no_full_rank_after_a_dense_q_or_after_one_was_tried():
    dense = _advice(result(q_blocks=1))
    assert FULL_RANK not in dense and "already followed every correlation" in dense
    tried = _advice(result(q_blocks=2, correlations_tried=True))
    assert FULL_RANK not in tried and "fitted too and was not better" in tried
    assert NON_CENTRE in tried  # the model was not non-centred: that advice stands


def test_no_non_centring_after_the_road_did_it_or_found_it_worse():
    done = _advice(result(passes=("optimise", NONCENTRE), q_blocks=1))
    assert NON_CENTRE not in done and "was non-centred" in done and FULL_RANK not in done
    worse = _advice(result(q_blocks=2, correlations_tried=True, noncentring_tried=True))
    assert NON_CENTRE not in worse and FULL_RANK not in worse
    assert "non-centred refit was not better" in worse
    assert "better-identified parameters" in worse  # what is left to try


def test_the_warning_names_the_faults_then_the_advice():
    r = result(q_blocks=2, correlations_tried=True)
    r.diagnostics["faults"] = [{"parameters": ["tau"], "how": "too narrow", "detail": "d"}]
    text = unreliable_text(r)
    assert text.startswith("the fit is not reliable: tau: too narrow (d). ")
    assert FULL_RANK not in text


def test_the_road_records_what_it_tried():
    """The noncentred eight schools (models/hard) by default: the road tries the linear-response
    covariance (not better) and then keeps the collapse, and says so to the advice."""
    from ppl.data.build import build
    from ppl.pipeline import fit

    folder = ROOT / "models" / "hard" / "eight_schools_noncentered"
    model = build(str(folder / "model.stan"), [str(folder / "data.json")], seed=1)
    result = fit(model, "auto", seed=1, draws=4000)
    assert result.diagnostics.get("correlations_tried")
    assert any("linear-response covariance" in n and "not better" in n for n in result.notes)
    assert FULL_RANK not in _advice(result)
