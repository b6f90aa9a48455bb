"""ppl.methods: one table of --methods, and families and methods added at run time.

No module outside ppl/methods/ may tell methods apart by name (a new method would silently take
another's branch); a method or family registered at run time must work through every layer
(ppl.pipeline, the API, the CLI) with no edit elsewhere."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import ppl
from ppl.cli import main
from ppl.families.choice import FamilyPolicy
from ppl.families.gaussian import MeanFieldGaussian
from ppl.families.registry import FAMILIES, FAMILY_NAMES, FamilySpec, positive, register
from ppl.methods import METHODS, Fitted, Method
from ppl.methods import register as register_method

PACKAGE = Path(ppl.__file__).resolve().parent


def _method_names() -> set[str]:
    return set(METHODS) | {m.fitted_as for m in METHODS.values()}


def _string_constants(node) -> list[str]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [n.value for n in items if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _name_tests(tree: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    """Comparisons and `in` tests against a method's name, and dicts keyed by method names."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                found += [(node.lineno, s) for s in _string_constants(side) if s in names]
        elif isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
            if sum(k in names for k in keys) >= 2:
                found.append((node.lineno, f"dispatch table on {keys}"))
    return found


def test_no_module_outside_ppl_methods_tells_methods_apart_by_name():
    names = _method_names()
    assert {"auto", "advi", "meanfield", "fullrank", "bbvi", "dsvi"} <= names
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if (PACKAGE / "methods") in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(PACKAGE)}:{line}: {what}"
                      for line, what in _name_tests(tree, names)]  # fmt: skip
    assert not offenders, "\n".join(offenders)


def test_the_scan_finds_what_it_looks_for():
    source = 'if method == "auto": pass\nok = kind in ("bbvi", "x")\nd = {"dsvi": 1, "advi": 2}\n'
    found = _name_tests(ast.parse(source), _method_names())
    assert [line for line, _ in found] == [1, 2, 3]


# A conjugate normal model: y_i ~ normal(mu, 1), mu ~ normal(0, 10); the posterior of mu is
# normal(sum(y) / (n + 1/100), 1 / sqrt(n + 1/100)).
NORMAL = """
data { int N; vector[N] y; }
parameters { real mu; }
model { mu ~ normal(0, 10); y ~ normal(mu, 1); }
"""
# A conjugate precision: tau ~ gamma(1, 1), y_i ~ normal(0, 1 / sqrt(tau)); the posterior is
# gamma(1 + n / 2, 1 + sum(y^2) / 2).
PRECISION = """
data { int N; vector[N] y; }
parameters { real<lower=0> tau; }
model { tau ~ gamma(1, 1); y ~ normal(0, inv_sqrt(tau)); }
"""


class LaplaceToy(Method):
    """A toy method: the Laplace approximation at the mode (exact for a Gaussian posterior)."""

    name = fitted_as = "laplace_toy"
    families = FamilyPolicy(gaussian="Laplace Gaussian")

    def fit(self, model, chosen, init, rng, options) -> Fitted:
        from ppl.inference.refine import laplace

        vi = laplace(model.log_joint, init, "fullrank")
        vi.converged, vi.elbo = True, 0.0
        return Fitted(vi, self, chosen)

    def method_text(self, result, rows: str) -> str:
        return "the Laplace approximation at the mode"


@pytest.fixture
def toy_method():
    method = register_method(LaplaceToy())
    yield method
    del METHODS[method.name]


class LogScaleToy(MeanFieldGaussian):
    """A toy family: the mean-field Gaussian under another name, for positive latents only."""

    family = "log_toy"


@pytest.fixture
def toy_family():
    spec = register(FamilySpec("log_toy", LogScaleToy, covers=positive,
                               needs="a positive parameter"), "log-toy")  # fmt: skip
    yield spec
    del FAMILIES[spec.name]
    for name in ("log_toy", "log-toy"):
        del FAMILY_NAMES[name]


def _normal_data(n=50, seed=3):
    y = np.random.default_rng(seed).normal(1.5, 1.0, n)
    precision = n + 1 / 100
    return {"N": n, "y": y}, y.sum() / precision, 1 / np.sqrt(precision)


def test_a_method_registered_at_run_time_fits_through_the_api_and_the_cli(toy_method, tmp_path,
                                                                         capsys):  # fmt: skip
    data, mean, sd = _normal_data()
    fit = ppl.Model(NORMAL).fit(data, method="laplace_toy", draws=4000)
    mu = fit.draws("mu")
    # the Laplace approximation is the exact posterior here: the draws' mean is off by Monte
    # Carlo error only (sd / sqrt(4000) = 0.016 sd; 5 of them), their sd by ~1.1% (5%)
    assert abs(mu.mean() - mean) < 5 * sd / np.sqrt(4000)
    assert abs(mu.std() / sd - 1) < 0.05
    assert fit.method == "laplace_toy"
    assert fit.families["mu"] == "Laplace Gaussian"
    assert "method: the Laplace approximation at the mode" in fit.report()
    model = tmp_path / "normal.stan"
    model.write_text(NORMAL)
    values = tmp_path / "normal.json"
    values.write_text(f'{{"N": {data["N"]}, "y": {data["y"].tolist()}}}')
    assert main(["fit", str(model), str(values), "--method", "laplace_toy", "--quiet"]) == 0
    assert "q(mu): Laplace Gaussian" in capsys.readouterr().out


def test_a_family_registered_at_run_time_fits_by_the_default_road(toy_family, tmp_path,
                                                                 capsys):  # fmt: skip
    n = 400
    y = np.random.default_rng(5).normal(0.0, 0.5, n)
    shape, rate = 1 + n / 2, 1 + np.sum(y**2) / 2
    fit = ppl.Model(PRECISION).fit({"N": n, "y": y}, families={"tau": "log-toy"}, draws=4000)
    tau = fit.draws("tau")
    # the best Gaussian on log tau for a gamma(a, b) posterior has E_q[tau] = a / b exactly and
    # sd(log tau) = 1 / sqrt(a) (the exact one is sqrt(trigamma(a)) = 1/sqrt(a) (1 + O(1/a)));
    # the draws' mean is off by Monte Carlo error (sd / sqrt(4000) = 0.1% of the mean here)
    # and the fixed-draw optimum's own (< 0.5%), their sd by ~1.1% MC error and O(1/a) = 0.5%
    assert abs(tau.mean() / (shape / rate) - 1) < 0.01
    assert abs(tau.std() / (np.sqrt(shape) / rate) - 1) < 0.05
    assert fit.families["tau"].startswith("mean-field Gaussian on the unconstrained scale")
    model = tmp_path / "precision.stan"
    model.write_text(PRECISION)
    values = tmp_path / "precision.json"
    values.write_text(f'{{"N": {n}, "y": {y.tolist()}}}')
    assert main(["fit", str(model), str(values), "--family", "tau=log_toy", "--quiet"]) == 0
    assert "q(tau): mean-field Gaussian" in capsys.readouterr().out


def test_a_family_that_does_not_cover_a_latent_is_refused(toy_family):
    data, _, _ = _normal_data()
    with pytest.raises(ppl.PplError, match="the log_toy family needs a positive parameter"):
        ppl.Model(NORMAL).fit(data, families={"mu": "log_toy"})
