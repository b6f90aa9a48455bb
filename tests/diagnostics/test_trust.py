"""Guards against silent wrong answers (ppl.diagnostics.trust, ppl.outputs.record.ended_by; issue
23): improper
posteriors, runaway or collapsed q, exploding ELBOs and a truthful "ended by"."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ppl.diagnostics.trust import check_result
from ppl.errors import FitError
from tests.cli.test_cli import run_main

ROOT = Path(__file__).resolve().parents[2]
SCHOOLS = ROOT / "models" / "eight_schools"
ARMA = ROOT / "models" / "posteriordb" / "arma-arma11"


def _fake(elbo, draws, trace=(), converged=True, support="real"):
    """A fit result as ppl.diagnostics.trust reads it: q's ELBO and trace, latents and their
    draws."""
    latents = [SimpleNamespace(name=n, binary=False, hyper=False, support=support) for n in draws]
    vi = SimpleNamespace(elbo=elbo, elbo_trace=list(trace), converged=converged)
    return SimpleNamespace(vi=vi, draws=draws, model=SimpleNamespace(latents=latents),
                           warnings=[], doubts=[], rule_met=None)  # fmt: skip


def test_improper_posteriors_are_refused(tmp_path):
    """Flat priors and no data: exit 0 with mean inf and k-hat "usable" before."""
    model = tmp_path / "flat.model"
    model.write_text("parameters { real mu; real<lower=0> sigma; real<lower=0, upper=1> p; }\n"
                     "model { }\n")  # fmt: skip
    for method in ("auto", "advi", "dsvi"):
        rc, _, err = run_main(["fit", str(model), "--method", method])
        assert rc == 2 and "improper posterior" in err and "'mu' (line 1), 'sigma'" in err
        assert "'p'" not in err  # uniform on (0, 1): proper


def test_infinite_draws_are_an_error_that_says_why():
    rng = np.random.default_rng(0)
    sigma = np.exp(rng.normal(size=1000))
    sigma[::50] = np.inf  # exp overflowed
    with pytest.raises(FitError, match="draws of sigma are infinite: q ran off to infinity"):
        check_result(_fake(-3.0, {"mu": rng.normal(size=1000), "sigma": sigma}))


def test_exploding_collapsed_or_worse_than_its_start_is_not_converged():
    rng = np.random.default_rng(1)
    fine = _fake(-10.0, {"mu": rng.normal(size=100)}, trace=[(0, -50.0), (100, -10.2)])
    check_result(fine)
    assert fine.vi.converged and not fine.doubts
    worse = _fake(-80.0, {"mu": rng.normal(size=100)}, trace=[(0, -50.0), (100, -79.0)])
    check_result(worse)
    assert not worse.vi.converged and worse.rule_met
    assert "below its start (-50)" in worse.warnings[0]
    huge = _fake(-2.5e59, {"mu": 4.0 + 1e-15 * rng.normal(size=100)})
    check_result(huge)
    assert not huge.vi.converged
    assert "ELBO is -2.5e+59" in huge.doubts[0] and "collapsed to a point for mu" in huge.doubts[1]


def test_a_capped_stochastic_fit_says_so_under_the_polish():
    """--iter 50: the header said "ended by the stopping rule" while stderr said the cap was hit."""
    rc, out, err = run_main(["fit", str(SCHOOLS / "noncentered.model"),
                             str(SCHOOLS / "eight_schools.json"), "--method", "advi", "--iter",
                             "50", "--draws", "100"])  # fmt: skip
    assert rc == 0, err
    assert "ended by: the iteration cap (--iter 50); the deterministic polish then" in out
    assert "stopping rule" not in out


@pytest.mark.slow
def test_arma11_under_advi_is_not_reported_converged(tmp_path):
    """posteriordb arma11: "converged" with sds of 1e-14 and an ELBO of -2.5e59 before."""
    rc, out, err = run_main(["fit", str(ARMA / "model.stan"), str(ARMA / "data.json"),
                             "--method", "advi", "--draws", "200", "--output",
                             str(tmp_path / "out")])  # fmt: skip
    assert rc == 0, err
    assert "(NOT converged)" in out and "but NOT converged" in out
    assert "not converged: the ELBO is" in err and "collapsed to a point" in err
    info = json.loads((tmp_path / "out" / "fit.json").read_text())
    assert info["converged"] is False and info["psis"]["verdict"] == "not reliable"


def test_a_non_identified_posterior_is_named_improper_and_a_badly_scaled_one_is_not():
    """`y ~ normal(a + b, 1)` without priors: flat along a - b, so improper; its fit says so
    (the parameters named) and is not converged. A regression on unscaled data (sd 20,000,
    predictor near 170) has curvatures 1e-12 apart, but none flat: no such warning."""
    from ppl.language.checker import check
    from ppl.language.parser import parse
    from ppl.pipeline import fit
    from ppl.runtime.compiler import CompiledModel

    text = """data { int N; vector[N] y; } parameters { real a; real b; }
              model { y ~ normal(a + b, 1); }"""
    model = CompiledModel(check(parse(text, "n.stan")), {"N": 3, "y": np.array([1.0, 2, 3])})
    result = fit(model, "auto", seed=1)
    (flat,) = [w for w in result.warnings if "flat at its mode" in w]
    assert "of a, b:" in flat and "improper" in flat and not result.vi.converged
    rng = np.random.default_rng(0)
    x = rng.normal(170, 10, 200)
    y = -60000 + 500 * x + rng.normal(0, 20000, 200)
    text = """data { int N; vector[N] x; vector[N] y; }
              parameters { real a; real b; real<lower=0> s; }
              model { y ~ normal(a + b * x, s); }"""
    scaled = fit(CompiledModel(check(parse(text, "e.stan")), {"N": 200, "x": x, "y": y}),
                 "auto", seed=1)  # fmt: skip
    assert not any("flat at its mode" in w for w in scaled.warnings)
