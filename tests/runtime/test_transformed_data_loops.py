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
