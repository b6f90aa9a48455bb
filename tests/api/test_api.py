"""The Python API (ppl.Model, ppl.Fit): the same numbers as `ppl fit`, data from Python values and
DataFrames checked as files are, CmdStan-style draws, and ArviZ output."""

from __future__ import annotations

import csv
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import ppl
from ppl.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHOOLS = ROOT / "models" / "eight_schools"
NONCENTERED = SCHOOLS / "noncentered.model"
Y = np.array([28, 8, -3, 7, -1, 1, 18, 12.0])
SIGMA = np.array([15, 10, 16, 11, 9, 11, 10, 18.0])

# a Poisson regression with an int generated quantity and a log_lik vector (for az.loo)
POISSON = """
data { int<lower=0> N; vector[N] x; array[N] int<lower=0> y; }
parameters { real a; real b; }
model { a ~ normal(0, 2); b ~ normal(0, 2); y ~ poisson_log(a + b * x); }
generated quantities {
  array[N] int y_rep;
  vector[N] log_lik;
  for (n in 1:N) {
    y_rep[n] = poisson_log_rng(a + b * x[n]);
    log_lik[n] = poisson_log_lpmf(y[n] | a + b * x[n]);
  }
}
"""


def _poisson_data(seed=0, n=40):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return {"N": n, "x": x, "y": rng.poisson(np.exp(0.5 + 0.8 * x))}


@pytest.fixture(scope="module")
def schools():
    return ppl.Model.from_file(NONCENTERED)


def test_api_and_cli_give_identical_files(schools, tmp_path):
    """Same defaults, same seed: byte-identical summary.csv and draws.csv."""
    data = str(SCHOOLS / "eight_schools.json")
    assert main(["fit", str(NONCENTERED), data, "--output", str(tmp_path / "cli"), "--quiet"]) == 0
    schools.fit(SCHOOLS / "eight_schools.json").save(tmp_path / "api")
    for name in ("summary.csv", "draws.csv", "elbo.csv"):
        assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "api" / name).read_bytes()
    cli, api = (json.loads((tmp_path / d / "fit.json").read_text()) for d in ("cli", "api"))
    for key in ("elbo", "psis", "families", "variational_parameters", "gradient_evaluations"):
        assert cli[key] == api[key]


def test_data_from_dict_dataframe_and_file_agree(schools):
    pd = pytest.importorskip("pandas")
    from_dict = schools.fit({"J": 8, "y": Y, "sigma": SIGMA.tolist()})
    from_frame = schools.fit(pd.DataFrame({"y": Y, "sigma": SIGMA}))  # J from the rows
    from_file = schools.fit(str(SCHOOLS / "eight_schools.csv"))
    for other in (from_frame, from_file):
        np.testing.assert_array_equal(from_dict.draws("theta"), other.draws("theta"))
    assert from_dict.draws("theta").shape == (1000, 8)
    assert set(from_dict.stan_variables()) == {"mu", "tau", "theta_trans", "theta", "y_rep"}


def test_one_model_many_datasets():
    """Compiled once: each fit sees its own data (the slope's sign follows the data)."""
    model = ppl.Model(POISSON, "poisson.stan")
    slopes = []
    for sign in (1, -1):
        data = _poisson_data()
        data["y"] = np.random.default_rng(1).poisson(np.exp(0.5 + sign * 0.8 * data["x"]))
        slopes.append(model.fit(data).summary().loc["b", "mean"])
    assert slopes[0] > 0.4 and slopes[1] < -0.4


