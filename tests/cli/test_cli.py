"""The `ppl` command line: check and fit end to end, the output files, reproducibility, and fuzzing
that malformed models and data end in a one-line `error:` (exit 2), never an internal error."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppl.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHOOLS = ROOT / "models" / "eight_schools"
NONCENTERED = str(SCHOOLS / "noncentered.model")
SCHOOLS_CSV = str(SCHOOLS / "eight_schools.csv")
SCHOOLS_JSON = str(SCHOOLS / "eight_schools.json")


def run_main(argv: list[str]) -> tuple[int, str, str]:
    """main(argv) in-process; returns (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:  # argparse
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def assert_user_error_or_ok(rc: int, err: str, what: str) -> None:
    assert "Traceback" not in err, f"traceback for {what!r}:\n{err}"
    assert "internal error" not in err, f"internal error for {what!r}:\n{err}"
    assert rc in (0, 2), f"exit code {rc} for {what!r}:\n{err}"
    if rc == 2:
        assert "error:" in err, f"no error message for {what!r}"


def ppl(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ppl.cli", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=cwd,
    )


# ---- check ---------------------------------------------------------------------------------------


def test_check_good_model_and_data(capsys):
    assert main(["check", NONCENTERED, SCHOOLS_CSV]) == 0
    out = capsys.readouterr().out
    assert "model OK" in out and "data OK" in out and "10 unconstrained parameters" in out


def test_check_model_only_and_json_data():
    rc, out, _ = run_main(["check", NONCENTERED])
    assert rc == 0 and "model OK" in out
    rc, out, _ = run_main(["check", NONCENTERED, SCHOOLS_JSON])
    assert rc == 0 and "data OK" in out


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(m, marks=pytest.mark.slow) if m.parent.name == "diamonds-diamonds" else m
        for m in sorted((ROOT / "models" / "posteriordb").glob("*/model.stan"))
    ],
    ids=lambda p: p.parent.name,
)
def test_check_posteriordb_models_with_data(model):
    rc, out, err = run_main(["check", str(model), str(model.parent / "data.json")])
    assert rc == 0, err
    assert "data OK" in out and "not finite" not in err


def test_check_syntax_error_exit_2(tmp_path):
    p = tmp_path / "bad.model"
    p.write_text("parameters { real mu }\nmodel { }\n")
    rc, out, err = run_main(["check", str(p)])
    assert rc == 2
    assert err.startswith(f"error: {p}:1:22: syntax error") and "expected ';'" in err
    assert "^" in err


def test_check_missing_files_and_bad_data(tmp_path):
    rc, _, err = run_main(["check", str(tmp_path / "none.model")])
    assert rc == 2 and "not found" in err
    rc, _, err = run_main(["check", NONCENTERED, str(tmp_path / "none.csv")])
    assert rc == 2 and "error:" in err
    bad = tmp_path / "d.csv"
    bad.write_text("y,sigma\n1,2\nx,3\n")
    rc, _, err = run_main(["check", NONCENTERED, str(bad)])
    assert rc == 2 and "error:" in err


def test_check_binary_parameter_model(tmp_path):
    # regression: `ppl check` with data failed on a model with a binary parameter (the log joint
    # of a binary latent is not defined for continuous methods) although the model is valid
    p = tmp_path / "b.model"
    p.write_text(
        "data { int N; } parameters { int<lower=0, upper=1> z; real mu; }\n"
        "model { mu ~ normal(z, 1); }"
    )
    rc, out, err = run_main(["check", str(p), "--set", "N=3"])
    assert rc == 0, err
    assert "data OK" in out and "binary" in err


def test_bad_options_exit_2():
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_CSV, "--iter", "0"])
    assert rc == 2 and "--iter" in err
    rc, _, err = run_main(["fit"])
    assert rc == 2 and "error:" in err
    rc, _, err = run_main(["check", NONCENTERED, "--set", "J"])
    assert rc == 2 and "--set" in err
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_CSV, "--batch", "4", "--quiet"])
    assert rc == 2 and "--batch" in err and "bbvi or dsvi" in err
    rc, _, err = run_main(
        ["fit", NONCENTERED, SCHOOLS_CSV, "--method", "bbvi", "--batch", "8", "--quiet"]
    )
    assert rc == 2 and "--batch 8" in err and "between 1 and 7" in err


# ---- fit end to end ------------------------------------------------------------------------------

EXPECTED_ROWS = (
    ["mu", "tau"]
    + [f"theta_trans[{j}]" for j in range(1, 9)]
    + [f"theta[{j}]" for j in range(1, 9)]
    + [f"y_rep[{j}]" for j in range(1, 9)]
)


