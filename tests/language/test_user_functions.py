"""User-defined functions (the `functions` block): the same model written with functions and
inline gives the same log density and gradient; user densities in `~`; Stan's suffix and
placement rules, return types and recursion as located errors."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl.errors import ModelError
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

DATA = {"N": 6, "y": np.array([1.2, 0.3, -0.4, 2.2, 1.0, 0.1]), "k": np.array([0, 3, 1, 2, 5, 1])}
HEAD = "data { int N; vector[N] y; array[N] int k; } parameters { real mu; real<lower=0> s; } "

INLINE = (
    HEAD
    + """
model {
  mu ~ normal(0, 10);
  s ~ exponential(1);
  y ~ normal(mu, s);
  k ~ poisson(exp(mu / 4));
  target += mu > 0 ? square(mu) / 100 : -square(mu) / 100;
}
"""
)

WITH_FUNCTIONS = (
    """
functions {
  real half_sq(real x);  // forward declaration
  real my_normal_lpdf(vector y, real mu, real sigma) {
    real lp = 0;
    for (n in 1:num_elements(y))
      lp += -0.5 * square((y[n] - mu) / sigma) - log(sigma) - 0.5 * log(2 * pi());
    return lp;
  }
  real my_poisson_lpmf(array[] int k, real rate) {
    return sum(to_vector(k)) * log(rate) - num_elements(k) * rate - sum(lgamma(to_vector(k) + 1));
  }
  void priors_lp(real mu, real s) {
    mu ~ normal(0, ten());
    target += exponential_lpdf(s | 1);
  }
  real ten() { return 10; }
  real signed_sq(real x) {
    if (x > 0) {
      return half_sq(x) * 2 / 100;
    } else {
      return -half_sq(x) * 2 / 100;
    }
  }
  real half_sq(real x) { return x * x / 2; }
}
"""
    + HEAD
    + """
model {
  priors_lp(mu, s);
  y ~ my_normal(mu, s);
  target += my_poisson_lpmf(k | exp(mu / 4));
  target += signed_sq(mu);
}
"""
)


def _model(src: str, data: dict = DATA) -> CompiledModel:
    return CompiledModel(check(parse(src, "m.stan")), data, seed=0)


def _value_and_gradient(model: CompiledModel, zeta):
    return model.log_joint(zeta), grad(lambda z: anp.sum(model.log_joint(z)))(zeta)


def test_functions_give_the_inline_log_density_and_gradient():
    zeta = np.random.default_rng(1).normal(size=(5, 2))  # mu of both signs: both branches
    inline, functions = _model(INLINE), _model(WITH_FUNCTIONS)
    lp, g = _value_and_gradient(inline, zeta)
    lp_f, g_f = _value_and_gradient(functions, zeta)
    np.testing.assert_allclose(lp_f, lp, rtol=1e-10)
    np.testing.assert_allclose(g_f, g, rtol=1e-9)


def test_a_user_density_in_a_loop_and_a_function_of_each_row():
    src = (
        """
functions {
  real shifted_lpdf(real y, real mu, real s) { return normal_lpdf(y | mu + 1, s); }
  real centre(real x, int j) { if (j > 3) return x - 1; return x; }
}
"""
        + HEAD
        + """
model {
  for (n in 1:N) y[n] ~ shifted(centre(mu, n), s);
}
"""
    )
    inline = HEAD + "model { for (n in 1:N) y[n] ~ normal(n > 3 ? mu : mu + 1, s); }"
    zeta = np.random.default_rng(2).normal(size=(3, 2))
    np.testing.assert_allclose(
        _value_and_gradient(_model(src), zeta)[1], _value_and_gradient(_model(inline), zeta)[1]
    )
    np.testing.assert_allclose(_model(src).log_joint(zeta), _model(inline).log_joint(zeta))


def test_recursion_and_local_containers():
    src = """
