"""The console's summary table never hides a scalar (issue 34): past --max-rows the long
vectors and matrices show their first elements and a line saying how many more, and one line
says where the full table is."""

from __future__ import annotations

import json

import numpy as np
import pytest

import ppl
from ppl.outputs.summary import format_table, scalar_names
from tests.cli.test_cli import run_main

MODEL = "models/hard/measurement_error/model.stan"
SCALARS = ["mu_x", "sigma_x", "alpha", "beta", "sigma"]
QUICK = ["--method", "advi", "--iter", "20", "--eta", "0.1", "--no-polish", "--quiet"]


def _rows(names):
    return [(n, 1.0, 0.01, 0.5, 0.2, 1.0, 1.8) for n in names]


def _names_in(text: str) -> list[str]:
    """The parameter names of the table's rows (not its header, rule or notes)."""
    table = text[text.index("parameter ") :] if text.startswith("parameter ") else \
        text[text.index("\nparameter ") + 1 :]  # fmt: skip
    return [line.split()[0] for line in table.splitlines()[2:]
            if line.strip() and not line.lstrip().startswith(("...", "("))]  # fmt: skip


def test_scalars_after_a_long_vector_are_shown():
    x = scalar_names("x", (100,))
    table = format_table(_rows([*x, *SCALARS]), 60, where="summary.csv")
    names = _names_in(table)
    assert names == [*x[:55], *SCALARS]  # 60 rows: every scalar, then as much of x as fits
    assert "... x: 45 more of 100 rows" in table
    assert table.splitlines()[-1] == (
        "(45 rows of long vectors and matrices not shown; the full table: summary.csv)"
    )


def test_the_rows_left_are_shared_between_containers_and_nothing_is_cut_when_it_fits():
    rows = _rows([*scalar_names("a", (3,)), *scalar_names("W", (10, 10)), "mu",
                  *scalar_names("z", (2, 4))])  # fmt: skip
    names = _names_in(format_table(rows, 12))
    # 11 rows for three containers after mu: 3 of a (all), 4 of W, 4 of z
    assert names == ["a[1]", "a[2]", "a[3]", "W[1,1]", "W[2,1]", "W[3,1]", "W[4,1]", "mu",
                     "z[1,1]", "z[2,1]", "z[1,2]", "z[2,2]"]  # fmt: skip
    for limit in (0, len(rows)):  # 0: no limit
        assert _names_in(format_table(rows, limit)) == [r[0] for r in rows]
        assert "not shown" not in format_table(rows, limit)


def test_more_scalars_than_rows_are_all_shown():
    names = [f"s{i}" for i in range(30)] + scalar_names("v", (5,))
    table = format_table(_rows(names), 10)
    assert _names_in(table) == names[:30] and "... v: 5 more of 5 rows" in table


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The measurement-error model on 100 rows: 105 rows of summary, 5 of them scalars."""
    rng = np.random.default_rng(4)
    x = rng.normal(1, 2, 100)
    path = tmp_path_factory.mktemp("me") / "data.json"
    x_meas, y = x + rng.normal(0, 0.3, 100), 0.5 + 1.5 * x + rng.normal(0, 0.4, 100)
    path.write_text(json.dumps({"N": 100, "x_meas": list(x_meas), "tau": 0.3, "y": list(y)}))
    return path


def test_cli_shows_alpha_beta_sigma_and_says_where_the_rest_is(data, tmp_path):
    rc, out, err = run_main(["fit", MODEL, str(data), *QUICK, "--output", str(tmp_path / "o")])
    assert rc == 0, err
    table = out[out.index("\nparameter ") : out.index("\nwrote")]
    names = _names_in(table)
    assert names[-5:] == SCALARS and len(names) == 60 and names[0] == "x[1]"
    assert f"the full table: {tmp_path / 'o' / 'summary.csv'}; all rows here with --max-rows 0" \
        in table  # fmt: skip
    rc, out, err = run_main(["fit", MODEL, str(data), *QUICK, "--max-rows", "10"])
    assert rc == 0, err
    assert _names_in(out) == [*scalar_names("x", (5,)), *SCALARS]
    assert "summary.csv with --output DIR; all rows here with --max-rows 0" in out
    rc, out, err = run_main(["fit", MODEL, str(data), *QUICK, "--max-rows", "0"])
    assert rc == 0 and "not shown" not in out and "x[100] " in out


@pytest.mark.filterwarnings("ignore::ppl.errors.UnreliableFitWarning")  # 20 iterations
def test_fit_report_elides_as_the_cli(data):
    fit = ppl.Model.from_file(MODEL).fit(
        str(data), method="advi", iterations=20, eta=0.1, refine_draws=0
    )
    report = fit.report(max_rows=10)
    assert _names_in(report) == [
        *scalar_names("x", (5,)), *SCALARS
    ]  # fmt: skip
    assert "the full table: fit.summary(), or summary.csv from fit.save(DIR)" in report
