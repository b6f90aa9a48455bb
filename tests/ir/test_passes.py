"""The passes over the lowered program (ppl.ir.passes): what each decides, that the compiled model
does
what they decided and nothing else, and that the program with all passes gives the log density
and gradient of the program as written (no passes), on random models from a generator."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad
from hypothesis import given, settings
from hypothesis import strategies as st

from ppl.cli import main
from ppl.ir.graph import build_graph
from ppl.ir.passes import ALL, lowered
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.library.functions import lookup
from ppl.runtime.compiler import CompiledModel

N = 7
DATA = {
    "N": np.asarray(N),
    "x": np.linspace(0.3, 2.5, N),
    "g": np.array([1, 2, 1, 3, 3, 2, 1]),
}
HEAD = """
data { int N; vector[N] x; array[N] int g; }
parameters { real mu; real<lower=0> s; vector[3] b; }
transformed parameters {
  vector[N] eta;
  for (n in 1:N) eta[n] = mu + b[g[n]] * %s;
}
model {
  mu ~ normal(0, 1);
  s ~ lognormal(0, 1);
  b ~ normal(0, 2);
%s
}
"""
#: data-only expressions (constants the folding pass should find) and ones of parameters
DATA_TERMS = ["log(x[2])", "mean(x)", "sd(x) / N", "exp(-x[1]) * 2", "sum(log(x))", "x[n]"]
PARAMETER_TERMS = ["mu", "s", "b[g[n]]", "eta[n]", "b[1] * x[n]"]
STATEMENTS = [
    "for (n in 1:N) target += normal_lpdf(x[n] | {a} + {b}, s + 0.5);",
    "for (n in 1:N) {{ if (g[n] == 2) target += -square({a} - {b}) / 10; }}",
    "target += -square({a} * {b}) / 20;",
    "x ~ normal(eta + {a}, {b} * 0 + s + 0.5);",
    "for (t in 2:N) target += -square(eta[t] - eta[t - 1] * {a}) / 10;",
]


@st.composite
def models(draw) -> str:
    terms = DATA_TERMS + PARAMETER_TERMS
    statements = []
    for _ in range(draw(st.integers(1, 4))):
        template = draw(st.sampled_from(STATEMENTS))
        a, b = draw(st.sampled_from(terms)), draw(st.sampled_from(terms))
        if "{a}" in template and "for" not in template:  # no loop index outside loops
            a, b = (t.replace("[n]", "[3]") for t in (a, b))
        if "for (t" in template:
            a, b = (t.replace("[n]", "[t]") for t in (a, b))
        statements.append("  " + template.format(a=a, b=b))
    tp_term = draw(st.sampled_from(DATA_TERMS))
    return HEAD % (tp_term, "\n".join(statements))


def _pair(src: str):
    checked = check(parse(src, "passes.model"))
    data = dict(DATA)
    return CompiledModel(checked, data, passes=ALL), CompiledModel(checked, data, passes=())


@settings(max_examples=40, deadline=None, derandomize=True)
@given(src=models())
def test_all_passes_give_the_log_density_and_gradient_of_the_program_as_written(src):
    optimised, written = _pair(src)
    zeta = np.random.default_rng(3).normal(size=(4, optimised.dim)) * 0.5
    np.testing.assert_allclose(optimised.log_joint(zeta), written.log_joint(zeta), rtol=1e-11)

    def total(model):
        return grad(lambda z: anp.sum(model.log_joint(z)))(zeta)

    np.testing.assert_allclose(total(optimised), total(written), rtol=1e-10, atol=1e-12)
    a = optimised.constrained_draws(zeta, np.random.default_rng(0))["eta"]
    b = written.constrained_draws(zeta, np.random.default_rng(0))["eta"]
    np.testing.assert_allclose(a, b, rtol=1e-12)


FOLDED = """
data { int N; vector[N] x; vector[N] y; }
parameters { real a; real b; }
model { y ~ normal(a + b * log(x), 1); }
"""


def _folded_model(passes, x, y):
    checked = check(parse(FOLDED, "fold.model"))
    return CompiledModel(checked, {"N": np.asarray(len(x)), "x": x, "y": y}, passes=passes)


@pytest.mark.parametrize("passes, calls", [(ALL, 1), ((), 3)])
def test_a_folded_constant_is_computed_once_and_again_for_new_data(monkeypatch, passes, calls):
    counted = []
    log = lookup("log")
    original = log.impl
    monkeypatch.setattr(log, "impl", lambda args, types: counted.append(1) or original(args, types))
    x, y = np.linspace(1, 3, 6), np.linspace(-1, 1, 6)
    model = _folded_model(passes, x, y)
    zeta = np.array([[0.2, -0.4], [1.0, 0.5]])
    for _ in range(3):
        value = model.log_joint(zeta)
    assert len(counted) == calls
    expected = [-0.5 * np.sum((y - a - b * np.log(x)) ** 2) - 3 * np.log(2 * np.pi)
                for a, b in zeta]  # fmt: skip
    np.testing.assert_allclose(value, expected, rtol=1e-12)
    # another data array under the same name (a streamed chunk, a minibatch): recomputed
    model.data["x"] = x2 = np.linspace(2, 5, 6)
    expected = [-0.5 * np.sum((y - a - b * np.log(x2)) ** 2) - 3 * np.log(2 * np.pi)
                for a, b in zeta]  # fmt: skip
    np.testing.assert_allclose(model.log_joint(zeta), expected, rtol=1e-12)


def test_each_pass_records_its_decisions_and_marks_what_the_evaluator_reads():
    src = """
