"""The language front end: every shipped model parses and checks, every grammar feature parses into
the right AST, and syntax / semantic errors point at the right place and name the thing involved."""

from __future__ import annotations

from pathlib import Path

import pytest

from ppl.errors import ModelError, ModelSyntaxError, PplError
from ppl.language import ast
from ppl.language.checker import check
from ppl.language.parser import parse, parse_file
from ppl.language.types import INT, MATRIX, REAL, ROW_VECTOR, VECTOR, SType

ROOT = Path(__file__).resolve().parents[2]
MODEL_FILES = sorted(ROOT.glob("models/posteriordb/*/model.stan")) + sorted(
    ROOT.glob("models/**/*.model")
)


def checked(src: str):
    return check(parse(src, "test.model"))


def syntax_error(src: str) -> str:
    with pytest.raises(ModelSyntaxError) as info:
        parse(src, "bad.model")
    return str(info.value)


def model_error(src: str) -> str:
    with pytest.raises(ModelError) as info:
        checked(src)
    msg = str(info.value)
    assert "test.model:" in msg and "Traceback" not in msg
    return msg


def model_stmts(src_model: str, header: str = "") -> list[ast.Stmt]:
    return checked(f"{header}\nmodel {{\n{src_model}\n}}").program.model


# ---- every shipped model -----------------------------------------------------------------------


def test_model_files_found():
    assert len(MODEL_FILES) >= 15