@pytest.fixture(scope="module")
def two_fits():
    """Two identical `ppl fit` runs (same seed) in parallel subprocesses."""
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [Path(tmp) / "a", Path(tmp) / "b"]
        args = [NONCENTERED, SCHOOLS_CSV, "--iter", "2000", "--seed", "1", "--quiet"]
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "ppl.cli", "fit", *args, "--output", str(d)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for d in dirs
        ]
        results = [(p.wait(timeout=240), p.stdout.read(), p.stderr.read()) for p in procs]
        for p in procs:
            p.stdout.close()
            p.stderr.close()
        yield dirs, results


def test_fit_exits_0_and_writes_files(two_fits):
    dirs, results = two_fits
    rc, out, err = results[0]
    assert rc == 0, err
    assert "ELBO" in out and "mu" in out
    assert sorted(p.name for p in dirs[0].iterdir()) == [
        ".ppl-output.json",  # the manifest: which files ppl wrote
        "draws.csv",
        "elbo.csv",
        "fit.json",
        "summary.csv",
    ]


def test_fit_summary_csv(two_fits):
    dirs, _ = two_fits
    with open(dirs[0] / "summary.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["parameter", "mean", "mcse", "sd", "q5", "q50", "q95"]
    assert [r[0] for r in rows[1:]] == EXPECTED_ROWS
    for r in rows[1:]:
        mean, mcse, sd, q5, q50, q95 = map(float, r[1:])
        assert sd >= 0 and q5 <= q50 <= q95
        if r[0].startswith("y_rep"):  # normal_rng: from the draws, 1000 independent ones
            assert mcse == pytest.approx(sd / 1000**0.5, rel=1e-12)
        else:  # quadrature over the grid the road's collapse ends at: no Monte Carlo error
            assert mcse == 0.0
    tau = next(r for r in rows if r[0] == "tau")
    assert float(tau[5]) > 0  # q5: tau has a lower bound of 0
    mu = next(r for r in rows if r[0] == "mu")
    assert -5 < float(mu[1]) < 15
    info = json.loads((dirs[0] / "fit.json").read_text())
    assert "exact given q's grid (quadrature)" in info["exact_summaries"]


def test_fit_draws_fit_json_elbo(two_fits):
    dirs, _ = two_fits
    with open(dirs[0] / "draws.csv", newline="") as f:
        draws = list(csv.reader(line for line in f if not line.startswith("#")))
    cmdstan = [r.replace("[", ".").replace("]", "") for r in EXPECTED_ROWS]  # theta.1
    assert draws[0] == ["lp__", "log_p__", "log_g__", *cmdstan] and len(draws) == 1001
    info = json.loads((dirs[0] / "fit.json").read_text())
    for key in (
        "method",
        "iterations",
        "seconds",
        "gradient_evaluations",
        "elbo",
        "converged",
        "seed",
        "warnings",
        "families",
    ):
        assert key in info, key
    # the default method is auto: its first fit gives tau (real<lower=0>) a gamma family and
    # the rest Gaussians; where the posterior's curvature says that q is too narrow in tau, it
    # ends at the collapse: mu and theta integrated out exactly, a grid on log tau
    assert info["seed"] == 1 and info["method"] == "auto" and 1 <= info["iterations"] <= 13000
    tau = info["variational_parameters"]["tau"]
    if "collapsed" in info["notes"][-1]:
        assert tau["family"] == "grid" and tau["sd"][0] > 0
        assert info["variational_parameters"]["mu"]["family"] == "conditional"
    else:
        assert tau["family"] == "gamma" and tau["shape"][0] > 0 and tau["rate"][0] > 0
        assert info["variational_parameters"]["mu"]["family"] == "gaussian"
    assert set(info["families"]) == {"mu", "tau", "theta_trans"} and isinstance(
        info["warnings"], list
    )
    with open(dirs[0] / "elbo.csv", newline="") as f:
        elbo = list(csv.reader(f))
    assert elbo[0] == ["iteration", "elbo"] and len(elbo) > 1
    assert float(elbo[-1][1]) == pytest.approx(float(elbo[-1][1]))  # numeric


def test_fit_same_seed_same_summary(two_fits):
    dirs, _ = two_fits
    assert (dirs[0] / "summary.csv").read_bytes() == (dirs[1] / "summary.csv").read_bytes()
    assert (dirs[0] / "draws.csv").read_bytes() == (dirs[1] / "draws.csv").read_bytes()


def test_subprocess_user_error_has_no_traceback(tmp_path):
    p = tmp_path / "bad.model"
    p.write_text("parameters { real mu; }\nmodel { mu ~ normall(0, 1); }\n")
    r = ppl("check", str(p))
    assert r.returncode == 2
    assert "unknown distribution 'normall'" in r.stderr and "Traceback" not in r.stderr


def test_fit_binary_parameter_needs_bbvi(tmp_path):
    p = tmp_path / "b.model"
    p.write_text("parameters { int<lower=0, upper=1> z; real mu; } model { mu ~ normal(z, 1); }")
    rc, _, err = run_main(["fit", str(p), "--iter", "10", "--quiet", "--method", "advi"])
    assert rc == 2 and "binary" in err and "bbvi" in err
    rc, out, err = run_main(["fit", str(p), "--iter", "200", "--quiet"])
    assert rc == 0, err
    assert "q(z): Bernoulli" in out and "score-function" in out


# ---- fuzzing -------------------------------------------------------------------------------------

BASE_MODEL = Path(NONCENTERED).read_text()
BASE_CSV = Path(SCHOOLS_CSV).read_text()
TOKENS = [
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ";",
    ",",
    "~",
    "=",
    "+=",
    "<",
    ">",
    ":",
    "?",
    "'",
    "|",
    "0",
    "1",
    "-1",
    "2.5e3",
    "1e999",
    "J",
    "y",
    "theta",
    "tau",
    "real",
    "int",
    "vector",
    "matrix",
    "array",
    "simplex",
    "for",
    "in",
    "if",
    "else",
    "while",
    "break",
    "continue",
    "target",
    "normal",
    "normal_lpdf",
    "normal_rng",
    "lower",
    "upper",
    "offset",
    "model",
    "data",
    "parameters",
    "generated",
    "quantities",
    "transformed",
    "*",
    "/",
    "%",
    "^",
    ".*",
    "'",
    '"s"',
    "print",
    "reject",
    "T",
    "sum",
    "size",
    "rep_vector(1, J)",
    "1:J",
    "[1:2]",
    "[:]",
    "[0]",
    "[J + 1]",
    "y[j]",
    "cholesky_decompose",
    "é",
    "\x00",
    "\u2028",
    "//",
    "/*",
    "*/",
    "#",
    "\t",
    "\n",
]


@st.composite
def mutated(draw, base: str, tokens: list[str]):
    text = base
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(
                [
                    "delete",
                    "insert",
                    "replace_char",
                    "truncate",
                    "replace_token",
                    "delete_token",
                    "unicode",
                ]
            )
        )
        i = draw(st.integers(0, len(text)))
        if op == "delete":
            text = text[:i] + text[i + draw(st.integers(1, 12)) :]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(tokens)) + " " + text[i:]
        elif op == "replace_char":
            text = text[:i] + draw(st.characters(codec="utf-8")) + text[i + 1 :]
        elif op == "truncate":
            text = text[:i]
        elif op == "unicode":
            text = text[:i] + draw(st.text(max_size=5)) + text[i:]
        else:
            words = text.split(" ")
            j = draw(st.integers(0, len(words) - 1))
            if op == "replace_token":
                words[j] = draw(st.sampled_from(tokens))
            else:
                del words[j]
            text = " ".join(words)
    return text


