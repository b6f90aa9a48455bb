"""`#include` as in stanc3: nested includes next to the including file and in the include paths
(`--include-paths`, `include_paths=`), recursion and a missing file as located errors (exit 2),
and errors inside an included file located at that file's line, with the chain of includes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ppl
from ppl.errors import ModelError, ModelSyntaxError
from ppl.language.frontend import load_model, model_from_text
from ppl.language.includes import expand

MAIN = """functions {
#include "sub/f.stanfunctions"
}
data {
  int N;
  vector[N] y;
}
parameters {
  #include sub/params.stan
}
model {
#include <lib/model.stan>
}
"""


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """main.stan -> sub/params.stan -> sub/more.stan (nested, relative to the includer), and
    lib/model.stan found only through the include paths (in tmp_path/shared)."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "shared" / "lib").mkdir(parents=True)
    (tmp_path / "main.stan").write_text(MAIN)
    (tmp_path / "sub" / "f.stanfunctions").write_text("real twice(real x) { return 2 * x; }\n")
    (tmp_path / "sub" / "params.stan").write_text('real mu;\n#include "more.stan"\n')
    (tmp_path / "sub" / "more.stan").write_text("real<lower=0> sigma;\n")
    (tmp_path / "shared" / "lib" / "model.stan").write_text(
        "mu ~ normal(0, 10);\nsigma ~ normal(0, twice(1));\ny ~ normal(mu, sigma);\n"
    )
    return tmp_path


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ppl.cli", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=120)  # fmt: skip


def _program(root: Path):
    return load_model(str(root / "main.stan"), [str(root / "shared")])


def test_nested_includes_make_the_whole_program(tree: Path):
    checked = _program(tree)
    program = checked.program
    assert [d.name for d in program.parameters] == ["mu", "sigma"]
    assert [f.name for f in program.functions] == ["twice"]
    assert len(program.model) == 3
    assert "#include" not in program.source  # the expanded text parses again (Dask workers)


def test_the_included_program_fits_as_the_flat_one(tree: Path):
    flat = (
        "functions { real twice(real x) { return 2 * x; } } data { int N; vector[N] y; } "
        "parameters { real mu; real<lower=0> sigma; } model { mu ~ normal(0, 10); "
        "sigma ~ normal(0, twice(1)); y ~ normal(mu, sigma); }"
    )
    data = {"N": 5, "y": [0.1, -0.3, 0.5, 1.2, 0.4]}
    included = ppl.Model.from_file(tree / "main.stan", include_paths=[tree / "shared"])
    a = included.fit(data, method="meanfield", seed=3, iterations=300)
    b = ppl.Model(flat).fit(data, method="meanfield", seed=3, iterations=300)
    np.testing.assert_array_equal(a.draws("mu"), b.draws("mu"))


def test_model_from_text_searches_the_include_paths_and_the_current_directory(tree, monkeypatch):
    monkeypatch.chdir(tree)  # "<model>" includes relative to the current directory
    model = ppl.Model(MAIN, include_paths=["shared"])
    assert "N" in repr(model)
    with pytest.raises(ModelSyntaxError, match="cannot find the included file 'lib/model.stan'"):
        ppl.Model(MAIN)


def test_cli_include_paths(tree: Path):
    out = _cli("check", "main.stan", "--include-paths", "elsewhere,shared", cwd=tree)
    assert out.returncode == 0, out.stderr
    assert "main.stan: model OK" in out.stdout


def test_a_missing_file_is_a_located_error_exit_2(tree: Path):
    out = _cli("check", "main.stan", cwd=tree)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert lines[0].startswith("error: main.stan:12:1: cannot find the included file "
                               "'lib/model.stan' (looked in: .")  # fmt: skip
    assert lines[1:3] == ["    #include <lib/model.stan>", "    ^"]


def test_recursion_is_detected_and_names_the_chain(tree: Path):
    (tree / "sub" / "more.stan").write_text('real<lower=0> sigma;\n  #include "params.stan"\n')
    with pytest.raises(ModelSyntaxError) as err:
        _program(tree)
    lines = str(err.value).splitlines()
    assert lines[0].endswith(
        f"{tree}/sub/params.stan includes itself: {tree}/main.stan -> {tree}/sub/params.stan -> "
        f"{tree}/sub/more.stan -> {tree}/sub/params.stan"
    )
    assert lines[0].startswith(f"{tree}/sub/more.stan:2:3: ")
    assert lines[1:] == ['      #include "params.stan"', "      ^",
                         f"    included from {tree}/sub/params.stan:2",
                         f"    included from {tree}/main.stan:9"]  # fmt: skip