def test_errors_are_ppl_errors_with_the_cli_message(schools):
    with pytest.raises(ppl.PplError, match=r"y has length 8 in the data dict but J = 7"):
        schools.fit({"J": 7, "y": Y, "sigma": SIGMA})
    with pytest.raises(ppl.PplError, match=r"y\[2\]: the string 'x' is not a number"):
        schools.fit({"J": 8, "y": [1.0, "x", 3, 4, 5, 6, 7, 8], "sigma": SIGMA})
    with pytest.raises(ppl.PplError, match=r"object values"):
        schools.fit({"J": 8, "y": np.array([object()] * 8), "sigma": SIGMA})
    with pytest.raises(ppl.PplError, match="no variable 'beta'"):
        schools.fit({"J": 8, "y": Y, "sigma": SIGMA}).draws("beta")
    with pytest.raises(ppl.PplError, match=r"<model>:1:\d+: syntax error"):
        ppl.Model("parameters { real x }")


def test_summary_columns_and_mcse(schools):
    fit = schools.fit({"J": 8, "y": Y, "sigma": SIGMA})
    table = fit.summary()
    assert list(table.columns) == ["mean", "mcse", "sd", "q5", "q50", "q95"]
    theta = fit.draws("theta")
    # the road ends at the collapse: the summaries are quadrature over its grid (no Monte Carlo
    # error), which the draws agree with to theirs
    se = theta[:, 2].std(ddof=1) / np.sqrt(len(theta))
    assert abs(table.loc["theta[3]", "mean"] - theta[:, 2].mean()) < 4 * se
    assert table.loc["theta[3]", "mcse"] == 0.0
    assert "exact given q's grid (quadrature)" in str(fit)
    assert fit.khat == fit.diagnostics["khat"] and np.isfinite(fit.elbo)
    # the road ends at the collapse: mu and theta integrated out, a grid on log tau
    assert fit.elbo_trace.shape[1] == 2 and fit.families["tau"].startswith("piecewise-constant")
    assert fit.families["theta_trans"].startswith("exact Gaussian conditional")
    assert "PSIS k-hat" in str(fit) and "theta[8]" in str(fit)


def test_draws_csv_is_cmdstan_like(tmp_path):
    """lp__, log_p__, log_g__ first; ints written as ints; log_p__ - log_g__ averages to the
    ELBO the fit reports from these draws."""
    fit = ppl.Model(POISSON, "poisson.stan").fit(_poisson_data())
    fit.save(tmp_path)
    with open(tmp_path / "draws.csv", newline="") as f:
        rows = list(csv.reader(line for line in f if not line.startswith("#")))
    header, body = rows[0], rows[1:]
    assert header[:5] == ["lp__", "log_p__", "log_g__", "a", "b"]
    assert all(r[0] == "0" for r in body)
    y_rep = header.index("y_rep.1")
    assert all(r[y_rep].lstrip("-").isdigit() for r in body)
    lp, lg = (np.array([float(r[j]) for r in body]) for j in (1, 2))
    assert np.mean(lp - lg) == pytest.approx(fit.diagnostics["elbo"], rel=1e-12)


def test_to_arviz_groups_shapes_and_loo(tmp_path):
    pytest.importorskip("arviz")
    import arviz as az

    fit = ppl.Model(POISSON, "poisson.stan").fit(_poisson_data())
    idata = fit.to_arviz()
    assert idata.posterior["b"].shape == (1, 1000)
    assert idata.posterior["y_rep"].shape == (1, 1000, 40)
    assert idata.log_likelihood["log_lik"].shape == (1, 1000, 40)
    np.testing.assert_array_equal(idata.posterior["y_rep"].values[0], fit.draws("y_rep"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loo = az.loo(idata, var_name="log_lik")
    assert np.isfinite(loo.elpd_loo)
    # the documented reader of a fit directory gives the same variables and shapes
    fit.save(tmp_path)
    again = ppl.to_arviz(tmp_path)
    for name in ("a", "b", "y_rep"):
        np.testing.assert_allclose(again.posterior[name].values, idata.posterior[name].values)
    matrix = ppl.Model.from_file(NONCENTERED).fit({"J": 8, "y": Y, "sigma": SIGMA})
    matrix.save(tmp_path / "schools")
    assert ppl.to_arviz(tmp_path / "schools").posterior["theta"].shape == (1, 1000, 8)
