"""ppl.ir.passes.loop_invariants: expressions a sequential loop does not change are computed once
per
run of the loop (per value of the inner indexes they read), with the answers of recomputing them."""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import grad

from ppl.ir.passes.loop_invariants import invariant_expressions
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
}
"""


def _text(e: ast.Expr) -> str:
    if isinstance(e, ast.Call):
        return f"{e.name}({', '.join(_text(a) for a in e.args)})"
    if isinstance(e, ast.Index):
        return f"{_text(e.base)}[{', '.join(_text(i.lo) for i in e.items)}]"
    if isinstance(e, ast.Var):
        return e.name
    if isinstance(e, ast.Num):
        return str(e.value)
    if isinstance(e, ast.BinOp):
        return f"({_text(e.left)} {e.op} {_text(e.right)})"
    return type(e).__name__


def test_the_forward_algorithm_keeps_the_log_transition_matrix():
    program = check(parse(FORWARD, "f.model")).program
    loop = next(s for s in program.model if isinstance(s, ast.For) and s.var == "t")
    found = {_text(e): (inner, mapped) for e, inner, mapped in invariant_expressions(loop)}
    # log(theta[j, k]) is the same at every t; the emission depends on t only through the data,
    # so it is computed for every t at once; gamma is the recurrence itself
    assert found == {
        "log(theta[j, k])": (("j", "k"), False),
        "normal_lpdf(y[t], mu[k], 1)": (("k",), True),
    }


CHANGING = """
data { int T; vector[T] x; }
parameters { vector[3] a; }
model {
  a ~ normal(0, 1);
  for (t in 1:T) {
    for (k in 1:t) target += -square(a[1] * k) / 100;  // k's range changes with t: not kept
    for (j in 1:3) target += -exp(a[j]) / 10;          // kept, one value per j
    if (a[2] > 0) target += -square(a[3] - 1); else target += log1p(square(a[3]));
    target += normal_lpdf(x[t] | a[1], exp(a[2]));      // computed for every t at once
    target += -sum(a[1:(t % 3 + 1)]) / 10;             // a slice per t: computed per t
  }
}
"""
X = np.array([0.3, -1.2, 2.0, 0.7, -0.1])


def _reference(a: np.ndarray, steps: int) -> float:
    lp = np.sum(-0.5 * a**2 - 0.5 * np.log(2 * np.pi))
    for t in range(1, steps + 1):
        lp += sum(-((a[0] * k) ** 2) / 100 for k in range(1, t + 1))
        lp += np.sum(-np.exp(a) / 10)
        lp += -((a[2] - 1) ** 2) if a[1] > 0 else np.log1p(a[2] ** 2)
        sd = np.exp(a[1])
        lp += -0.5 * ((X[t - 1] - a[0]) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
        lp += -np.sum(a[: t % 3 + 1]) / 10
    return lp


def test_kept_values_give_the_recomputed_answer():
    model = CompiledModel(check(parse(CHANGING, "c.model")), {"T": np.asarray(5), "x": X})
    zeta = np.random.default_rng(3).normal(size=(6, 3))
    zeta[:3, 1] = np.abs(zeta[:3, 1])  # both branches of the `if` on a[2]
    zeta[3:, 1] = -np.abs(zeta[3:, 1])
    np.testing.assert_allclose(model.log_joint(zeta), [_reference(z, 5) for z in zeta], rtol=1e-12)
    assert not model.per_sample
    g = grad(lambda z: anp.sum(model.log_joint(z)))(zeta)
    step = 1e-6
    for i in range(3):
        e = np.zeros(3)
        e[i] = step
        numeric = [(_reference(z + e, 5) - _reference(z - e, 5)) / (2 * step) for z in zeta]
        np.testing.assert_allclose(g[:, i], numeric, rtol=1e-6, atol=1e-6)
