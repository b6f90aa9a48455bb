"""Guards against silent wrong answers (ppl.trust, ppl.report.ended_by; issue 23): improper
posteriors, runaway or collapsed q, exploding ELBOs and a truthful "ended by"."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ppl.errors import FitError
from ppl.trust import check_result
from tests.test_cli import run_main

ROOT = Path(__file__).resolve().parent.parent
SCHOOLS = ROOT / "models" / "eight_schools"
ARMA = ROOT / "models" / "posteriordb" / "arma-arma11"


def _fake(elbo, draws, trace=(), converged=True, support="real"):
    """A fit result as ppl.trust reads it: q's ELBO and trace, latents and their draws."""
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
