"""Loops whose bodies branch on data run vectorised by row selection (ppl.runtime.row_selection).

The helpers are checked against plain numpy indexing (values and gradients); whole loop forms,
drawn at random by hypothesis (branches on data and on the loop index, nested `if`s, locals
assigned in branches, `target +=`, element assignment into a vector), must give the log density,
its gradient and the transformed parameters of the sequential, one-row-at-a-time interpretation.
"""

from __future__ import annotations

import autograd.numpy as anp
import numpy as np
from autograd import grad
from hypothesis import given, settings
from hypothesis import strategies as st

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel
from ppl.runtime.row_selection import branch_rows, put_rows, scatter_axis, take_rows

# ---- the array helpers ---------------------------------------------------------------------------


def test_branch_rows_splits_a_data_condition_and_refuses_one_on_parameters():
    cond = np.array([[1, 0, 0, 1, 1]])
    then, other = branch_rows(cond, 5)
    assert then.tolist() == [0, 3, 4] and other.tolist() == [1, 2]
    assert branch_rows(np.ones((3, 5), dtype=int), 5) is None  # differs between draws


def test_take_rows_narrows_per_row_values_only():
    per_row = np.arange(2 * 5 * 3.0).reshape(2, 5, 3)  # (draws, rows, vector[3])
    sel = np.array([1, 4])
    np.testing.assert_array_equal(take_rows(per_row, 1, sel, 5), per_row[:, sel])
    shared = np.ones((2, 1, 3))  # the same for every row
    assert take_rows(shared, 1, sel, 5) is shared
    scalar = np.ones(2)  # draws only
    assert take_rows(scalar, 0, sel, 5) is scalar


def test_put_rows_matches_index_assignment_and_its_gradient():
    rng = np.random.default_rng(0)
    full = rng.normal(size=(3, 6))
    part = rng.normal(size=(3, 2))
    sel = np.array([1, 4])
    expected = full.copy()
    expected[:, sel] = part
    np.testing.assert_array_equal(put_rows(full, 0, sel, part, 6), expected)
    # a row-invariant full value (a declared local, nan) is broadcast first
    out = put_rows(np.nan, 0, sel, part, 6)
    assert np.isnan(out[:, [0, 2, 3, 5]]).all() and np.array_equal(out[:, sel], part)
    weights = rng.normal(size=(3, 6))

    def f(p):
        return anp.sum(weights * put_rows(full, 0, sel, p, 6))

    np.testing.assert_allclose(grad(f)(part), weights[:, sel])


def test_scatter_axis_matches_index_assignment():
    rng = np.random.default_rng(1)
    current = rng.normal(size=(2, 7, 3))
    values = rng.normal(size=(2, 3, 3))
    positions = np.array([6, 0, 3])
    expected = current.copy()
    expected[:, positions] = values
    np.testing.assert_array_equal(scatter_axis(current, 1, positions, values), expected)


def test_int_locals_keep_their_type():
    out = put_rows(0, 0, np.array([0, 2]), np.array([[2, 3]]), 4)
    assert out.dtype.kind == "i" and out.tolist() == [[2, 0, 3, 0]]


# ---- whole loops: vectorised == sequential -------------------------------------------------------

N = 9
DATA = {
    "N": N,
    "x": np.linspace(-1.5, 2.0, N),
    "g": np.array([1, 2, 3, 1, 2, 3, 3, 2, 1]),
}
HEAD = """
data { int N; vector[N] x; array[N] int g; }
parameters { real mu; real<lower=0> s; vector[3] b; }
transformed parameters {
  vector[N] eta;
  for (n in 1:N) {
    eta[n] = mu + x[n] * s;
%s
  }
}
model {
  mu ~ normal(0, 1);
  s ~ lognormal(0, 1);
  b ~ normal(0, 2);
  for (n in 1:N) {
%s
  }
}
"""

CONDITIONS = ["x[n] > 0.2", "g[n] == 2", "n %% 2 == 0", "n > 4", "g[n] != 1 && x[n] < 1"]
TERMS = ["mu", "s", "x[n]", "b[g[n]]", "eta[n]", "b[1] * x[n]"]


@st.composite
def expressions(draw, names: list[str]) -> str:
    a = draw(st.sampled_from(TERMS + names))
    b = draw(st.sampled_from(TERMS + names))
    op = draw(st.sampled_from(["+", "-", "*"]))
    return f"({a} {op} {b})"


