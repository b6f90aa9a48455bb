"""draws.csv carries CmdStan's configuration comments of a variational fit (method, algorithm,
iter, ...: ppl.outputs.cmdstan_config), so CmdStanPy's from_csv reads it, while pandas
(comment="#"), ArviZ's from_cmdstan and ppl's own reader still read every draw."""

from __future__ import annotations

import numpy as np
import pytest

import ppl
from ppl.outputs.stancsv import read_draws

MODEL = """
parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(1, 2); sigma ~ lognormal(0, 0.5); }
generated quantities { array[2] int k; k[1] = 1; k[2] = 2; }
"""


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit")
    fit = ppl.Model(MODEL, "two.stan").fit(method="fullrank", iterations=300, seed=3, draws=400,
                                            tol_rel_obj=0.02, quiet=True)  # fmt: skip
    fit.save(out)
    return fit, out / "draws.csv"


def _config(path) -> dict[str, str]:
    pairs = [line.lstrip("# ").split(" = ", 1) for line in path.read_text().splitlines()
             if line.startswith("#") and " = " in line]  # fmt: skip
    return {k: v for k, v in pairs}


def test_the_configuration_is_the_fits(saved):
    fit, path = saved
    lines = path.read_text().splitlines()
    header = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    assert lines[header].startswith("lp__,log_p__,log_g__,mu,sigma")
    assert lines[header + 1] == "# Stepsize adaptation complete."
    assert lines[header + 2].startswith("# eta = ")
    said = _config(path)
    assert said["model"] == "two_model" and said["method"] == "variational"
    assert said["algorithm"] == "fullrank" and said["ppl_method"] == fit.info()["method"]
    assert said["iter"] == "50"  # adapt's iter, written last, as CmdStan writes it
    assert "#     iter = 300" in lines and "#     tol_rel_obj = 0.02" in lines
    assert said["output_samples"] == "400" and said["seed"] == "3"
    assert float(said["eta"]) > 0 and said["grad_samples"] == str(fit.result.vi.grad_samples)


def test_pandas_arviz_and_ppl_read_every_draw(saved):
    fit, path = saved
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(path, comment="#")
    assert frame.shape[0] == 400 and np.allclose(frame["mu"], fit.stan_variable("mu"))
    back = read_draws(path)
    assert np.array_equal(back.variables["sigma"], fit.stan_variable("sigma"))
    assert back.variables["k"].dtype.kind == "i" and back.variables["k"].shape == (400, 2)
    az = pytest.importorskip("arviz")
    idata = az.from_cmdstan(str(path))
    assert idata.posterior["mu"].shape == (1, 400)
    assert np.allclose(idata.posterior["mu"].values[0], fit.stan_variable("mu"))


def test_cmdstanpy_from_csv_reads_a_variational_fit(saved):
    """CmdStanPy takes the first row for q's mean (CmdStan writes it there; ppl does not): the
    other 399 draws are its variational sample, in order."""
    cmdstanpy = pytest.importorskip("cmdstanpy")
    fit, path = saved
    vb = cmdstanpy.from_csv(str(path))
    assert type(vb).__name__ == "CmdStanVB"
    assert vb.metadata.cmdstan_config["algorithm"] == "fullrank"
    sample = np.asarray(vb.variational_sample)
    assert sample.shape[0] == 399
    mu = list(vb.column_names).index("mu")
    assert np.allclose(sample[:, mu], fit.stan_variable("mu")[1:])