FUZZ = settings(
    max_examples=100,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.slow
@FUZZ
@given(text=mutated(BASE_MODEL, TOKENS))
def test_fuzz_malformed_models(text):
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "m.model"
        p.write_text(text, encoding="utf-8", errors="surrogatepass")
        rc, _, err = run_main(["check", str(p), SCHOOLS_CSV])
    assert_user_error_or_ok(rc, err, text)


CSV_TOKENS = [
    ",",
    "\n",
    '"',
    "nan",
    "inf",
    "-inf",
    "1e400",
    "-",
    ".",
    "1.5",
    "abc",
    "",
    " ",
    "\t",
    "0x10",
    "1_0",
    "\u0661",
    "\ufeff",
    "NA",
    ";",
    "y",
    "sigma",
    "J",
    "9" * 30,
    "-1",
    "0",
    "\r\n",
]


@FUZZ
@given(text=mutated(BASE_CSV, CSV_TOKENS))
def test_fuzz_malformed_csv_data(text):
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "d.csv"
        p.write_text(text, encoding="utf-8", errors="surrogatepass")
        rc, _, err = run_main(["check", NONCENTERED, str(p)])
    assert_user_error_or_ok(rc, err, text)


@FUZZ
@given(value=st.one_of(st.integers(-3, 20), st.floats(allow_nan=True), st.text(max_size=8)))
def test_fuzz_set_values(value):
    rc, _, err = run_main(
        ["check", NONCENTERED, "--set", f"J={value}", "--set", "y=1", "--set", "sigma=1"]
    )
    assert_user_error_or_ok(rc, err, str(value))


# ---- regressions found while fuzzing / probing --------------------------------------------------

REGRESSIONS = {
    # a data-vector bound of the wrong length crashed with a numpy ValueError (internal error)
    "bound_size": (
        "data { int N; vector[N] lo; } parameters { vector<lower=lo>[N + 1] b; } model { }",
        '{"N": 3, "lo": [0, 1, 2]}',
        "lower bound of 'b'",
    ),
    # integer division by zero on data gave a silent garbage value
    "int_div_zero": (
        "data { int N; } parameters { real mu; } model { int k = N %/% 0; mu ~ normal(k, 1); }",
        '{"N": 3}',
        "integer division by zero",
    ),
    # tail() longer than its argument silently wrapped around
    "tail_too_long": (
        "data { int N; vector[N] lo; } parameters { real mu; }\n"
        "model { tail(lo, 9) ~ normal(mu, 1); }",
        '{"N": 3, "lo": [0, 1, 2]}',
        "out of range 1..3",
    ),
    # a constrained type after another parameter declaration was a syntax error
    "simplex_after_real": (
        "data { int N; } parameters { real mu; simplex[N] th; } model { mu ~ normal(0, 1); }",
        '{"N": 3}',
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(REGRESSIONS))
def test_regressions(name, tmp_path):
    src, data, message = REGRESSIONS[name]
    m, d = tmp_path / "m.model", tmp_path / "d.json"
    m.write_text(src)
    d.write_text(data)
    rc, out, err = run_main(["check", str(m), str(d)])
    assert_user_error_or_ok(rc, err, src)
    if message is None:
        assert rc == 0 and "data OK" in out
    else:
        assert rc == 2 and message in err


def test_checkpoint_or_output_cannot_overwrite_an_input(tmp_path):
    model = tmp_path / "m.model"
    model.write_text(Path(NONCENTERED).read_text())
    before = model.read_bytes()
    for option in ("--checkpoint", "--output"):
        rc, _, err = run_main(["fit", str(model), SCHOOLS_JSON, "--method", "advi", option,
                               str(model)])  # fmt: skip
        assert rc == 2 and "is one of the fit's inputs" in err, err
    rc, _, err = run_main(["fit", str(model), SCHOOLS_JSON, "--method", "advi",
                           "--checkpoint", SCHOOLS_JSON])  # fmt: skip
    assert rc == 2 and "is one of the fit's inputs" in err
    assert model.read_bytes() == before


def test_outputs_appear_together_and_stale_temporaries_go(tmp_path, monkeypatch):
    """The set is written whole to a sibling directory first: a failure while writing the third
    file leaves the old four files as they were and no temporary behind; a temporary a killed
    run left (its process gone) is removed by the next write."""
    import subprocess

    import ppl.safefiles as safefiles

    out = tmp_path / "fit"
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--output", str(out)])
    assert rc == 0, err
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f".fit.{dead.pid}.abc123.tmp"
    stale.mkdir()
    (stale / "draws.csv").write_text("left by kill -9")
    real, calls = safefiles.write_new, []

    def failing(path, data, mode=None):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("disk full")
        return real(path, data, mode)

    monkeypatch.setattr(safefiles, "write_new", failing)
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--seed", "2",
                           "--output", str(out)])  # fmt: skip
    assert rc == 2 and "cannot write" in err and "disk full" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit"]  # no temporaries either


