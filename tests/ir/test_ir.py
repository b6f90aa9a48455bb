"""Tests for ppl.ir.graph: the graph IR (kinds, shapes, supports, parents, blankets, outputs)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ppl.data.specs import read_data
from ppl.ir.graph import Graph, build_graph
from ppl.ir.source_text import expr_text
from ppl.language.checker import check
from ppl.language.frontend import load_model
from ppl.language.parser import parse
from ppl.methods import METHODS
from ppl.runtime.compiler import CompiledModel

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
EIGHT = MODELS / "eight_schools"


def graph_of(path: Path, *data: Path, method: str = "advi") -> Graph:
    checked = load_model(str(path))
    model = CompiledModel(checked, read_data(checked, [str(d) for d in data])) if data else None
    return build_graph(checked, model, METHODS[method])


def graph_src(source: str, data: dict | None = None, method: str = "advi") -> Graph:
    checked = check(parse(source, "test.model"))
    model = None
    if data is not None:
        sets = {k: str(v) for k, v in data.items()}
        model = CompiledModel(checked, read_data(checked, [], sets))
    return build_graph(checked, model, METHODS[method])


@pytest.fixture(scope="module")
def noncentered() -> Graph:
    return graph_of(EIGHT / "noncentered.model", EIGHT / "eight_schools.json")


@pytest.fixture(scope="module")
def noncentered_nodata() -> Graph:
    return graph_of(EIGHT / "noncentered.model")


# ---- node kinds, shapes ----------------------------------------------------------------------


def test_node_kinds(noncentered):
    kinds = {n.name: n.kind for n in noncentered.nodes}
    assert {k: v for k, v in kinds.items() if not k.startswith("f")} == {
        "J": "data",
        "y": "data",
        "sigma": "data",
        "mu": "latent",
        "tau": "latent",
        "theta_trans": "latent",
        "theta": "deterministic",
        "y_rep": "deterministic",
    }
    factors = noncentered.of_kind("factor")
    assert [f.name for f in factors] == ["f1", "f2", "f3", "f4"]
    assert [f.line for f in factors] == [21, 22, 23, 24]
    assert factors[3].text == "y ~ normal(theta, sigma);"
    assert factors[3].family == "normal"
    assert noncentered.node("theta").block == "transformed_parameters"
    assert noncentered.node("y_rep").block == "generated_quantities"


def test_names_are_unique_on_every_model():
    for path in sorted(MODELS.glob("*/*.model")) + sorted(MODELS.glob("posteriordb/*/model.stan")):
        g = graph_of(path)
        names = [n.name for n in g.nodes]
        assert len(names) == len(set(names)), path
        known = set(names)
        for n in g.nodes:
            assert set(n.parents) <= known and set(n.sizes) <= known, (path, n)


def test_shapes_with_and_without_data(noncentered, noncentered_nodata):
    assert noncentered.node("J").shape == []
    assert noncentered.node("y").shape == [8]
    assert noncentered.node("theta_trans").shape == [8]
    assert noncentered.node("theta").shape == [8]
    assert noncentered.node("mu").shape == []
    for n in noncentered_nodata.nodes:
        assert n.shape is None
    assert noncentered_nodata.node("theta_trans").dims == ["J"]
    assert noncentered_nodata.node("mu").dims == []


def test_matrix_shapes_from_csv_data():
    g = graph_of(
        MODELS / "linear_regression" / "linear_regression.model",
        MODELS / "linear_regression" / "boston.csv",
    )
    assert g.node("X").shape == [506, 4]
    assert g.node("X").dims == ["N", "K"]
    assert g.node("beta").shape == [4]
    assert g.node("Z").kind == "data" and g.node("Z").block == "transformed_data"


def test_type_text_has_no_variable_name(noncentered):
    assert noncentered.node("sigma").type == "array[J] real<lower=0>"
    assert noncentered.node("tau").type == "real<lower=0>"


# ---- supports, transforms, families ----------------------------------------------------------

SUPPORT_MODEL = """
data {
  int<lower=0> N;
  int<lower=1> K;
  vector[N] x;
  real<lower=0> s;
  array[N] int<lower=0, upper=1> obs;
}
parameters {
  real<lower=0> sd_pos;
  real<lower=-1, upper=1> rho;
  real<lower=0, upper=1> p;
  real<upper=sd_pos> capped;
  simplex[K] w;
  ordered[2] cut;
  cov_matrix[2] Sigma;
  int<lower=0, upper=1> z;
  vector<offset=1, multiplier=2>[N] a;
}
model {
  sd_pos ~ exponential(1);
  x ~ normal(a, sd_pos);
}
"""


def test_supports_and_transforms():
    g = graph_src(SUPPORT_MODEL)
    support = {n.name: n.support for n in g.nodes if n.kind != "factor"}
    assert support["N"] == "nonnegative int"
    assert support["K"] == "positive int"
    assert support["x"] == "real"
    assert support["s"] == "nonnegative"  # data bounds are closed
    assert support["obs"] == "binary"
    assert support["sd_pos"] == "positive"  # parameter bounds are open
    assert support["rho"] == "interval"
    assert support["p"] == "interval"
    assert support["capped"] == "upper-bounded"
    assert support["w"] == "simplex"
    assert support["cut"] == "ordered"
    assert support["Sigma"] == "cov_matrix"
    assert support["z"] == "binary"
    transform = {n.name: n.transform for n in g.of_kind("latent")}
    assert transform["sd_pos"] == "lower"
    assert transform["rho"] == "lower_upper"
    assert transform["capped"] == "upper"
    assert transform["w"] == "simplex"
    assert transform["a"] == "offset_multiplier"
    assert transform["z"] == "binary"
    assert g.node("rho").bounds == {"lower": "-1", "upper": "1"}
    assert g.node("capped").parents == ["sd_pos"]
    assert "Bernoulli" in g.node("z").family
    assert g.node("sd_pos").family.startswith("mean-field Gaussian")
    assert g.node("Sigma").dims == ["2", "2"]


def test_family_follows_method_and_does_not_depend_on_data():
    data = EIGHT / "eight_schools.json"
    with_data = graph_of(EIGHT / "noncentered.model", data, method="fullrank")
    without = graph_of(EIGHT / "noncentered.model", method="fullrank")
    for name in ("mu", "tau", "theta_trans"):
        assert with_data.node(name).family == without.node(name).family
        assert with_data.node(name).family.startswith("full-rank Gaussian")
        assert with_data.node(name).support == without.node(name).support


@pytest.mark.parametrize("method", ["auto", "meanfield", "bbvi"])
def test_family_is_the_one_ppl_fit_uses(method):
    """`ppl ir --method M` and `ppl fit --method M` label each latent by the same choice
    (ppl.families.choice); the fit adds the transform and support ir prints in their columns."""
    from ppl.pipeline import fit

    checked = load_model(str(EIGHT / "noncentered.model"))
    model = CompiledModel(checked, read_data(checked, [str(EIGHT / "eight_schools.json")]))
    graph = build_graph(checked, model, METHODS[method])
    result = fit(model, method, iterations=200, draws=100, seed=1)
    if result.method == "fullrank" or ", then a" in (result.description or ""):
        # auto's escalation kept a candidate beyond its first q (a full-rank Gaussian, the
        # collapse): not the per-latent choice ir shows
        pytest.skip("auto kept an escalation candidate")
    for lat in model.latents:
        assert result.families[lat.name].startswith(graph.node(lat.name).family), lat.name
    assert graph.node("tau").family.startswith("gamma" if method != "meanfield" else "mean-field")


def test_dependent_interval_support():
    g = graph_of(MODELS / "posteriordb" / "garch-garch11" / "model.stan")
    beta1 = g.node("beta1")
    assert beta1.support == "interval"
    assert beta1.bounds == {"lower": "0", "upper": "1 - alpha1"}
    assert beta1.parents == ["alpha1"]
    assert "interval (0, 1 - alpha1)" in g.to_text()


# ---- parents and Markov blankets -------------------------------------------------------------


def test_parents_eight_schools_noncentered(noncentered):
    assert noncentered.node("theta").parents == ["mu", "tau", "theta_trans"]
    assert noncentered.node("theta").sizes == ["J"]
    assert noncentered.node("f4").parents == ["y", "theta", "sigma"]
    assert noncentered.node("y_rep").parents == ["theta", "sigma"]
    assert noncentered.node("mu").parents == []
    assert noncentered.node("y").sizes == ["J"]


def test_factors_of_goes_through_deterministic_nodes(noncentered):
    def ids(name):
        return [f.name for f in noncentered.factors_of(name)]

    assert ids("mu") == ["f1", "f4"]
    assert ids("tau") == ["f2", "f4"]
    assert ids("theta_trans") == ["f3", "f4"]
    assert ids("sigma") == ["f4"]
    assert ids("J") == []  # sizes carry no probability


def test_factors_of_through_dependent_bounds():
    g = graph_src("""
    data { real y; }
    parameters { real a; real<lower=a> b; }
    model { a ~ normal(0, 1); b ~ normal(0, 1); y ~ normal(b, 1); }
    """)
    assert [f.text for f in g.factors_of("a")] == [
        "a ~ normal(0, 1);",
        "b ~ normal(0, 1);",
        "y ~ normal(b, 1);",
    ]


def test_control_dependencies_and_loop_context():
    g = graph_src("""
    data { int<lower=1> N; vector[N] y; }
    parameters { real mu; real<lower=0> s; }
    model {
      real m;
      if (s > 1) m = mu; else m = 0;
      for (n in 1:N) y[n] ~ normal(m, s);
      target += -s;
    }
    """)
    assert set(g.node("m").parents) == {"s", "mu"}  # the if condition is a parent
    assert g.node("m").block == "model"
    f1, f2 = g.of_kind("factor")
    assert f1.parents == ["y", "m", "s"]
    assert f1.sizes == ["N"]
    assert "for (n in 1:N)" in f1.text
    assert f2.family == "target +=" and f2.text == "target += -s;"
    assert [f.name for f in g.factors_of("mu")] == ["f1"]


def test_factor_names_do_not_clash_with_variables():
    g = graph_src("""
    parameters { real f1; }
    model { f1 ~ normal(0, 1); }
    """)
    names = [n.name for n in g.nodes]
    assert len(set(names)) == len(names)
    (factor,) = g.of_kind("factor")
    assert factor.parents == ["f1"] and factor.name != "f1"


def test_expr_text_round_trips_precedence():
    src = "model { target += -(a + b) * c ^ 2 - x[1:2, i]' * (d - e - f) / g; }"
    data = "data { real a; real b; real c; matrix[2,2] x; int i; vector[2] d; real e; real f; "
    g = graph_src(data + "real g; }" + src)
    (factor,) = g.of_kind("factor")
    assert factor.text == "target += -(a + b) * c ^ 2 - x[1:2, i]' * (d - e - f) / g;"
    assert expr_text(None) == ""


# ---- output formats --------------------------------------------------------------------------


def test_json_round_trip(noncentered):
    obj = json.loads(noncentered.to_json())
    assert obj["model"].endswith("noncentered.model")
    assert obj["method"] == "advi"
    by_name = {n["name"]: n for n in obj["nodes"]}
    assert by_name["theta"]["parents"] == ["mu", "tau", "theta_trans"]
    assert by_name["y"]["shape"] == [8]
    assert by_name["tau"]["support"] == "positive"
    assert set(by_name["f4"]) >= {"kind", "line", "text", "parents"}


def test_text_output_lists_everything(noncentered):
    text = noncentered.to_text()
    needles = [
        "data (observed / fixed): 3",
        "latent parameters",
        "deterministic nodes",
        "factors (terms of the log density): 4",
        "transformed parameters",
        "y ~ normal(theta, sigma);",
        "mu, tau, theta_trans",
        "(8,)",
        "positive",
    ]
    for needle in needles:
        assert needle in text, needle


def test_dot_is_a_plausible_digraph(noncentered):
    dot = noncentered.to_dot()
    assert dot.startswith("digraph ") and dot.rstrip().endswith("}")
    assert dot.count("{") == dot.count("}")
    node_ids = set(re.findall(r"^\s+(n\d+) \[label=", dot, flags=re.M))
    assert len(node_ids) == len(noncentered.nodes)
    for a, b in re.findall(r"^\s+(n\d+) -> (n\d+)", dot, flags=re.M):
        assert a in node_ids and b in node_ids
    # every label is a closed string
    for line in dot.splitlines():
        assert line.count('"') - line.count('\\"') * 1 >= 0
        assert (line.count('"') - line.count('\\"')) % 2 == 0, line


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` is not installed")
def test_dot_renders_with_graphviz(noncentered):
    for g in (noncentered, graph_of(MODELS / "epilepsy" / "poisson_gamma.model")):
        out = subprocess.run(
            ["dot", "-Tsvg"], input=g.to_dot(), capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert "<svg" in out.stdout


def test_cli_ir_formats(capsys):
    from ppl.cli import main

    model, data = str(EIGHT / "noncentered.model"), str(EIGHT / "eight_schools.json")
    assert main(["ir", model, data, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"]
    assert main(["ir", model, "--dot"]) == 0
    assert capsys.readouterr().out.startswith("digraph")
    assert main(["ir", model, data]) == 0
    assert "theta_trans" in capsys.readouterr().out
