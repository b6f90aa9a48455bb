"""The hard-posterior suite (models/hard): every reference is well formed, names exactly the
model's parameters, and the exact ones match their closed forms recomputed here (so a stored
number cannot silently rot)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from ppl.data.build import build
from ppl.outputs.summary import flatten_draws

ROOT = Path(__file__).resolve().parents[2]
HARD = ROOT / "models" / "hard"
PROBLEMS = sorted(p.name for p in HARD.iterdir() if (p / "model.stan").exists())
STATS = ("mean", "sd", "q05", "q50", "q95")
PROBS = {"q05": 0.05, "q50": 0.5, "q95": 0.95}


def reference(name: str) -> dict:
    return json.loads((HARD / name / "reference.json").read_text())


def data(name: str) -> dict:
    return json.loads((HARD / name / "data.json").read_text())


def test_the_suite_has_the_problems_of_issue_31():
    assert len(PROBLEMS) >= 12
    for name in ("eight_schools_centered", "neal_funnel_10d", "truncated_normal",
                 "measurement_error", "mixture_two_modes", "zip_regression"):  # fmt: skip
        assert name in PROBLEMS
    readme = (HARD / "README.md").read_text()
    for name in PROBLEMS:
        assert f"`{name}`" in readme, f"models/hard/README.md does not list {name}"


@pytest.mark.parametrize("name", PROBLEMS)
def test_reference_is_well_formed_and_names_exactly_the_parameters(name):
    ref = reference(name)
    assert ref["model"] == f"models/hard/{name}/model.stan"
    assert ref["reference_method"] in ("exact", "NUTS")
    assert "hard_references.py" in ref["command"] and ref["source"]
    params = ref["parameters"]
    assert ref["n_params"] == len(params)
    for pname, s in params.items():
        assert all(np.isfinite(s[k]) for k in STATS), pname
        assert s["sd"] > 0 and s["q05"] <= s["q50"] <= s["q95"], pname
    if ref["reference_method"] == "NUTS":
        d = ref["diagnostics"]
        assert d["max_rhat"] <= 1.01 and d["min_ess_bulk"] >= 2000
        assert d["log_density_check_spread"] < 1e-6
    # the parameters block's elements as ppl's summaries name them; elements a constraint fixes
    # (a Cholesky correlation factor's first row) are the same at two random points, and left out
    model = build(str(HARD / name / "model.stan"), [str(HARD / name / "data.json")])
    rng = np.random.default_rng(0)
    drawn = model.constrained_draws(rng.normal(size=(2, model.dim)), rng)
    names, matrix = flatten_draws({k: drawn[k] for k in model.checked.names_in("parameters")})
    varying = [n for n, col in zip(names, matrix.T, strict=True) if col[0] != col[1]]
    assert list(params) == varying


def check(stored: dict, mean: float, sd: float, cdf=None, rel: float = 1e-9):
    assert stored["mean"] == pytest.approx(mean, rel=rel, abs=1e-12)
    assert stored["sd"] == pytest.approx(sd, rel=rel)
    if cdf is not None:
        for key, p in PROBS.items():
            assert cdf(stored[key]) == pytest.approx(p, abs=1e-7), key


def test_normal_known_sigma_is_the_conjugate_normal():
    d, ref = data("normal_known_sigma"), reference("normal_known_sigma")["parameters"]
    y, s = np.array(d["y"]), d["sigma"]
    var = 1 / (1 / 100 + len(y) / s**2)
    m = var * np.sum(y) / s**2
    check(ref["mu"], m, np.sqrt(var), stats.norm(m, np.sqrt(var)).cdf)


def test_beta_binomial_is_the_conjugate_beta():
    d, ref = data("beta_binomial"), reference("beta_binomial")["parameters"]
    a, b = 2 + sum(d["k"]), 2 + sum(d["n"]) - sum(d["k"])
    sd = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    check(ref["theta"], a / (a + b), sd, stats.beta(a, b).cdf)


def test_gamma_poisson_is_the_conjugate_gamma():
    d, ref = data("gamma_poisson"), reference("gamma_poisson")["parameters"]
    a, b = 2 + sum(d["y"]), 0.5 + d["N"]
    check(ref["lambda"], a / b, np.sqrt(a) / b, stats.gamma(a, scale=1 / b).cdf)


def test_gamma_tiny_shape():
    ref = reference("gamma_tiny_shape")["parameters"]["lambda"]
    check(ref, 0.01 / 1.01, 0.1 / 1.01)
    assert ref["mean"] == pytest.approx(0.0099, abs=1e-4)
    assert ref["sd"] == pytest.approx(0.099, abs=1e-3)
    # the quantiles through the regularised incomplete gamma function
    from scipy.special import gammainc

    for key, p in PROBS.items():
        assert gammainc(0.01, 1.01 * ref[key]) == pytest.approx(p, rel=1e-6)


def test_uncentred_regression_is_the_gaussian_posterior():
    d, ref = data("uncentred_regression"), reference("uncentred_regression")["parameters"]
    x, y = np.array(d["x"]), np.array(d["y"])
    n, sx, sxx = len(x), x.sum(), (x * x).sum()
    prec = np.array([[n + 0.01, sx], [sx, sxx + 0.01]])
    det = prec[0, 0] * prec[1, 1] - sx * sx
    cov = np.array([[prec[1, 1], -sx], [-sx, prec[0, 0]]]) / det
    m = cov @ np.array([y.sum(), (x * y).sum()])
    assert cov[0, 1] / np.sqrt(cov[0, 0] * cov[1, 1]) < -0.85
    for j, name in enumerate(("a", "b")):
        sd = np.sqrt(cov[j, j])
        check(ref[name], m[j], sd, stats.norm(m[j], sd).cdf)


def test_mixture_two_modes():
    ref = reference("mixture_two_modes")["parameters"]["x"]

    def cdf(t):
        return 0.5 * stats.norm.cdf(t + 10) + 0.5 * stats.norm.cdf(t - 10)

    check(ref, 0.0, np.sqrt(101.0), cdf)


def test_neal_funnel_10d():
    ref = reference("neal_funnel_10d")["parameters"]
    check(ref["v"], 0.0, 3.0, stats.norm(0, 3).cdf)

    def cdf(t):  # P(x <= t) = E_v Phi(t / exp(v / 2)), over v's standard normal z = v / 3
        f = lambda z: stats.norm.cdf(t * np.exp(-1.5 * z)) * stats.norm.pdf(z)  # noqa: E731
        return integrate.quad(f, -12, 12, limit=200)[0]

    for i in range(1, 10):  # var x = E exp(v) = exp(9/2)
        check(ref[f"x[{i}]"], 0.0, np.exp(4.5) ** 0.5, cdf if i == 1 else None)
        assert ref[f"x[{i}]"] == ref["x[1]"]


def _script():
    spec = importlib.util.spec_from_file_location(
        "hard_references", ROOT / "benchmarks" / "reference" / "hard_references.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize("name", ["eight_schools_centered", "truncated_normal", "mvn_lkj",
                                  "stochastic_volatility", "zip_regression"])  # fmt: skip
def test_numpyro_restatement_matches_the_stan_program(name):
    """The NUTS references sample NumPyro models written by hand: their log density is ppl's up
    to a constant (one per problem class: funnel, truncation, LKJ, time series, mixture)."""
    pytest.importorskip("numpyro")
    assert _script().log_density_check(name) < 1e-6


def test_data_are_the_seeded_simulations():
    """data.json is what the script's fixed seeds make (a rerun writes the same data)."""
    script = _script()
    for name in PROBLEMS:
        assert json.loads(json.dumps(script.PROBLEMS[name].data())) == data(name), name