@pytest.mark.parametrize("path", MODEL_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_models_parse_and_check(path):
    prog = parse_file(str(path))
    assert prog.model, "every model has a model block"
    out = check(prog)
    assert out.names_in("parameters")


def test_missing_model_file():
    with pytest.raises(ModelSyntaxError, match="not found"):
        parse_file("/nonexistent/x.model")


# ---- grammar features ----------------------------------------------------------------------------

ALL_BLOCKS = """
// line comment
# hash comment
/* block
   comment */
data {
  int<lower=0> N;
  int<lower=1> K;
  vector[N] y;
  real x[N];                       // old array syntax
  array[N] vector[K] z;
  matrix[N, K] X;
  array[N] int<lower=1, upper=K> g;
  real<lower=0> s0;
}
transformed data {
  real m = mean(y);
  vector[N] yc = y - m;
  int M = N %/% 2;
}
parameters {
  real mu;
  real<lower=0> sigma;
  real<lower=-1, upper=(1 + s0) * 2> b;
  vector<offset=mu, multiplier=sigma>[K] beta;
  simplex[K] theta;
  ordered[2] cut;
  row_vector[K] r;
  cholesky_factor_corr[K] L;
}
transformed parameters {
  vector[N] eta = X * beta;
  real t = mu > 0 ? mu : -mu;
}
model {
  y ~ normal(eta, sigma);
  target += normal_lpdf(mu | 0, 1);
  sigma ~ Gamma(2, 1);
}
generated quantities {
  real yrep = normal_rng(mu, sigma);
}
"""


def test_all_blocks_and_types():
    prog = checked(ALL_BLOCKS)
    syms = prog.symbols
    assert syms["x"].stype == SType("real", "scalar", 1)
    assert syms["z"].stype == SType("real", "vector", 1)
    assert syms["X"].stype == MATRIX
    assert syms["g"].stype == SType("int", "scalar", 1)
    assert syms["r"].stype == ROW_VECTOR
    assert syms["theta"].stype == VECTOR and syms["L"].stype == MATRIX
    assert syms["M"].block == "transformed_data" and syms["M"].stype == INT
    assert syms["eta"].block == "transformed_parameters"
    assert syms["yrep"].block == "generated_quantities"
    p = prog.program
    beta = next(d for d in p.parameters if d.name == "beta")
    assert set(beta.spec.bounds) == {"offset", "multiplier"}
    b = next(d for d in p.parameters if d.name == "b")
    assert isinstance(b.spec.bounds["upper"], ast.BinOp) and b.spec.bounds["lower"].value == -1
    x = next(d for d in p.data if d.name == "x")
    assert x.spec.kind == "real" and len(x.spec.array_sizes) == 1
    tilde = p.model[2]
    assert isinstance(tilde, ast.Tilde) and tilde.dist == "Gamma"
    inc = p.model[1]
    assert (
        isinstance(inc, ast.TargetInc) and inc.expr.conditional and inc.expr.name == "normal_lpdf"
    )


def test_model_block_only_and_empty_statements():
    prog = checked("model { ; }")
    assert isinstance(prog.program.model[0], ast.Block)


def test_control_flow_parses():
    stmts = model_stmts(
        """
        real acc = 0;
        for (i in 1:N) {
          if (i == 2) continue;
          else if (i > 4) break;
          else { acc += i; }
        }
        while (acc > 0) { acc -= 1; if (acc < 3) break; }
        for (v in y) acc += v;
        { real inner = 1; acc *= inner; acc /= 2; }
        mu ~ normal(acc, 1);
        """,
        "data { int N; vector[N] y; } parameters { real mu; }",
    )
    kinds = [type(s).__name__ for s in stmts]
    assert kinds == ["Decl", "For", "While", "ForEach", "Block", "Tilde"]
    loop = stmts[1]
    inner_if = loop.body.stmts[0]
    assert isinstance(inner_if.then, ast.Continue)
    assert isinstance(inner_if.otherwise, ast.If) and isinstance(inner_if.otherwise.then, ast.Break)
    assert [s.op for s in stmts[4].stmts[1:]] == ["*=", "/="]


def test_expressions_types():
    stmts = model_stmts(
        """
        real a = x[1:2][1];
        vector[2] v1 = y[:2];
        vector[2] v2 = y[2:];
        vector[3] v3 = y[g];
        real m = X[1, 2];
        row_vector[3] rr = X[1];
        vector[3] cc = X[:, 1];
        row_vector[3] yt = y';
        real q = y' * y;
        matrix[3, 3] outer = y * y';
        real tern = a > 0 ? a : 0;
        int k = N > 1 && N < 5 || !(N == 3);
        real pw = 2 ^ 3;
        vector[3] el = y .* y ./ y;
        array[2] real arr = {1.0, 2};
        row_vector[2] rv = [1, 2];
        matrix[2, 2] mm = [[1, 2], [3, 4]];
        mu ~ normal(a + v1[1] + v2[1] + v3[1] + m + rr[1] + cc[1] + yt[1] + q, 1);
        """,
        "data { int N; vector[3] y; array[3] int g; matrix[3, 3] X; array[3] real x; }"
        " parameters { real mu; }",
    )
    types = {s.name: s.init.type for s in stmts if isinstance(s, ast.Decl)}
    assert types["a"] == REAL
    assert types["v1"] == VECTOR and types["v2"] == VECTOR and types["v3"] == VECTOR
    assert types["m"] == REAL and types["rr"] == ROW_VECTOR and types["cc"] == VECTOR
    assert types["yt"] == ROW_VECTOR and types["q"] == REAL and types["outer"] == MATRIX
    assert types["tern"] == REAL and types["k"] == INT and types["pw"] == REAL
    assert types["arr"] == SType("real", "scalar", 1)
    assert types["rv"] == ROW_VECTOR and types["mm"] == MATRIX
    kinds = [item.kind for item in stmts[1].init.items] + [
        item.kind for item in stmts[2].init.items
    ]
    assert kinds == ["to", "from"]


def test_precedence():
    (s,) = model_stmts("target += -a + b * c ^ 2;", "parameters { real a; real b; real c; }")
    e = s.expr
    assert isinstance(e, ast.BinOp) and e.op == "+"
    assert isinstance(e.left, ast.UnOp) and e.left.op == "neg"
    assert e.right.op == "*" and e.right.right.op == "^"


def test_number_literals():
    (s,) = model_stmts("target += 1.5e-3 + .5 + 2. + 3E2 + 7;")
    nums = [e.value for e in ast.iter_exprs(s) if isinstance(e, ast.Num)]
    assert nums == [1.5e-3, 0.5, 2.0, 300.0, 7]
    assert isinstance(nums[-1], int)


def test_old_assignment_arrow_and_print():
    stmts = model_stmts("real a; a <- 1; mu ~ normal(a, 1);", "parameters { real mu; }")
    assert isinstance(stmts[1], ast.Assign)
    prog = checked(
        'transformed data { real a = 1; print("a = ", a); } parameters { real mu; }'
        " model { mu ~ normal(a, 1); }"
    ).program
    assert isinstance(prog.transformed_data[1], ast.Print)


def test_distribution_names_capitalised_and_lpdf_forms():
    model_stmts(
        "y ~ Normal(mu, 1); target += normal_lupdf(y | mu, 1); target += poisson_lpmf(k | 3);"
        " target += normal_lpdf(y | mu, 1);",
        "data { real y; int k; } parameters { real mu; }",
    )


# ---- syntax errors -------------------------------------------------------------------------------


def test_syntax_error_location_line_and_caret():
    src = "parameters {\n  real mu;\n}\nmodel {\n  mu ~ normal(0, 1)\n  mu ~ normal(0, 1);\n}\n"
    msg = syntax_error(src)
    first, line, caret = msg.splitlines()[:3]
    assert first.startswith("bad.model:6:3: syntax error")
    assert "expected" in first and "';'" in first
    assert line.strip() == "mu ~ normal(0, 1);"
    assert caret.index("^") == line.index("mu")


def test_syntax_error_unexpected_character():
    msg = syntax_error("parameters { real mu; }\nmodel { mu ~ normal(0, 1) @ ; }")
    first, line, caret = msg.splitlines()[:3]
    assert first.startswith("bad.model:2:27:") and "'@'" in first
    assert line[caret.index("^")] == "@"


def test_syntax_error_at_end_of_file():
    msg = syntax_error("parameters { real mu; }\nmodel { mu ~ normal(0, 1);")
    assert msg.startswith("bad.model:2:") and "end of file" in msg and "expected" in msg
    assert "'}'" in msg


def test_syntax_error_blocks_out_of_order():
    msg = syntax_error("model { }\nparameters { real mu; }")
    assert "bad.model:2:1" in msg and "expected" in msg


def test_syntax_error_missing_model_block():
    msg = syntax_error("parameters { real mu; }")
    assert "end of file" in msg and "model" in msg


def test_syntax_error_unicode_and_tabs():
    msg = syntax_error("parameters { real μ; }\nmodel { }")
    assert msg.startswith("bad.model:1:19:") and "'μ'" in msg


def test_syntax_error_is_user_error():
    with pytest.raises(PplError):
        parse("model { x = ; }")


# ---- semantic errors -----------------------------------------------------------------------------

BASE = "data { int N; vector[N] y; matrix[N, N] X; } parameters { real mu; real<lower=0> sigma; }\n"


def test_undefined_name_with_suggestion():
    msg = model_error(BASE + "model { y ~ normal(mu, sigmaa); }")
    assert "undefined name 'sigmaa'" in msg and "did you mean 'sigma'" in msg
    assert "test.model:2:24:" in msg


def test_unknown_function_with_suggestion():
    msg = model_error(BASE + "model { y ~ normal(expp(mu), sigma); }")
    assert "unknown function 'expp'" in msg and "exp" in msg


def test_unknown_distribution_with_suggestion():
    msg = model_error(BASE + "model { y ~ normall(mu, sigma); }")
    assert "unknown distribution 'normall'" in msg and "normal" in msg


def test_wrong_argument_count():
    msg = model_error(BASE + "model { y ~ normal(mu); }")
    assert "normal takes 2 arguments" in msg and "got 1" in msg
    msg = model_error(BASE + "model { target += exp(mu, sigma); }")
    assert "exp takes 1 argument" in msg and "got 2" in msg
    msg = model_error(BASE + "model { target += normal_lpdf(mu | 0); }")
    assert "normal takes 2 arguments" in msg


def test_type_mismatch_vector_plus_matrix():
    msg = model_error(BASE + "model { vector[N] v = y + X; }")
    assert "vector" in msg and "matrix" in msg


def test_type_mismatch_in_assignment():
    msg = model_error(BASE + "model { real a = y; }")
    assert "cannot assign a value of type vector to 'a' of type real" in msg
    msg = model_error(BASE + "model { int k = 1.5; }")
    assert "type real to 'k' of type int" in msg


def test_assign_to_data_and_parameters():
    assert "cannot assign to data variable 'y'" in model_error(BASE + "model { y[1] = 0; }")
    assert "cannot assign to parameters variable 'mu'" in model_error(BASE + "model { mu = 0; }")
    msg = model_error(BASE + "transformed parameters { real t = 1; } model { t = 2; }")
    assert "'t'" in msg and "outside the block" in msg


def test_tilde_outside_model_block():
    msg = model_error(BASE + "transformed parameters { real t = 1; t ~ normal(0, 1); } model { }")
    assert "'~' statements are only allowed in the model block" in msg
    msg = model_error(BASE + "model { } generated quantities { real t = 1; t ~ normal(0, 1); }")
    assert "only allowed in the model block" in msg


def test_target_outside_model_block():
    msg = model_error(BASE + "model { } generated quantities { target += 1; }")
    assert "'target +='" in msg


def test_non_integer_sizes():
    msg = model_error("data { real R; vector[R] v; } model { }")
    assert "size of 'v' must be an integer" in msg
    msg = model_error("data { array[2.5] real v; } model { }")
    assert "size of 'v' must be an integer" in msg
    msg = model_error("data { int N; } model { for (i in 1:2.0) { } }")
    assert "loop bounds must be integers" in msg


def test_binary_int_parameter_accepted_other_ints_rejected():
    prog = checked("parameters { int<lower=0, upper=1> z; } model { }")
    assert prog.symbols["z"].stype == INT
    msg = model_error("parameters { int<lower=0, upper=5> z; } model { }")
    assert "integer parameter 'z' must be binary" in msg
    assert "must be binary" in model_error("parameters { int z; } model { }")


def test_other_semantic_errors():
    assert "already declared" in model_error(BASE + "model { real mu; }")
    assert "inside a loop" in model_error(BASE + "model { break; }")
    assert "a condition must be a scalar" in model_error(BASE + "model { if (y) { } }")
    assert "an index must be an integer" in model_error(BASE + "model { target += y[1.5]; }")
    assert "too many indexes" in model_error(BASE + "model { target += mu[1]; }")
    assert "cannot multiply vector by vector" in model_error(
        BASE + "model { target += sum(y * y); }"
    )
    assert "undefined name 'g'" in model_error(
        BASE + "model { target += g; } generated quantities { real g = 1; }"
    )
    assert "can only be used in transformed data or generated quantities" in model_error(
        BASE + "model { mu ~ normal(normal_rng(0, 1), 1); }"
    )
    assert "use poisson_lpmf" in model_error(BASE + "model { target += poisson_lpdf(N | mu); }")
    assert "cannot be given a value in the data block" in model_error(
        "data { int N = 3; } model { }"
    )
    assert "cannot assign to loop variable 'i'" in model_error("model { for (i in 1:3) i = 2; }")


def test_dimension_checks_on_distributions():
    msg = model_error(BASE + "model { mu ~ multi_normal(y, X); }")
    assert "multi_normal needs a vector" in msg


def test_regression_constrained_type_after_another_declaration():
    # bug: `simplex`/`ordered`/`cov_matrix`... after any other declaration lexed as a NAME
    prog = parse(
        "parameters { real mu; simplex[3] t; vector[2] v; ordered[2] o; corr_matrix[2] C; }"
        " model { }"
    )
    assert [d.spec.kind for d in prog.parameters] == [
        "real",
        "simplex",
        "vector",
        "ordered",
        "corr_matrix",
    ]
    # names that merely start with those words are still names
    prog = parse(
        "data { int simplexes; vector[simplexes] ordered_x; } model { real cov_matrix_v = 1; }"
    )
    assert [d.name for d in prog.data] == ["simplexes", "ordered_x"]