functions {
  int fib(int n) { if (n < 2) return n; return fib(n - 1) + fib(n - 2); }
  vector cumulative(vector x) {
    vector[rows(x)] out;
    real total = 0;
    for (i in 1:rows(x)) { total += x[i]; out[i] = total; }
    return out;
  }
}
data { int N; vector[N] y; }
parameters { real mu; }
model { y ~ normal(cumulative(rep_vector(mu, N)) / fib(10), 1); }
"""
    inline = "data { int N; vector[N] y; } parameters { real mu; } " + (
        "model { y ~ normal(cumulative_sum(rep_vector(mu, N)) / 55, 1); }"
    )
    data = {"N": 6, "y": DATA["y"]}
    zeta = np.array([[0.3], [-1.2]])
    np.testing.assert_allclose(
        _model(src, data).log_joint(zeta), _model(inline, data).log_joint(zeta)
    )


def test_runaway_recursion_is_a_located_error():
    src = """functions {
  real forever(real x) { return forever(x + 1); }
}
parameters { real mu; }
model { mu ~ normal(forever(0), 1); }
"""
    with pytest.raises(ModelError, match=r"m.stan:2:.*'forever' calls nest deeper than 100"):
        _model(src, {}).log_joint(np.zeros((2, 1)))


@pytest.mark.parametrize(
    "functions, model, message",
    [
        (
            "real f(real x) { return x; }",
            "mu ~ normal(f(1, 2), 1);",
            r"6:21: f takes 1 argument\(s\) \(real f\(real\)\), got 2",
        ),
        (
            "real f(vector x) { return sum(x); }",
            "mu ~ normal(f(mu), 1);",
            r"argument 1 \('x'\) of f must be vector, got real",
        ),
        (
            "real f(real x) { return [x]'; }",
            "mu ~ normal(f(mu), 1);",
            r"2:27: function 'f' returns real, not vector",
        ),
        (
            "real f(real x) { if (x > 0) return x; }",
            "mu ~ normal(f(mu), 1);",
            r"may reach its end without returning",
        ),
        ("void f(real x) { return x; }", "f(mu);", r"void function 'f' cannot return a value"),
        ("void f(real x) { }", "mu ~ normal(f(mu), 1);", r"void function 'f' has no value"),
        ("real f(real x) { return x; }", "f(mu);", r"only void functions can be statements"),
        (
            "real f(real x) { x = 2; return x; }",
            "mu ~ normal(f(mu), 1);",
            r"cannot assign to argument variable 'x'",
        ),
        (
            "real f(real x) { target += x; return x; }",
            "mu ~ normal(f(mu), 1);",
            r"'target \+=' is only allowed in the model block and _lp functions",
        ),
        (
            "real f_rng(real x) { return normal_rng(x, 1); }",
            "mu ~ normal(f_rng(1), 1);",
            r"f_rng draws random numbers",
        ),
        (
            "real f(real x) { return normal_rng(x, 1); }",
            "mu ~ normal(f(1), 1);",
            r"normal_rng can only be used in",
        ),
        ("real f_lpdf(int y, real m) { return m; }", "", r"must be real \(_lpdf\)"),
        ("real f_lpmf(real y, real m) { return m; }", "", r"must be an integer \(_lpmf\)"),
        ("real f(real x);", "", r"'f' is declared but never defined"),
        ("real exp(real x) { return x; }", "", r"'exp' is a built-in function"),
        ("real g(real x) { return y; }", "", r"2:27: undefined name 'y'"),
        ("real f(real x) { return x; }", "mu ~ normal(f(mu | 1), 1);", r"'\|' is only for"),
    ],
)
def test_type_errors_name_the_function_at_their_location(functions, model, message):
    src = f"functions {{\n  {functions}\n}}\ndata {{ real y; }}\nparameters {{ real mu; }}\n"
    src += f"model {{ {model} }}\n"
    with pytest.raises(ModelError, match=message):
        check(parse(src, "m.stan"))


def test_rng_functions_in_generated_quantities():
    src = """
functions {
  vector draws_rng(real mu, int n) {
    vector[n] out;
    for (i in 1:n) out[i] = normal_rng(mu, 1e-8);
    return out;
  }
}
parameters { real mu; }
model { mu ~ normal(0, 1); }
generated quantities { vector[3] d = draws_rng(mu, 3); }
"""
    zeta = np.array([[0.5], [-2.0], [1.5]])
    draws = _model(src, {}).constrained_draws(zeta, np.random.default_rng(0))
    assert draws["d"].shape == (3, 3)
    np.testing.assert_allclose(draws["d"], np.repeat(zeta, 3, axis=1), atol=1e-6)


def test_markov_blanket_terms_through_user_functions():
    # BBVI's per-latent sums walk the program (ppl.ir.graph) and record per-statement terms: a
    # recursive
    # function must not send the walk round in circles, and the total stays the log joint
    from ppl.inference.estimators import log_joint_terms

    src = WITH_FUNCTIONS.replace(
        "real ten() { return 10; }",
        "real ten() { return 10; }\n"
        "  int fib(int n) { if (n < 2) return n; return fib(n - 1) + fib(n - 2); }",
    ).replace("y ~ my_normal(mu, s);", "y ~ my_normal(mu, s * fib(2));")
    model = _model(src)
    zeta = np.random.default_rng(3).normal(size=(4, 2))
    terms = log_joint_terms(model, zeta[:2], np.random.default_rng(0))
    total, _ = terms(zeta)
    np.testing.assert_allclose(total, _model(INLINE).log_joint(zeta), rtol=1e-10)
