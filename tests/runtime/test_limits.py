"""Resource limits (ppl.limits): runaway loops, huge declared sizes, huge --draws and files that
never end stop at once with exit 2, naming the statement or variable and the limit (issue 23)."""

from __future__ import annotations

import os
import time

import pytest

from ppl.limits import LIMITS, Limits
from tests.cli.test_cli import run_main

PARAM = "parameters { real mu; }\nmodel { mu ~ normal(0, 1); }\n"


def _model(tmp_path, text, name="m.model"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _fails_fast(argv, *expected):
    start = time.perf_counter()
    rc, _, err = run_main(argv)
    assert rc == 2, err
    assert time.perf_counter() - start < 20
    assert "internal error" not in err and "Traceback" not in err
    for text in expected:
        assert text in err, err
    return err


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("transformed data { real s = 0; for (i in 1:1000000000) s += 1; }\n" + PARAM, 1),
        (
            "transformed data { real s = 0; for (i in 1:100000) for (j in 1:1000) s += i; }\n"
            + PARAM,
            1,
        ),
        ("parameters { real mu; }\nmodel {\n  for (i in 1:1000000000) mu ~ normal(0, 1);\n}\n", 3),
        (
            PARAM + "generated quantities {\n  real s = 0;\n  while (1) s += 1;\n}\n",
            5,
        ),
    ],
)
def test_a_runaway_loop_stops_with_the_statement_and_the_limit(tmp_path, text, line):
    model = _model(tmp_path, text)
    args = ["fit", model, "--method", "advi", "--iter", "50", "--draws", "10", "--quiet"]
    _fails_fast([*args, "--max-loop-iterations", "100000"], f"m.model:{line}:",
                      "limit of 100,000 loop iterations", "--max-loop-iterations")  # fmt: skip


def test_the_loop_limit_can_be_raised_and_defaults_back(tmp_path):
    model = _model(tmp_path, "transformed data { real s = 0; for (i in 1:5000) s += i; }\n" + PARAM)
    base = ["fit", model, "--method", "advi", "--iter", "200", "--draws", "10", "--quiet"]
    _fails_fast([*base, "--max-loop-iterations", "4999"], "limit of 4,999")
    assert run_main([*base, "--max-loop-iterations", "5000"])[0] == 0
    assert run_main(base)[0] == 0 and LIMITS == Limits()
    assert run_main([*base, "--max-loop-iterations", "0"])[0] == 2


def test_a_huge_declared_size_is_refused_before_allocating(tmp_path):
    td = _model(tmp_path, "transformed data { matrix[100000, 100000] A; }\n" + PARAM)
    _fails_fast(["fit", td], "m.model:1:", "'A' of size [100000, 100000]: 74.5 GiB",
                "memory budget of 4 GiB", "--max-memory")  # fmt: skip
    sized = _model(tmp_path, "data { int N; }\nparameters { vector[N] z; }\n"
                   "model { z ~ normal(0, 1); }\n", "n.model")  # fmt: skip
    data = tmp_path / "n.json"
    data.write_text('{"N": 1000000000000}')
    _fails_fast(["fit", sized, str(data)], "n.model:2:", "'z' of size [1000000000000]")
    _fails_fast(["check", sized, str(data)], "'z' of size [1000000000000]")
    data.write_text('{"N": 100000}')
    _fails_fast(["fit", sized, str(data), "--draws", "1000000000"],
                "--draws 1000000000 of 100000 parameters: 728 TiB")  # fmt: skip
    _fails_fast(["fit", sized, str(data), "--method", "fullrank"], "a full-rank covariance")


def test_endless_or_huge_files_are_refused_by_size(tmp_path):
    _fails_fast(["check", "/dev/zero"], "/dev/zero: is a device or a socket, not a regular file")
    big = tmp_path / "big.model"
    with open(big, "wb") as f:
        f.truncate(17 * 2**20)  # sparse: 17 MiB of zeros that take no disk
    _fails_fast(["check", str(big)], "the model file is over 16 MiB")
    model = _model(tmp_path, "data { real x; }\n" + PARAM)
    zero = tmp_path / "zero.json"
    os.symlink("/dev/zero", zero)
    _fails_fast(["check", model, str(zero), "--max-memory", "0.01"],
                "zero.json: is a device or a socket, not a regular file")  # fmt: skip