def test_messages_escape_control_characters_and_cut_long_lines(tmp_path):
    escape = tmp_path / "escape.model"
    escape.write_text("parameters { real x; }\nmodel { x ~ normal(0, 1) \x1b[31mRED; }\n")
    rc, _, err = run_main(["check", str(escape)])
    assert rc == 2 and "\x1b" not in err and "\\x1b[31mRED" in err
    long = tmp_path / "long.model"
    long.write_text("parameters { real x; }\nmodel { x ~ normal(0, 1) " + "a" * 10**6 + "; }\n")
    rc, _, err = run_main(["check", str(long)])
    assert rc == 2 and "syntax error" in err and len(err) < 2000


def test_numpy_and_autograd_warnings_never_reach_the_terminal(tmp_path):
    """log(mu) with mu < 0 at some draws: numpy warns inside the fit; the user sees only the
    fit's own warnings (and an error's message, when there is one)."""
    model = tmp_path / "w.stan"
    model.write_text("data { int N; vector[N] y; } parameters { real mu; real<lower=0> s; }\n"
                     "model { y ~ normal(mu, s); target += log(mu); }\n")  # fmt: skip
    data = tmp_path / "w.json"
    data.write_text('{"N": 3, "y": [1, 2, 3]}')
    rc, out, err = run_main(["fit", str(model), str(data), "--quiet"])
    assert rc == 0, err
    assert "Warning" not in err and "Warning" not in out and "warnings.warn" not in err
