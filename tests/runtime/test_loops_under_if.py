"""Loops under an `if` (issue 32, item 5): left out of the count made before the loop around
them runs (they may not run), and charged when they run, for the rows that take the branch; not
at their full size. 10^4 rows, a 2,000-iteration loop under `if (i == 1)`: 12,000 iterations."""

from __future__ import annotations

import pytest

from tests.cli.test_cli import run_main

TD = """data { int N; int M; }
transformed data {
  vector[N] v;
  for (i in 1:N) {
    v[i] = i;
    if (i == 1) {
      for (j in 1:M) v[i] += j;
    }
  }
}
parameters { real mu; }
model { mu ~ normal(sum(v) / 1e12, 1); }
"""
MODEL = """data { int N; int M; }
parameters { real mu; }
model {
  vector[N] v;
  for (i in 1:N) {
    v[i] = i;
    if (i == 1) {
      for (j in 1:M) v[i] += j;
    }
  }
  mu ~ normal(sum(v) / 1e12, 1);
}
"""


@pytest.mark.parametrize("limit, ok", [(15000, True), (11000, False)])
def test_a_loop_under_an_if_is_charged_for_the_rows_taking_it(tmp_path, limit, ok):
    model = tmp_path / "m.model"
    model.write_text(TD)
    argv = ["check", str(model), "--set", "N=10000", "--set", "M=2000"]
    rc, _, err = run_main([*argv, "--max-loop-iterations", str(limit)])
    assert rc == (0 if ok else 2), err
    if not ok:
        assert "m.model:7:7:" in err and f"limit of {limit:,} loop iterations" in err


@pytest.mark.slow  # a fit over 10^4 rows: a minute on a loaded machine
def test_in_the_model_block_too(tmp_path):
    model = tmp_path / "m.model"
    model.write_text(MODEL)
    argv = ["fit", str(model), "--set", "N=10000", "--set", "M=2000", "--quiet", "--iter", "5",
            "--method", "advi"]  # fmt: skip
    rc, _, err = run_main([*argv, "--max-loop-iterations", "15000"])
    assert rc == 0, err
    rc, _, err = run_main([*argv, "--max-loop-iterations", "11000"])
    assert rc == 2 and "m.model:8:7:" in err, err
