"""Which loops run vectorised (ppl.ir.passes.loop_vectorisation.plan) and that they give the
sequential loop's answers.

Covers the forms the forward algorithm needs: a loop writing `x[t, k]` (the loop index after
indexes fixed in the loop) while reading `x[t - 1, j]`, a variable each iteration writes before
reading (`acc`: private to the iteration), and a vectorised loop inside another.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl.ir.passes.loop_vectorisation import plan, reductions
from ppl.language import ast
from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

FORWARD = """
data { int N; int K; array[N] real y; }
parameters { array[K] simplex[K] theta; ordered[K] mu; }
model {
  array[K] real acc;
  array[N, K] real gamma;
  for (k in 1:K) gamma[1, k] = normal_lpdf(y[1] | mu[k], 1);
  for (t in 2:N) {
    for (k in 1:K) {
      for (j in 1:K) {
        acc[j] = gamma[t - 1, j] + log(theta[j, k]) + normal_lpdf(y[t] | mu[k], 1);
      }
      gamma[t, k] = log_sum_exp(acc);
    }
  }
  target += log_sum_exp(gamma[N]);
  target += -square(acc[1]) / 1000;  // acc after the loops: the last iteration's
}
"""
Y = [0.3, 2.2, 2.5, -0.4, 0.1, 2.9, 3.1]


def _loops(program: ast.Program) -> dict[str, ast.For]:
    found = {}
    stack = list(program.model)
    while stack:
        s = stack.pop()
        if isinstance(s, ast.For):
            found.setdefault(s.var, s)
            stack.append(s.body)
        elif isinstance(s, ast.Block):
            stack.extend(s.stmts)
    return found


def _compile(src: str, data: dict, vectorise: bool = True) -> CompiledModel:
    data = {k: np.asarray(v) for k, v in data.items()}
    return CompiledModel(check(parse(src, "loops.model")), data, seed=0, vectorise=vectorise)


def test_plans_of_the_forward_algorithm():
    loops = _loops(check(parse(FORWARD, "f.model")).program)
    assert plan(loops["t"]) is None  # gamma[t] reads gamma[t - 1]: a recurrence
    assert set(plan(loops["k"])) == {"acc"}  # writes gamma[t, k]; acc is private
    assert plan(loops["j"]) == {}  # writes acc[j]


def _same_as_sequential(src: str, data: dict, draws: int = 5):
    fast, slow = _compile(src, data), _compile(src, data, vectorise=False)
    zeta = np.random.default_rng(4).normal(size=(draws, fast.dim))
    np.testing.assert_allclose(fast.log_joint(zeta), slow.log_joint(zeta), rtol=1e-11)

    def g(model):
        return grad(lambda z: anp.sum(model.log_joint(z)))(zeta)

    np.testing.assert_allclose(g(fast), g(slow), rtol=1e-10, atol=1e-12)
    return fast


@pytest.mark.parametrize("states", [2, 3])
def test_forward_algorithm_vectorised_over_states_equals_sequential(states):
    fast = _same_as_sequential(FORWARD, {"N": len(Y), "K": states, "y": Y})
    assert not fast.devectorised


def test_partly_written_private_candidate_falls_back():
    """acc[1] alone is written per iteration: acc[2] keeps the value from before the loop, so
    the loop cannot give each row a fresh copy; the run-time check sends it back to sequential."""
    src = """
data { int K; }
parameters { vector[K] a; }
model {
  array[2] real acc;
  vector[K] v;
  acc[2] = 0.5;
  for (k in 1:K) {
    acc[1] = a[k] * k;
    v[k] = acc[1] + acc[2];
  }
  target += -dot_self(v) - square(acc[1]);
}
"""
    fast = _same_as_sequential(src, {"K": 4})
    assert fast.devectorised  # fell back, with the sequential answer


def test_terms_without_the_inner_index_count_once_per_iteration_of_both_loops():
    src = """
data { int K; int J; }
parameters { real mu; vector[K] b; }
model {
  for (k in 1:K) {
    for (j in 1:J) {
      target += -square(mu) / 10;
      target += -square(b[k] - j) / 10;
    }
  }
}
"""
    fast = _same_as_sequential(src, {"K": 3, "J": 4})
    assert not fast.devectorised


# ---- accumulating assignments: x = x + e summed over the rows ----------------------------------

CHANGE_POINT = """
data { real<lower=0> r_e; real<lower=0> r_l; int<lower=1> T; array[T] int<lower=0> D; }
transformed data { real log_unif = -log(T); }
parameters { real<lower=0> e; real<lower=0> l; }
transformed parameters {
  vector[T] lp = rep_vector(log_unif, T);
  for (s in 1:T)
    for (t in 1:T)
      lp[s] = lp[s] + poisson_lpmf(D[t] | t < s ? e : l);
}
model { e ~ exponential(r_e); l ~ exponential(r_l); target += log_sum_exp(lp); }
"""
CHANGE_POINT_DATA = {"r_e": 1 / 3, "r_l": 1 / 3, "T": 9, "D": [4, 3, 5, 2, 4, 1, 0, 1, 2]}


def test_change_point_marginalised_with_a_loop_accumulation():
    """Stan's change-point model (the user's guide's loop form): the inner loop over t adds to
    lp[s]; both loops run vectorised, with the sequential answer and transformed parameters."""
    program = check(parse(CHANGE_POINT, "cp.model")).program
    outer = program.transformed_parameters[1]
    inner = outer.body
    assert plan(outer) == {} and not reductions(outer)  # lp[s]: an element per row of s
    assert len(reductions(inner)) == 1  # lp[s] = lp[s] + ...: a sum over t
    fast = _same_as_sequential(CHANGE_POINT, CHANGE_POINT_DATA)
    assert not fast.devectorised
    slow = _compile(CHANGE_POINT, CHANGE_POINT_DATA, vectorise=False)
    zeta = np.random.default_rng(1).normal(size=(3, 2))
    rng = np.random.default_rng
    np.testing.assert_allclose(
        fast.constrained_draws(zeta, rng(0))["lp"], slow.constrained_draws(zeta, rng(0))["lp"]
    )


def test_accumulating_into_a_scalar_in_branches_and_a_partial_sum_that_is_read():
    src = """
data { int N; vector[N] x; }
parameters { real mu; }
model {
  real total = 0;
  real running = 0;
  vector[N] seen;
  for (n in 1:N) {
    if (x[n] > 0) total += normal_lpdf(x[n] | mu, 1);
    else total = total + normal_lpdf(x[n] | -mu, 2);
    total += 0.5;  // the same for every row: once per row
  }
  for (n in 1:N) {
    running += x[n] * mu;
    seen[n] = running;  // reads the partial sum: a recurrence, run one row at a time
  }
  target += total - dot_self(seen) / 100;
}
"""
    data = {"N": 6, "x": [0.5, -1.0, 2.0, -0.3, 0.0, 1.2]}
    fast = _same_as_sequential(src, data)
    assert fast.devectorised == set()  # the recurrence is sequential by plan, not by fallback
    program = check(parse(src, "acc.model")).program
    loops = [s for s in program.model if isinstance(s, ast.For)]
    assert len(reductions(loops[0])) == 3 and plan(loops[1]) is None