@st.composite
def statements(draw, names: list[str], depth: int, model: bool) -> list[str]:
    """A list of statements; `names` are the real locals in scope (grows as locals are declared)."""
    names = list(names)
    out = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["local", "assign_local" if names else "local"]
        kinds += ["target"] if model else ["eta"]
        if depth < 2:
            kinds.append("if")
        kind = draw(st.sampled_from(kinds))
        if kind == "local":
            name = f"a{depth}_{len(out)}"
            out.append(f"real {name} = {draw(expressions(names))};")
            names.append(name)
        elif kind == "assign_local":
            out.append(f"{draw(st.sampled_from(names))} = {draw(expressions(names))};")
        elif kind == "target":
            out.append(f"target += -square({draw(expressions(names))}) / 10;")
        elif kind == "eta":
            out.append(f"eta[n] = {draw(expressions(names))};")
        else:
            cond = draw(st.sampled_from(CONDITIONS)).replace("%%", "%")
            then = draw(statements(names, depth + 1, model))
            text = f"if ({cond}) {{ {' '.join(then)} }}"
            if draw(st.booleans()):
                other = draw(statements(names, depth + 1, model))
                text += f" else {{ {' '.join(other)} }}"
            out.append(text)
    return out


def _compile(src: str, vectorise: bool) -> CompiledModel:
    data = {k: np.asarray(v) for k, v in DATA.items()}
    return CompiledModel(check(parse(src, "branches.model")), data, seed=0, vectorise=vectorise)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    tparams=statements([], 0, model=False),
    body=statements([], 0, model=True),
)
def test_branching_loops_vectorised_equal_sequential(tparams, body):
    src = HEAD % ("\n".join(tparams), "\n".join(body))
    fast, slow = _compile(src, True), _compile(src, False)
    zeta = np.random.default_rng(5).normal(size=(4, fast.dim))
    np.testing.assert_allclose(fast.log_joint(zeta), slow.log_joint(zeta), rtol=1e-11)
    assert not fast.devectorised, "a branch on data made the loop fall back"

    def total(model):
        return grad(lambda z: anp.sum(model.log_joint(z)))(zeta)

    np.testing.assert_allclose(total(fast), total(slow), rtol=1e-10, atol=1e-12)
    da = fast.constrained_draws(zeta, np.random.default_rng(0))
    db = slow.constrained_draws(zeta, np.random.default_rng(0))
    np.testing.assert_allclose(da["eta"], db["eta"], rtol=1e-12)


ORDERED_LOGISTIC_LOOP = """
data { int N; int K; vector[N] x; array[N] int<lower=1, upper=K> y; }
parameters { real beta; ordered[K - 1] c; }
model {
  for (n in 1:N) {
    real eta = x[n] * beta;
    if (y[n] == 1) {
      target += log1m_inv_logit(eta - c[1]);
    } else if (y[n] == K) {
      target += log_inv_logit(eta - c[K - 1]);
    } else {
      target += log(inv_logit(eta - c[y[n] - 1]) - inv_logit(eta - c[y[n]]));
    }
  }
}
"""


def test_ordered_logistic_loop_matches_its_closed_form():
    """The loop with if/else on the outcome against the ordered-logistic likelihood in numpy."""
    rng = np.random.default_rng(2)
    n, k = 40, 4
    x = rng.normal(size=n)
    y = rng.integers(1, k + 1, size=n)
    data = {"N": n, "K": k, "x": x, "y": y}
    model = CompiledModel(
        check(parse(ORDERED_LOGISTIC_LOOP, "ol.model")), {a: np.asarray(v) for a, v in data.items()}
    )
    zeta = rng.normal(size=(3, model.dim))
    lp = model.log_joint(zeta)
    assert not model.devectorised
    for row, value in zip(zeta, lp, strict=True):
        beta = row[0]
        c = np.cumsum(np.concatenate([[row[1]], np.exp(row[2:])]))  # the ordered transform
        log_jac = np.sum(row[2:])
        cuts = np.concatenate([[-np.inf], c, [np.inf]])
        cdf = 1 / (1 + np.exp(-(cuts[None, :] - beta * x[:, None])))
        # P(y = j) = F(c_j - eta) - F(c_{j-1} - eta)
        prob = cdf[np.arange(n), y] - cdf[np.arange(n), y - 1]
        np.testing.assert_allclose(value, np.sum(np.log(prob)) + log_jac, rtol=1e-10)


