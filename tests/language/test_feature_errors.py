"""Stan constructs ppl does not support are rejected with a message that names the feature, at
file:line:col with a caret and exit code 2; the ones it does take (an empty functions block,
profile blocks, print in transformed data) work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ppl.errors import ModelError, ModelSyntaxError
from ppl.language.checker import check
from ppl.language.parser import parse

ROOT = Path(__file__).resolve().parents[2]
PRIOR = "mu ~ normal(0, 1);"


def _rejected(src: str) -> str:
    with pytest.raises((ModelError, ModelSyntaxError)) as err:
        check(parse(src, "m.stan"))
    return str(err.value)


@pytest.mark.parametrize(
    "src, feature",
    [
        (
            f"parameters {{ real mu; }} model {{ tuple(real, int) x = (1.5, 2); {PRIOR} }}",
            "tuples are not supported",
        ),
        ("data { tuple(real, int) x; } parameters { real mu; } model { }", "tuples"),
        (f"parameters {{ real mu; }} model {{ real a = b.1; {PRIOR} }}", "tuples"),
        ("data { complex z; } parameters { real mu; } model { }", "complex numbers"),
        (f"parameters {{ real mu; }} model {{ complex_vector[2] z; {PRIOR} }}", "complex numbers"),
        (f"parameters {{ real mu; }} model {{ real z = 2.5i; {PRIOR} }}", "imaginary literals"),
        (f"parameters {{ real mu; }} model {{ real z = get_real(3); {PRIOR} }}", "complex numbers"),
        (
            "data { matrix[2, 2] A; vector[2] b; } parameters { real mu; } "
            f"model {{ vector[2] x = A \\ b; {PRIOR} }}",
            "left-division operator",
        ),
        (
            f"parameters {{ real mu; }} model {{ real t = target(); {PRIOR} }}",
            "'target' is a Stan function",
        ),
        (
            "parameters { real mu; } transformed parameters { real s = 2 * mu; jacobian += 1; }"
            f" model {{ {PRIOR} }}",
            "`jacobian +=`",
        ),
        (
            "parameters { real mu; } model { mu ~ wiener(1, 2, 3, 4); }",
            "'wiener' is a Stan function",
        ),
        (
            "parameters { real mu; } model { real y = integrate_1d(f, 1, 2, {3.0}); "
            f"{PRIOR} }}",
            "DAE solvers, algebraic solvers, integrate_1d",
        ),
        (
            f"parameters {{ real mu; }} model {{ print(mu); {PRIOR} }}",
            "print() is supported in transformed data only",
        ),
        (f"parameters {{ real mu; }} model {{ return 1; {PRIOR} }}", "'return' is only allowed"),
        (
            "data { vector[2] y; } parameters { real mu; } "
            "model { y ~ multi_normal(rep_vector(mu, 2), diag_matrix(rep_vector(1, 2))) T[0, ]; }",
            "truncation T[lower, upper] needs a univariate distribution with a CDF",
        ),
    ],
)
def test_unsupported_features_are_named(src, feature):
    message = _rejected(src)
    assert feature in message
    assert message.startswith("m.stan:1:")
    assert "\n    " in message and message.rstrip().endswith("^")  # the line and a caret


def test_unknown_names_that_stan_does_not_define_still_get_suggestions():
    message = _rejected(f"parameters {{ real mu; }} model {{ real z = sqr(2.0); {PRIOR} }}")
    assert "unknown function 'sqr'" in message


def test_functions_block_parses_definitions_and_forward_declarations():
    prog = parse(
        "functions {\n"
        "  real f(real x, data array[] real y, vector v);\n"
        "  real f(real x, data array[] real y, vector v) { return x + y[1]; }\n"
        "  void g(array[,] real a) { return; }\n"
        "  real[] h(real[] a) { return a; }\n"
        "}\n"
        f"parameters {{ real mu; }} model {{ {PRIOR} }}\n",
        "m.stan",
    )
    sigs = [(f.name, f.return_type, f.body is None) for f in prog.functions]
    assert sigs == [
        ("f", "real", True),
        ("f", "real", False),
        ("g", "void", False),
        ("h", "array[] real", False),
    ]
    args = [(a.name, a.type_text, a.data_only) for a in prog.functions[0].args]
    assert args == [("x", "real", False), ("y", "array[] real", True), ("v", "vector", False)]


def test_empty_functions_block_and_profile_are_accepted():
    prog = check(
        parse(
            "functions { } parameters { real mu; } "
            'model { profile("prior") { mu ~ normal(0, 1); } }',
            "m.stan",
        )
    ).program
    assert prog.functions == [] and len(prog.model) == 1


def test_cli_exit_code_and_print_in_transformed_data(tmp_path):
    bad = tmp_path / "bad.stan"
    bad.write_text("data { complex z; }\nparameters { real mu; }\nmodel { }\n")
    run = [sys.executable, "-m", "ppl.cli", "check", str(bad)]
    out = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 2
    assert "complex numbers are not supported" in out.stderr and "Traceback" not in out.stderr
    good = tmp_path / "good.stan"
    good.write_text(
        "data { int N; vector[N] y; }\n"
        'transformed data { print("N = ", N, ", y = ", y); for (n in 1:N) print(y[n]); }\n'
        "parameters { real mu; }\nmodel { y ~ normal(mu, 1); }\n"
    )
    data = tmp_path / "d.json"
    data.write_text('{"N": 2, "y": [1.5, 2]}')
    out = subprocess.run(
        [sys.executable, "-m", "ppl.cli", "check", str(good), str(data)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.splitlines()[:3] == ["N = 2, y = [1.5,2]", "1.5", "2"]
