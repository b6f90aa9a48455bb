"""Int arrays filled by loops in `transformed data` work as indices (issue 19: they used to stop
the fit with `internal error: NeedsPerSample`, after `ppl check` had said OK).

Each fill is compared with the same model given the finished array as data.
"""

from __future__ import annotations

import numpy as np
import pytest

from ppl.language.checker import check
from ppl.language.parser import parse
from ppl.runtime.compiler import CompiledModel

N = 7
Y = np.array([0.4, 1.3, -0.2, 2.2, 3.1, 2.7, 3.9])
GROUPS = np.array([1, 1, 1, 2, 2, 2, 2])

FILLS = {
    "vectorised": "for (n in 1:N) grp[n] = 1 + (n > N / 2);",
    "branch": "for (n in 1:N) { if (n <= N / 2) grp[n] = 1; else grp[n] = 2; }",
    "recurrence": "grp[1] = 1; for (n in 2:N) grp[n] = grp[n - 1] + (n == N / 2 + 1);",
}
USES = {
    "multi_index": "y ~ normal(mu[grp], 1);",
    "loop_index": "for (n in 1:N) y[n] ~ normal(mu[grp[n]], 1);",
}


def _model(fill: str | None, use: str) -> CompiledModel:
    data_decl = "" if fill else " array[N] int grp;"
    tdata = f"transformed data {{ array[N] int grp; {fill} }}" if fill else ""
    src = f"""
data {{ int N; vector[N] y;{data_decl} }}
{tdata}
parameters {{ vector[2] mu; }}
model {{ mu ~ normal(0, 5); {use} }}
"""
    data = {"N": np.asarray(N), "y": Y}
    if not fill:
        data["grp"] = GROUPS
    return CompiledModel(check(parse(src, "td.model")), data)


@pytest.mark.parametrize("use", sorted(USES))
@pytest.mark.parametrize("fill", sorted(FILLS))
def test_loop_filled_int_array_indexes_like_data(fill, use):
    filled = _model(FILLS[fill], USES[use])
    assert filled.data["grp"].dtype.kind == "i"
    np.testing.assert_array_equal(filled.data["grp"], GROUPS)
    given = _model(None, USES[use])
    zeta = np.random.default_rng(0).normal(size=(5, 2))
    np.testing.assert_allclose(filled.log_joint(zeta), given.log_joint(zeta), rtol=1e-12)
    assert not filled.per_sample


def test_slice_assignments_in_transformed_data_fill_the_same_matrix_and_check_sizes():
    """`Xs[:, k] = ...`, `Xs[2:3, k] = ...` and `A[:, 2, :] = ...` are one numpy assignment each
    (ppl.runtime.evaluator.assign_plain): the same values as numpy's own."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(5, 3))
    src = """
data { matrix[5, 3] X; }
transformed data {
  matrix[5, 3] Xs;
  array[2, 3, 4] real A;
  for (k in 1:3) Xs[:, k] = (X[:, k] - mean(X[:, k])) / sd(X[:, k]);
  Xs[2:3, 1] = rep_vector(7, 2);
  for (i in 1:2) for (j in 1:3) A[i, j] = rep_array(0.5 * i, 4);
  A[:, 2, :] = rep_array(-1.0, 2, 4);
}
parameters { real mu; }
model { mu ~ normal(0, 1); }
"""
    model = CompiledModel(check(parse(src, "td.model")), {"X": X})
    want = (X - X.mean(axis=0)) / X.std(axis=0, ddof=1)
    want[1:3, 0] = 7
    assert np.allclose(np.asarray(model.data["Xs"]).reshape(5, 3), want, atol=1e-14)
    A = np.asarray(model.data["A"]).reshape(2, 3, 4)
    assert np.all(A[:, 1, :] == -1) and np.all(A[0, [0, 2], :] == 0.5) and np.all(A[1, 2] == 1)