def test_condition_on_a_parameter_falls_back_to_the_ordinary_loop():
    src = """
data { int N; vector[N] x; }
parameters { real mu; }
model {
  for (n in 1:N) {
    if (x[n] > mu) target += -square(x[n] - mu); else target += -fabs(x[n] - mu);
  }
}
"""
    fast = CompiledModel(check(parse(src, "p.model")), {"N": np.asarray(N), "x": DATA["x"]})
    slow = CompiledModel(
        check(parse(src, "p.model")), {"N": np.asarray(N), "x": DATA["x"]}, vectorise=False
    )
    zeta = np.random.default_rng(0).normal(size=(3, 1))
    np.testing.assert_allclose(fast.log_joint(zeta), slow.log_joint(zeta), rtol=1e-12)


def test_a_term_without_the_loop_index_counts_once_per_row():
    """Found by the generator above: a vectorised loop added `target += -square(mu)` once, not N
    times (a silent wrong answer before row selection)."""
    src = """
data { int N; } parameters { real mu; }
model { for (n in 1:N) { target += -square(mu); mu ~ normal(0, 1); } }
"""
    model = CompiledModel(check(parse(src, "inv.model")), {"N": np.asarray(5)})
    mu = np.array([[0.7]])
    expected = 5 * (-(0.7**2) - 0.5 * np.log(2 * np.pi) - 0.5 * 0.7**2)
    np.testing.assert_allclose(model.log_joint(mu), [expected], rtol=1e-12)


# ---- branches on parameters outside vectorised loops: draw selection -----------------------------

VITERBI_LIKE = """
data { int K; int T; }
parameters { vector[K] a; }
model { a ~ normal(0, 1); }
generated quantities {
  array[T, K] real best;
  array[T, K] int back;
  array[T] int path;
  real total = 0;
  for (t in 1:T) {
    for (k in 1:K) {
      best[t, k] = negative_infinity();
      for (j in 1:K) {
        real lp = a[j] * k - t * square(a[k] - j);
        if (lp > best[t, k]) {
          back[t, k] = j;
          best[t, k] = lp;
        } else {
          total += 1;
        }
      }
    }
  }
  path[T] = 1;
  for (k in 1:K) if (best[T, k] == max(best[T])) path[T] = k;
  for (s in 1:(T - 1)) path[T - s] = back[T - s + 1, path[T - s + 1]];
}
"""


def test_branches_on_parameters_run_once_per_branch_not_once_per_draw():
    """Generated quantities with `if` on parameters (a Viterbi-like recursion) for all draws at
    once equal the one-draw-at-a-time evaluation, ints staying ints."""
    model = CompiledModel(
        check(parse(VITERBI_LIKE, "v.model")), {"K": np.asarray(3), "T": np.asarray(4)}
    )
    zeta = np.random.default_rng(7).normal(size=(12, 3))
    per_draw = model._per_draw_outputs
    model._per_draw_outputs = None  # a fall back to one draw at a time would fail here
    together = model.constrained_draws(zeta, np.random.default_rng(0))
    one_by_one = per_draw(zeta, np.random.default_rng(0))
    assert together.keys() == one_by_one.keys()
    for key in together:
        np.testing.assert_array_equal(together[key], one_by_one[key], err_msg=key)
    assert together["path"].dtype.kind == "i" and together["back"].dtype.kind == "i"
    assert len(np.unique(together["path"][:, -1])) > 1  # the draws did take different branches


def test_target_inside_a_branch_on_a_parameter():
    src = """
data { int N; vector[N] x; }
parameters { real mu; }
model {
  mu ~ normal(0, 1);
  if (mu > 0) { x ~ normal(mu, 1); } else { target += -fabs(mu) * N; }
}
"""
    data = {"N": np.asarray(N), "x": DATA["x"]}
    model = CompiledModel(check(parse(src, "t.model")), data)
    zeta = np.array([[-0.5], [0.3], [1.2], [-2.0]])
    together = model.log_joint(zeta)
    assert not model.per_sample
    one = np.concatenate([model.log_joint(zeta[i : i + 1]) for i in range(4)])
    np.testing.assert_allclose(together, one, rtol=1e-12)
    g_all = grad(lambda z: anp.sum(model.log_joint(z)))(zeta)
    g_one = np.concatenate(
        [grad(lambda z: anp.sum(model.log_joint(z)))(zeta[i : i + 1]) for i in range(4)]
    )
    np.testing.assert_allclose(g_all, g_one, rtol=1e-12)
