"""draws.csv round trip over every variable shape (issue 34): fit -> draws.csv -> pandas,
ppl.to_arviz(DIR), ArviZ's from_cmdstan and `ppl plot`, each giving back the names, shapes,
values and integer types of fit.stan_variables()."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import ppl
from ppl.errors import PplError, PplWarning
from ppl.outputs.stancsv import bracket_name, csv_names, element, read_draws
from ppl.outputs.summary import scalar_names
from tests.cli.test_cli import run_main

#: One variable of every shape a Stan program declares, in every block that writes draws.
SHAPES = """
data { int N; vector[N] y; }
parameters {
  real mu;
  real<lower=0> sigma;
  vector[3] v;
  row_vector[2] rv;
  matrix[2, 3] W;
  array[2] vector[3] av;
  array[2] matrix[2, 2] am;
  array[2, 2] real ar;
  corr_matrix[3] Omega;
  cov_matrix[2] S;
  cholesky_factor_corr[3] Lc;
  cholesky_factor_cov[3, 2] Lv;
  simplex[3] s;
}
transformed parameters {
  vector[3] tv = v * 2;
  matrix[3, 2] tW = W';
}
model {
  mu ~ normal(0, 1);
  sigma ~ lognormal(0, 0.5);
  v ~ normal(0, 1);
  rv ~ normal(0, 1);
  to_vector(W) ~ normal(0, 1);
  for (i in 1:2) {
    av[i] ~ normal(0, 1);
    to_vector(am[i]) ~ normal(0, 1);
    ar[i] ~ normal(0, 1);
  }
  Omega ~ lkj_corr(2);
  S ~ wishart(4, identity_matrix(2));
  Lc ~ lkj_corr_cholesky(2);
  to_vector(Lv) ~ normal(0, 1);
  y ~ normal(mu, sigma);
}
generated quantities {
  int k = poisson_rng(3);
  array[2, 3] int ki;
  corr_matrix[3] G = multiply_lower_tri_self_transpose(Lc);
  cholesky_factor_cov[2] LS = cholesky_decompose(S);
  vector[N] log_lik;
  for (i in 1:2) for (j in 1:3) ki[i, j] = 10 * i + j;
  for (n in 1:N) log_lik[n] = normal_lpdf(y[n] | mu, sigma);
}
"""
DATA = {"N": 4, "y": [0.1, -0.3, 0.5, 1.2]}
INTS = {"k", "ki"}


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A quick fit (the shapes matter here, not the accuracy) and the directory it saved."""
    out = tmp_path_factory.mktemp("shapes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PplWarning)
        fit = ppl.Model(SHAPES, "shapes.stan").fit(
            DATA, method="advi", iterations=20, eta=0.1, refine_draws=0, draws=50, seed=3
        )
    fit.save(out / "fit")
    return fit, out / "fit"


def _stan_order(arr: np.ndarray) -> np.ndarray:
    """(draws, elements) in Stan's element order (first index fastest)."""
    return np.transpose(arr, (0, *reversed(range(1, arr.ndim)))).reshape(arr.shape[0], -1)


def test_every_shape_is_declared(fitted):
    fit, _ = fitted
    shapes = {name: v.shape[1:] for name, v in fit.stan_variables().items()}
    assert shapes == {
        "mu": (), "sigma": (), "v": (3,), "rv": (2,), "W": (2, 3), "av": (2, 3),
        "am": (2, 2, 2), "ar": (2, 2), "Omega": (3, 3), "S": (2, 2), "Lc": (3, 3),
        "Lv": (3, 2), "s": (3,), "tv": (3,), "tW": (3, 2), "k": (), "ki": (2, 3),
        "G": (3, 3), "LS": (2, 2), "log_lik": (4,),
    }  # fmt: skip
    assert {n for n, v in fit.stan_variables().items() if v.dtype.kind == "i"} == INTS


def test_pandas_reads_cmdstan_names_and_values(fitted):
    pd = pytest.importorskip("pandas")
    fit, out = fitted
    frame = pd.read_csv(out / "draws.csv", comment="#")  # CmdStan's configuration lines
    variables = fit.stan_variables()
    expected = [n for name, v in variables.items() for n in csv_names(name, v.shape[1:])]
    assert list(frame.columns) == ["lp__", "log_p__", "log_g__", *expected]
    assert "W.1.2" in frame.columns and "am.2.1.2" in frame.columns  # CmdStan's own names
    for name, v in variables.items():
        columns = frame[csv_names(name, v.shape[1:])]
        np.testing.assert_array_equal(columns.to_numpy(), _stan_order(v))  # exact round trip
        assert (columns.dtypes.map(lambda d: d.kind) == ("i" if name in INTS else "f")).all()
    summary = pd.read_csv(out / "summary.csv", index_col=0)
    assert list(summary.index) == list(fit.summary().index)
    assert list(summary.index[7:13]) == scalar_names("W", (2, 3))  # `W[1,2]`, quoted


def _assert_stan_variables(idata, variables: dict) -> None:
    """idata holds exactly the fit's variables (log_lik as its log-likelihood group), with
    their shapes, kinds and values."""
    assert set(idata.posterior.data_vars) == set(variables) - {"log_lik"}
    for name, v in variables.items():
        group = idata.log_likelihood if name == "log_lik" else idata.posterior
        got = group[name].values[0]
        assert got.shape == v.shape and got.dtype.kind == v.dtype.kind, name
        np.testing.assert_array_equal(got, v)


def test_ppl_to_arviz_gives_stan_variables(fitted):
    pytest.importorskip("arviz")
    fit, out = fitted
    idata = ppl.to_arviz(out)
    _assert_stan_variables(idata, fit.stan_variables())
    # the same groups as the in-memory fit's
    direct = fit.to_arviz()
    assert set(idata.groups()) == set(direct.groups())
    np.testing.assert_array_equal(idata.sample_stats["log_p"], direct.sample_stats["log_p"])


def test_arviz_from_cmdstan_reads_the_file(fitted):
    az = pytest.importorskip("arviz")
    fit, out = fitted
    idata = az.from_cmdstan(str(out / "draws.csv"), dtypes={name: int for name in INTS})
    _assert_stan_variables(idata, fit.stan_variables())
    assert {"lp", "log_p", "log_g"} <= set(idata.sample_stats.data_vars)


def test_ppl_plot_draws_every_variable(fitted, tmp_path):
    pytest.importorskip("matplotlib")
    fit, out = fitted
    reference = tmp_path / "ref.json"  # posteriordb names elements as Stan prints them
    reference.write_text(json.dumps({"mean": {"W[1,2]": 0.0}, "sd": {"W[1,2]": 1.0}}))
    rc, printed, err = run_main(["plot", str(out), "--reference", str(reference)])
    assert rc == 0, err
    written = {line.rsplit("/", 1)[-1] for line in printed.splitlines()}
    assert written == {"elbo.png", *(f"{name}.png" for name in fit.stan_variables())}


def test_reader_keeps_order_shapes_and_ints(fitted):
    fit, out = fitted
    draws = read_draws(out)
    variables = fit.stan_variables()
    assert list(draws.variables) == list(variables)
    for name, v in variables.items():
        assert draws.variables[name].dtype == v.dtype
        np.testing.assert_array_equal(draws.variables[name], v)
        assert draws.names[name] == csv_names(name, v.shape[1:])
        elements = draws.elements(name)
        assert [e for e, _ in elements] == draws.names[name]
        np.testing.assert_array_equal(np.array([x for _, x in elements]).T, _stan_order(v))
    assert list(draws.other) == ["lp__", "log_p__", "log_g__"]


def test_names():
    assert csv_names("W", (2, 3)) == ["W.1.1", "W.2.1", "W.1.2", "W.2.2", "W.1.3", "W.2.3"]
    assert [bracket_name(n) for n in csv_names("W", (2, 3))] == scalar_names("W", (2, 3))
    assert csv_names("mu", ()) == ["mu"] and bracket_name("mu") == "mu"
    assert element("am.2.1.2") == ("am", (2, 1, 2)) and element("W[1, 2]") == ("W", (1, 2))
    for other in ("lp__", "psis_log_weight__", "../x", "/tmp/abs", "W.", "W.a", "1x"):
        assert element(other) is None, other


def test_reader_takes_cmdstan_files_and_older_ppl_headers(tmp_path):
    """CmdStan's `#` comment lines, elements in any column order, the unquoted `W[1,2]` that
    older ppl versions wrote, a quoted one, and --psis's weights column."""
    cmdstan = tmp_path / "cmdstan.csv"
    cmdstan.write_text(
        "# model = m\n# method = variational\nlp__,log_p__,log_g__,M.1.2,M.1.1,M.2.2,M.2.1,n\n"
        "0,0,0,3,1,4,2,7\n# Elapsed\n0,-1,-2,30,10,40,20,-8\n"
    )
    draws = read_draws(cmdstan)
    np.testing.assert_array_equal(draws.variables["M"][1], [[10, 30], [20, 40]])
    assert draws.names["M"] == ["M.1.1", "M.2.1", "M.1.2", "M.2.2"]
    assert draws.variables["n"].dtype.kind == "i" and list(draws.variables["n"]) == [7, -8]
    old = tmp_path / "old.csv"
    old.write_text('lp__,W[1,1],W[2,1],"W[1,2]",W[2,2],x,psis_log_weight\n0,1,2,3,4.5,5,-1\n')
    draws = read_draws(old)
    np.testing.assert_array_equal(draws.variables["W"][0], [[1, 3], [2, 4.5]])
    assert draws.variables["W"].dtype.kind == "f" and draws.variables["x"].dtype.kind == "i"
    assert list(draws.other) == ["lp__", "psis_log_weight"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("a.1,a.3\n1,2\n", r"do not make a \(3,\) array"),
        ("a.1,a.1\n1,2\n", r"do not make a \(1,\) array"),
        ("a.1,a.1.1\n1,2\n", "different numbers of indices"),
        ("a.0\n1\n", "do not make"),
        ("a,b\n1,2,3\n", "values a row"),
        ("a,b\n1,x\n", "cannot read"),
        ("# only comments\n", "no header line"),
    ],
)
def test_reader_refuses_a_broken_file(tmp_path, text, message):
    path = tmp_path / "draws.csv"
    path.write_text(text)
    with pytest.raises(PplError, match=message):
        read_draws(tmp_path)