data { int N; int T; vector[N] x; array[N] int<lower=0, upper=1> z; array[T] vector[2] w; }
parameters { real a; real<lower=0> s; vector[2] m; cov_matrix[2] S; }
model {
  vector[T] h;
  h[1] = a;
  for (t in 2:T) h[t] = a + 0.5 * h[t - 1] * exp(a);
  for (n in 1:N) {
    if (z[n] == 1) target += normal_lpdf(x[n] | a, s);
    else target += -square(a) * log(x[n] + 1);
  }
  target += -square(a - mean(x));
  w ~ multi_normal(m, S);
}
"""
    program = lowered(check(parse(src, "d.model")), ALL)
    by_pass: dict[str, list[str]] = {}
    for d in program.decisions:
        by_pass.setdefault(d.pass_name, []).append(f"{d.line}: {d.text}")
    assert by_pass["constant_folding"] == ["12: mean(x): computed once (no parameters)"]
    vectorisation = by_pass["loop_vectorisation"]
    assert vectorisation[0] == (
        "7: for (t in 2:T): one index at a time (an iteration reads 'h' where another writes it: "
        "a recurrence)"
    )
    assert vectorisation[1] == (
        "8: for (n in 1:N): vectorised over n (if/else: each branch on its rows)"
    )
    assert by_pass["loop_invariants"] == ["7: for (t): computed once across its iterations: exp(a)"]
    assert by_pass["sufficient_statistics"] == ["13: w ~ multi_normal(m, S): N, mean, Y'Y once"]
    loops = [s for s in program.ast.model if s.__class__.__name__ == "For"]
    assert [s.marks.vectorise for s in loops] == [False, True]
    # no passes: nothing marked, nothing recorded; the checked program itself is never marked
    written = lowered(program.checked, ())
    assert written.decisions == [] and written.passes == ()
    assert all(s.marks is None or not s.marks.vectorise for s in written.ast.model)
    assert all(s.marks is None for s in program.checked.program.model)


def test_the_graph_names_the_statements_the_compiled_model_runs():
    """BBVI and minibatches find statements by identity: the graph's must be the model's own."""
    checked = check(parse(FOLDED, "fold.model"))
    model = CompiledModel(checked, {"N": np.asarray(3), "x": np.ones(3), "y": np.zeros(3)})
    graph = build_graph(checked, model)
    (factor,) = graph.statements.values()
    assert factor is model.program.model[0]
    assert graph.passes == ALL and graph.decisions == model.ir.decisions


def test_ppl_ir_shows_the_program_before_and_after_the_passes(tmp_path, capsys):
    path = tmp_path / "fold.model"
    path.write_text(FOLDED)
    assert main(["ir", str(path)]) == 0
    after = capsys.readouterr().out
    assert f"passes: {', '.join(ALL)}" in after
    assert "constant_folding      line 4     log(x): computed once (no parameters)" in after
    assert main(["ir", str(path), "--passes", "none"]) == 0
    before = capsys.readouterr().out
    assert before.rstrip().endswith("passes: none")
    assert main(["ir", str(path), "--passes", "loop_invariants,constant_folding", "--json"]) == 0
    assert '"constant_folding",\n    "loop_invariants"' in capsys.readouterr().out
    assert main(["ir", str(path), "--passes", "inlining"]) == 2
    assert "unknown pass inlining" in capsys.readouterr().err


@pytest.mark.parametrize(
    "body, why",
    [
        ("if (x[n] > 10) reject(\"x too large\");", "its body has reject()"),
        ("h[n] = h[n - 1] + a;", "an iteration reads 'h' where another writes it: a recurrence"),
        ("{ vector[n] v = rep_vector(a, n); target += -dot_self(v); }",
         "the size of 'v' changes with n"),
        ("target += -square(a - sum(x[1:n]));", "a slice's bounds change with n"),
        ("s = s * 0.5 + a;", "'s' carries values from one iteration to the next"),
    ],
)  # fmt: skip
def test_a_loop_run_one_index_at_a_time_says_why(body, why):
    src = f"""
data {{ int N; vector[N] x; }}
parameters {{ real a; }}
model {{
  vector[N] h = rep_vector(0, N);
  real s = 0;
  for (n in 2:N) {body}
  target += -square(a) - square(s) - dot_self(h);
}}
"""
    program = lowered(check(parse(src, "why.model")), ALL)
    (decision,) = [d for d in program.decisions if d.pass_name == "loop_vectorisation"]
    assert decision.text == f"for (n in 2:N): one index at a time ({why})"


def test_lowering_copies_deeply_nested_programs_within_the_recursion_limit():
    """copy.deepcopy took five frames a level: 100 nested ifs, which compiled before the IR,
    became 'nested too deeply'. The tree copy takes one."""
    body = "target += -square(a);"
    for _ in range(100):
        body = f"if (1 > 0) {{ {body} }}"
    checked = check(parse(f"parameters {{ real a; }} model {{ {body} }}", "deep.model"))
    model = CompiledModel(checked, {})
    np.testing.assert_allclose(model.log_joint(np.array([[0.5], [2.0]])), [-0.25, -4.0])