@pytest.mark.parametrize("kind", ["simplex", "unit_vector"])
def test_a_type_with_no_empty_value_refuses_size_zero(tmp_path, kind):
    """simplex[0] took -1 dimensions and made the next parameters share one value."""
    model = _model(tmp_path, f"parameters {{ {kind}[0] s; real mu; real nu; }}\n"
                   "model { mu ~ normal(0, 1); nu ~ normal(5, 1); }\n")  # fmt: skip
    _fails_fast(["fit", model], "m.model:1:", f"a {kind} needs at least 1 element, got 0")
    data = _model(tmp_path, f"data {{ int K; {kind}[K] s; }}\n" + PARAM, "d.model")
    _fails_fast(["check", data, "--set", "K=0"], "line 1", f"a {kind} needs at least 1")


@pytest.mark.parametrize("literal", ["9" * 5000, "2147483648", "99999999999999999999"])
def test_an_integer_literal_over_stans_range_is_a_located_error(tmp_path, literal):
    """Over 4,300 digits was an internal error (Python's int-from-string limit)."""
    model = _model(tmp_path, f"transformed data {{ int n = {literal}; }}\n" + PARAM)
    _fails_fast(["check", model], "m.model:1:28: integer literal", "over Stan's int range")
    ok = _model(tmp_path, "transformed data { int n = 2147483647; }\n" + PARAM, "ok.model")
    assert run_main(["check", ok])[0] == 0


@pytest.mark.parametrize(
    "statement",
    ["if (0) {} " + "else if (0) {} " * 3000, "real z = " + "0 ? 1 : " * 3000 + "2;",
     "{" * 3000 + "}" * 3000],
)  # fmt: skip
def test_deep_nesting_is_a_user_error_naming_the_file(tmp_path, statement):
    """else-if chains and ?: of 500 and more were internal errors (recursion)."""
    model = _model(
        tmp_path, f"parameters {{ real mu; }}\nmodel {{ mu ~ normal(0, 1); {statement} }}\n"
    )
    _fails_fast(["fit", model], "m.model: the model is nested too deeply")


def test_a_negative_seed_is_a_user_error(tmp_path):
    """Found by benchmarks/fuzz.py: numpy's 'expected non-negative integer' was a bug report."""
    _fails_fast(["fit", _model(tmp_path, PARAM), "--seed", "-1"], "--seed must be a non-negative")


def test_a_csv_header_with_a_huge_index_is_a_user_error(tmp_path):
    """X.1000000000 in a header was a MemoryError (issue 23): K inferred from it is checked
    against the memory budget before X is allocated."""
    model = _model(tmp_path, "data { int N; int K; matrix[N, K] X; }\n" + PARAM)
    csv = tmp_path / "x.csv"
    csv.write_text("X.1,X.1000000000\n1,2\n")
    _fails_fast(["check", model, str(csv)], "X (data { int N; int K; matrix[N, K] X; }, line 1)",
                "size [1, 1000000000]: 7.45 GiB, over the memory budget")  # fmt: skip


def test_a_long_run_of_digits_in_a_syntax_error_is_reported_at_once(tmp_path):
    """`int<lower=0>999...9 N;` (a fuzz case): the search for imaginary literals in the statement
    backtracked over every split of the digits (2,000 digits: 57 s); it scans once now."""
    model = tmp_path / "digits.stan"
    model.write_text("data {\n  int<lower=0>" + "9" * 100_000 + " N;\n}\n"
                     "parameters { real x; }\nmodel { x ~ normal(0, 1); }\n")  # fmt: skip
    rc, _, err = run_main(["check", str(model)])
    assert rc == 2 and "digits.stan:2:" in err and "syntax error" in err


def test_an_infinite_bound_is_a_located_error(tmp_path):
    model = tmp_path / "inf.stan"
    model.write_text("parameters { real<lower=1e999> s; }\nmodel { s ~ normal(0, 1); }\n")
    rc, _, err = run_main(["fit", str(model), "--quiet"])
    assert rc == 2 and "inf.stan:1:" in err and "'s': lower bound cannot be +inf" in err