def test_a_file_including_itself(tmp_path: Path):
    (tmp_path / "a.stan").write_text('#include "a.stan"\n')
    out = _cli("check", "a.stan", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.startswith("error: a.stan:1:1: a.stan includes itself: a.stan -> a.stan\n")


@pytest.mark.parametrize(
    "line, text, col, message",
    [
        (2, "sigma ~ normal(0, twice(undefined_x));", 25, "undefined name 'undefined_x'"),
        (2, "sigma ~ normal(0, twice(1)) +;", 29, "syntax error: unexpected '+'"),
    ],
)
def test_an_error_in_an_included_file_points_at_its_line(tree, line, text, col, message):
    (tree / "shared" / "lib" / "model.stan").write_text(f"mu ~ normal(0, 1);\n{text}\n")
    out = _cli("check", "main.stan", "--include-paths", "shared", cwd=tree)
    assert out.returncode == 2
    lines = out.stderr.splitlines()
    assert lines[0].startswith(f"error: shared/lib/model.stan:{line}:{col}: {message}")
    assert lines[1] == f"    {text}"
    assert lines[2] == "    " + " " * (col - 1) + "^"
    assert lines[3] == "    included from main.stan:12"


def test_a_run_time_error_in_an_included_file_points_at_its_line(tree: Path):
    (tree / "sub" / "more.stan").write_text(
        "real<lower=0> sigma;\n}\ntransformed parameters {\n  real s = y[3];\n"
    )
    (tree / "shared" / "lib" / "model.stan").write_text(
        "mu ~ normal(0, 1);\nsigma ~ normal(0, 1);\n"
    )
    with pytest.raises(ppl.PplError) as err:
        ppl.Model.from_file(tree / "main.stan", include_paths=[tree / "shared"]).fit(
            {"N": 2, "y": [0.5, 1.0]}, method="meanfield", iterations=50
        )
    assert f"{tree}/sub/more.stan:4:" in str(err.value)


def test_lines_keep_their_files_and_columns(tree: Path):
    text, smap = expand(MAIN, str(tree / "main.stan"), [str(tree / "shared")])
    lines = text.splitlines()
    where = [smap.locate(k + 1)[:2] for k in range(len(lines))]
    assert where[1] == (f"{tree}/sub/f.stanfunctions", 1)
    assert where[8:10] == [(f"{tree}/sub/params.stan", 1), (f"{tree}/sub/more.stan", 1)]
    assert where[-2] == (f"{tree}/shared/lib/model.stan", 3)
    for k, line in enumerate(lines):  # every line is its file's line, column for column
        assert smap.locate(k + 1)[2] == line


def test_a_functions_file_is_included_once_as_in_stanc3(tree: Path):
    twice = '#include "sub/f.stanfunctions"\n#include "sub/f.stanfunctions"\n'
    (tree / "main.stan").write_text(MAIN.replace('#include "sub/f.stanfunctions"\n', twice))
    assert [f.name for f in _program(tree).program.functions] == ["twice"]


@pytest.mark.parametrize(
    "body",
    [
        '/* #include "nothere.stan" */',
        '/*\n#include "nothere.stan"\n*/',
        '// #include "nothere.stan"',
        'if (mu > 1e10) reject("#include nothere.stan");',
    ],
)
def test_include_in_a_comment_or_string_is_text(body: str):
    model_from_text(f"parameters {{ real mu; }} model {{\n{body}\nmu ~ normal(0, 1);\n}}\n")


@pytest.mark.parametrize(
    "line, message",
    [
        ('real mu; #include "p.stan"', "#include must be on a line of its own"),
        ('#include "p.stan" real sigma;', "unexpected text after the #include"),
        ("#include", "#include names no file"),
        ('#include ""', "#include names no file"),
    ],
)
def test_a_misplaced_include_is_never_a_comment(line: str, message: str):
    with pytest.raises((ModelSyntaxError, ModelError), match=message) as err:
        model_from_text(f"parameters {{\n{line}\n}}\nmodel {{ }}\n", "m.stan")
    assert str(err.value).startswith("m.stan:2:")


def test_resume_refuses_a_model_whose_included_file_changed(tree: Path):
    """The checkpoint's fingerprint covers the included files, not only the model's own."""
    from tests.cli.test_cli import run_main

    (tree / "data.json").write_text('{"N": 2, "y": [0.5, 1.5]}')
    base = ["fit", str(tree / "main.stan"), str(tree / "data.json"), "--method", "meanfield",
            "--iter", "200", "--quiet", "--include-paths", str(tree / "shared")]  # fmt: skip
    ckpt = tree / "fit.ckpt"
    assert run_main([*base, "--checkpoint", str(ckpt)])[0] == 0
    (tree / "sub" / "more.stan").write_text("real<lower=0.5> sigma;\n")
    rc, _, err = run_main([*base, "--resume", str(ckpt)])
    assert rc == 2 and "other inputs" in err and "includes" in err


def test_a_broken_bound_in_an_included_file_names_its_line(tmp_path: Path):
    (tmp_path / "td.stan").write_text("real a = 1;\nreal<lower=0> t = -a;\n")
    (tmp_path / "m.stan").write_text(
        'transformed data {\n#include "td.stan"\n}\nparameters { real mu; }\n'
        "model { mu ~ normal(t, 1); }\n"
    )
    with pytest.raises(ppl.PplError, match=f"^{tmp_path}/td.stan:2: transformed data variable 't'"):
        ppl.Model.from_file(tmp_path / "m.stan").compile({})
