"""Which loops run vectorised (ppl.loops.plan) and that they give the sequential loop's answers.

Covers the forms the forward algorithm needs: a loop writing `x[t, k]` (the loop index after
indexes fixed in the loop) while reading `x[t - 1, j]`, a variable each iteration writes before
reading (`acc`: private to the iteration), and a vectorised loop inside another.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
import pytest
from autograd import grad

from ppl import ast
from ppl.checker import check
from ppl.compiler import CompiledModel
from ppl.loops import plan
from ppl.parser import parse

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
