"""Every code example in docs/*.md is run or checked; the convention is in docs/conventions.md.

A fenced block's info string says what it is:

- ``console``: ``$ `` lines are commands, run by bash from a scratch copy of the repository root
  (``models``, ``benchmarks``, ... linked in, so ``--output out/x`` lands in pytest's tmp_path);
  the lines after a command are its expected output (stdout and stderr as a terminal shows them),
  compared with numbers masked and whitespace collapsed, then number by number (counts exactly,
  floats to their last printed digits; seconds, rates and memory not); ``...`` stands for any
  lines. A command
  must exit 0 unless the next command is ``echo $?``, whose output is compared exactly.
- ``sh``: each command is run the same way and must exit 0; its output is not compared.
- ``sh setup``: not run (it installs); each line must be one of README.md's set-up commands.
- ``sh benchmark`` / ``console benchmark``: a benchmark's command (minutes long): the script must
  exist, and its own argparse parser must accept the arguments shown (parsed, then stopped).
  Inline code spans that start with ``python benchmarks/`` are checked the same way.
- ``stan``: a whole program, parsed and type-checked; ``stan file=NAME`` (and ``json file=NAME``)
  is written to NAME in the scratch directory for later commands to use, and not checked alone.
- ``python``: executed in the scratch directory, the page's blocks in one namespace (as a
  notebook's cells).  ``json``: must parse.  ``text``, ``csv``:
  output and tables, not run.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import os
import re
import runpy
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DOC_FILES = sorted(DOCS.glob("*.md"))
KINDS = {"console", "sh", "stan", "python", "json", "text", "csv"}
FLAGS = {"setup", "benchmark"}
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


# ---- parsing the Markdown -------------------------------------------------------------------


class Block:
    def __init__(self, doc: Path, line: int, info: str, text: str):
        self.doc, self.line, self.text = doc, line, text
        words = info.split()
        self.kind = words[0] if words else ""
        self.flags = {w for w in words[1:] if "=" not in w}
        self.attrs = dict(w.split("=", 1) for w in words[1:] if "=" in w)

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    out, lines, i = [], doc.read_text().splitlines(), 0
    while i < len(lines):
        m = re.match(r"^(\s*)(```+)(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        out.append(Block(doc, start, info, "\n".join(body) + "\n"))
        i += 1
    return out


def prose(doc: Path) -> str:
    """The text outside fenced blocks."""
    return re.sub(r"^\s*```.*?^\s*```[^\n]*$", "", doc.read_text(), flags=re.S | re.M)


def join_continuations(text: str) -> list[str]:
    out, cur = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
        else:
            out.append(cur + line)
            cur = ""
    if cur:
        out.append(cur)
    return out


# ---- running commands -----------------------------------------------------------------------


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A scratch repository root: the repository's entries linked in, writes stay in tmp_path."""
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv", "out") and not entry.name.startswith("."):
            (tmp_path / entry.name).symlink_to(entry)
    return tmp_path


def run(command: str, cwd: Path) -> subprocess.CompletedProcess:
    # PPL_LOG_AFTER: no progress lines in a log however loaded the machine (a fit over 10 s
    # prints them): the output a quiet machine gives
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1", COLUMNS="100",
               PPL_LOG_AFTER="inf")  # fmt: skip
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("PPL_DEBUG", None)
    return subprocess.run(
        ["bash", "-c", command],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
    )


def normalise(line: str) -> str:
    return " ".join(NUMBER.sub("#", line).split())


def matches(expected: list[str], actual: list[str]) -> bool:
    """`expected` (with `...` for any run of lines) against `actual`, numbers masked."""
    return aligned(expected, actual) is not None


def aligned(expected: list[str], actual: list[str],
            cost=lambda i, j: 0) -> list[tuple[int, int]] | None:  # fmt: skip
    """The (expected, actual) index pairs of the lines that match, numbers masked, `...`
    standing for any run of lines, None when they do not match; of several ways, the one of
    least total `cost(i, j)` (the numbers that differ: `theta[1]` is paired with `theta[1]`)."""

    @functools.cache
    def best(i: int, j: int):
        if i == len(expected):
            return (0, ()) if j == len(actual) else None
        if expected[i] == "...":
            options = [best(i + 1, k) for k in range(j, len(actual) + 1)]
            options = [o for o in options if o is not None]
            return min(options, key=lambda o: o[0]) if options else None
        if j == len(actual) or expected[i] != actual[j]:
            return None
        rest = best(i + 1, j + 1)
        return None if rest is None else (rest[0] + cost(i, j), ((i, j), *rest[1]))

    found = best(0, 0)
    return None if found is None else list(found[1])


#: what follows a number that the machine decides: seconds, rates, memory
_MACHINE = re.compile(r"^\s*(?:s\b|ms\b|seconds?\b|s/|it/s|MiB|GiB|MB|GB|x faster|× )")


def _machine_number(line: str, end: int) -> bool:
    return bool(_MACHINE.match(line[end:]))


def _close(want: str, got: str) -> bool:
    """Equal as printed, or within two units of the last printed digit (a float printed to 6
    digits that moved in its 6th on another CPU's BLAS)."""
    if want == got:
        return True
    try:
        w, g = float(want), float(got)
    except ValueError:
        return False
    if "." not in want + got and "e" not in (want + got).lower():
        return False  # counts (gradients, iterations, rows): exact
    digits = len(want.split(".")[1].split("e")[0].split("E")[0]) if "." in want else 0
    unit = 10.0**-digits * (10.0 ** int(want.lower().split("e")[1]) if "e" in want.lower() else 1)
    return abs(w - g) <= max(2 * unit, 1e-4 * abs(w))


def _differing(shown: list[str], printed: list[str], i: int, j: int) -> int:
    return len(number_differences(shown[i], printed[j]))


def number_differences(want: str, got: str) -> list[str]:
    """The numbers of `want` (a doc's line) that `got` (the same line, run) prints otherwise,
    machine-dependent ones (seconds, rates) left out."""
    out = []
    for w, g in zip(NUMBER.finditer(want), NUMBER.finditer(got), strict=False):
        if _machine_number(want, w.end()) or _close(w.group(0), g.group(0)):
            continue
        out.append(f"{w.group(0)} -> {g.group(0)}")
    return out


def console_steps(text: str) -> list[tuple[str, list[str]]]:
    steps: list[tuple[str, list[str]]] = []
    for line in join_continuations(text):
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise AssertionError(f"output before the first '$ ' command: {line!r}")
    return steps


def check_console(block: Block, cwd: Path):
    steps = console_steps(block.text)
    assert steps, f"{block.where()}: a console block without a '$ ' command"
    last = None
    for k, (command, expected) in enumerate(steps):
        if command.strip() == "echo $?":
            assert last is not None, f"{block.where()}: 'echo $?' needs a command before it"
            shown = [e for e in expected if e.strip()]
            assert shown == [str(last.returncode)], (
                f"{block.where()}: `{steps[k - 1][0]}` exited {last.returncode}, the doc says "
                f"{shown}\n{last.stdout}"
            )
            continue
        last = run(command, cwd)
        checked_by_next = k + 1 < len(steps) and steps[k + 1][0].strip() == "echo $?"
        assert checked_by_next or last.returncode == 0, (
            f"{block.where()}: `{command}` exited {last.returncode}:\n{last.stdout}"
        )
        shown = [e for e in expected if e.strip()]
        printed = [a for a in last.stdout.splitlines() if a.strip()]
        want = [normalise(e) if e.strip() != "..." else "..." for e in shown]
        pairs = aligned(want, [normalise(a) for a in printed],
                        functools.partial(_differing, shown, printed))  # fmt: skip
        assert pairs is not None, (
            f"{block.where()}: the output of `{command}` does not match the doc (numbers "
            f"masked).\n--- doc:\n" + "\n".join(expected) + "\n--- actual:\n" + last.stdout
        )
        stale = [f"  {shown[i].strip()}\n    {', '.join(d)}" for i, j in pairs
                 if (d := number_differences(shown[i], printed[j]))]  # fmt: skip
        assert not stale, (
            f"{block.where()}: `{command}` prints other numbers than the doc (regenerate: "
            f"python tests/docs_regen.py {block.doc.relative_to(ROOT)}):\n" + "\n".join(stale)
        )


def check_sh(block: Block, cwd: Path):
    for command in join_continuations(block.text):
        if command.strip() and not command.lstrip().startswith("#"):
            out = run(command, cwd)
            assert out.returncode == 0, f"{block.where()}: `{command}` failed:\n{out.stdout}"


def check_setup(block: Block):
    readme = (ROOT / "README.md").read_text()
    for command in join_continuations(block.text):
        if command.strip():
            assert command.strip() in readme, (
                f"{block.where()}: `{command}` is not one of README.md's set-up commands"
            )


class _Parsed(Exception):
    pass


def benchmark_argv(command: str) -> list[str]:
    """`OPENBLAS_NUM_THREADS=1 nohup python benchmarks/x.py --a 1 > log 2>&1 &` -> [script, ...]."""
    words = shlex.split(command, comments=True)
    while words and (re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]) or words[0] == "nohup"):
        words.pop(0)
    assert words and re.match(r"^(\S*/)?python3?$", words[0]), f"not a python command: {command}"
    argv = []
    for w in words[1:]:
        if w in ("&", "|", "&&", ";") or w.startswith((">", "2>", "<")):
            break
        argv.append(w)
    return argv


def check_benchmark_command(command: str, where: str):
    argv = benchmark_argv(command)
    script = ROOT / argv[0]
    assert argv[0].startswith("benchmarks/") and script.is_file(), f"{where}: no script {argv[0]}"
    original = argparse.ArgumentParser.parse_args

    def parse_then_stop(self, args=None, namespace=None):
        original(self, args, namespace)
        raise _Parsed

    saved_argv, saved_path, err = sys.argv, list(sys.path), io.StringIO()
    sys.argv = [str(script), *argv[1:]]
    argparse.ArgumentParser.parse_args = parse_then_stop
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            runpy.run_path(str(script), run_name="__main__")
    except _Parsed:
        return
    except SystemExit as e:
        raise AssertionError(
            f"{where}: `{command}`: the script's parser refused it (exit {e.code}):\n"
            f"{err.getvalue()}"
        ) from None
    finally:
        argparse.ArgumentParser.parse_args = original
        sys.argv = saved_argv
        sys.path[:] = saved_path
    raise AssertionError(f"{where}: `{command}` ran to the end without parsing its arguments")


def check_benchmark(block: Block):
    if block.kind == "console":
        commands = [c for c, _ in console_steps(block.text)]
    else:
        commands = [c for c in join_continuations(block.text) if c.strip()]
    for command in commands:
        if not command.lstrip().startswith("#"):
            check_benchmark_command(command, block.where())


def check_stan(block: Block, cwd: Path):
    from ppl.language.frontend import load_model

    path = cwd / f"example_{block.line}.stan"
    path.write_text(block.text)
    try:
        load_model(str(path))
    except Exception as e:  # noqa: BLE001 - report which block
        raise AssertionError(f"{block.where()}: the Stan example does not check: {e}") from None


def check_block(block: Block, cwd: Path, namespace: dict | None = None):
    """`namespace`: the page's Python globals, shared by its python blocks as by a notebook's
    cells."""
    assert block.kind in KINDS, (
        f"{block.where()}: fenced block with info string {block.kind!r}; use one of "
        f"{sorted(KINDS)} (docs/conventions.md)"
    )
    assert block.flags <= FLAGS, f"{block.where()}: unknown flags {block.flags - FLAGS}"
    if "file" in block.attrs:
        assert block.kind in ("stan", "json", "csv", "python"), block.where()
        (cwd / block.attrs["file"]).write_text(block.text)
        if block.kind == "json":
            json.loads(block.text)
        return
    if "benchmark" in block.flags:
        check_benchmark(block)
    elif "setup" in block.flags:
        check_setup(block)
    elif block.kind == "console":
        check_console(block, cwd)
    elif block.kind == "sh":
        check_sh(block, cwd)
    elif block.kind == "stan":
        check_stan(block, cwd)
    elif block.kind == "python":
        old = Path.cwd()
        os.chdir(cwd)
        try:
            exec(compile(block.text, block.where(), "exec"),
                 {"__name__": "__doc_example__"} if namespace is None else namespace)  # fmt: skip
        finally:
            os.chdir(old)
    elif block.kind == "json":
        json.loads(block.text)


# ---- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(d, marks=pytest.mark.slow) if d.name == "dask.md" else d
        for d in [*DOC_FILES, ROOT / "README.md"]
    ],
    ids=lambda d: d.name,
)
def test_doc_examples(doc: Path, workdir: Path):
    """Every fenced block of the page, in order, in one scratch directory."""
    namespace = {"__name__": "__doc_example__"}
    for block in blocks(doc):
        check_block(block, workdir, namespace)


@pytest.mark.parametrize("doc", DOC_FILES, ids=[d.name for d in DOC_FILES])
def test_inline_benchmark_commands(doc: Path):
    for span in re.findall(r"`([^`\n]+)`", prose(doc)):
        if re.match(r"^([A-Z_]+=\S+ )*python3? benchmarks/", span):
            check_benchmark_command(span, doc.name)


@pytest.mark.parametrize("doc", DOC_FILES, ids=[d.name for d in DOC_FILES])
def test_no_indented_code_blocks(doc: Path):
    """Indented code blocks escape the checks: use fences."""
    in_fence, prev = False, ""
    for n, line in enumerate(doc.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        elif not in_fence and line.startswith("    ") and not prev.strip():
            raise AssertionError(f"{doc.name}:{n}: indented code block; use a fenced block")
        prev = line


def test_cli_doc_lists_every_option_and_choice():
    from ppl.cli import SUBCOMMANDS, build_parser

    top = build_parser()
    text = (DOCS / "cli.md").read_text()
    for name, parser in [("ppl", top), *SUBCOMMANDS.items()]:
        if name != "ppl":  # the options of `ppl NAME` in its own section
            heading = f"\n## `ppl {name}`\n"
            assert heading in text, f"docs/cli.md has no section {heading.strip()}"
            section = text.split(heading, 1)[1].split("\n## ", 1)[0]
            if name != "fit":  # the options every command shares are in fit's table
                section += text.split("\n## `ppl fit`\n", 1)[1].split("\n## ", 1)[0]
        else:
            section = text
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction) or "--help" in action.option_strings:
                continue
            for opt in action.option_strings:
                assert opt in section, f"docs/cli.md does not list `{name} {opt}`"
            for choice in action.choices or ():
                assert str(choice) in section, f"docs/cli.md: `{name}`: choice {choice!r} missing"
            default = action.default
            if action.option_strings and default not in (None, False, [], argparse.SUPPRESS):
                rows = [r for r in section.splitlines()
                        if r.startswith(f"| `{action.option_strings[0]}")]  # fmt: skip
                assert any(f"`{default}`" in r or f"| {default} |" in r for r in rows), (
                    f"docs/cli.md: no table row for `{name} {action.option_strings[0]}` gives "
                    f"its default {default!r}"
                )


def test_language_doc_lists_every_function_and_distribution():
    from ppl.library.distributions import DISTRIBUTIONS
    from ppl.library.functions import CONSTANTS, LIBRARY

    text = (DOCS / "language.md").read_text()
    names = set(re.findall(r"`([A-Za-z_0-9]+)`", text))
    for group in (LIBRARY, CONSTANTS, DISTRIBUTIONS):
        missing = sorted(set(group) - names)
        assert not missing, f"docs/language.md does not list: {', '.join(missing)}"
    for name, dist in DISTRIBUTIONS.items():
        rows = [r for r in text.splitlines() if r.startswith(f"| `{name}` |")]
        assert len(rows) == 1, f"docs/language.md: one table row for `{name}`, found {len(rows)}"
        params = re.findall(r"`(\w+)`", rows[0].split("|")[2])
        assert params == list(dist.params), (
            f"docs/language.md: `{name}` takes ({', '.join(dist.params)}), the table says "
            f"({', '.join(params)})"
        )


def test_language_doc_has_every_keyword_and_operator_of_the_grammar():
    grammar = (ROOT / "grammars" / "stan.lark").read_text()
    grammar = re.sub(r"//[^\n]*", "", grammar)
    literals = {lit for lit in re.findall(r'"([^"\\]+)"', grammar) if "^" not in lit}  # not regexes
    literals -= {"(", ")", "{", "}", "[", "]", ",", ";"}
    text = (DOCS / "language.md").read_text()
    missing = sorted(lit for lit in literals if lit not in text)
    assert not missing, f"docs/language.md does not mention: {missing}"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


@pytest.mark.parametrize("doc", [*DOC_FILES, ROOT / "README.md"], ids=lambda d: d.name)
def test_relative_links_resolve(doc: Path):
    """Links to files and to headings (`page.md#section`) point at something that exists."""
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(doc)):
        if re.match(r"^[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        page = (doc.parent / path).resolve() if path else doc
        assert page.exists(), f"{doc.name}: link to missing {target}"
        if anchor:
            headings = re.findall(r"^#+ (.+)$", prose(page), flags=re.M)
            slugs = {slug(h) for h in headings}
            assert anchor in slugs, f"{doc.name}: no heading #{anchor} in {page.name}"


def _fitted_as_values() -> set[str]:
    """Every name a fit can carry in fit.json's "method": the `fitted_as` of each Method in
    ppl.methods (the --method choices, auto's roads and the candidates it may keep)."""
    import importlib
    import pkgutil

    import ppl.methods
    from ppl.methods.base import Method

    names = {m.fitted_as for m in ppl.methods.METHODS.values()}
    for info in pkgutil.iter_modules(ppl.methods.__path__):
        module = importlib.import_module(f"ppl.methods.{info.name}")
        names |= {v.fitted_as for v in vars(module).values() if isinstance(v, Method)}
    return names


def test_cli_doc_lists_fit_json_as_written():
    """fit.json's row in cli.md names every field a fit writes and exactly the `method` values
    a fit can carry (it once listed values never written and missed others)."""
    import ppl

    row = next(r for r in (DOCS / "cli.md").read_text().splitlines()
               if r.startswith("| `fit.json` |"))  # fmt: skip
    fit = ppl.Model("parameters { real mu; } model { mu ~ normal(0, 1); }").fit(
        method="meanfield", iterations=200, progress=None
    )
    missing = [key for key in fit.info() if f"`{key}`" not in row]
    assert not missing, f"docs/cli.md's fit.json row does not name {missing}"
    said = row.split("`method` (", 1)[1].split("), `method_text`", 1)[0]
    listed = set(re.findall(r"`(\w+)`", said))
    assert listed == _fitted_as_values(), (listed, _fitted_as_values())


def test_a_stale_number_in_a_console_block_is_found():
    """The comparison the console blocks get: a count that moved (tutorial.md once said 33
    gradients where the command printed 35) or an ELBO that moved is stale; seconds are the
    machine's; a float within its last printed digits is the same number."""
    doc = "method: auto (mode by L-BFGS in 33 gradients), 9203 gradient evaluations, 1.46 s"
    run = "method: auto (mode by L-BFGS in 35 gradients), 9203 gradient evaluations, 19.2 s"
    assert number_differences(doc, run) == ["33 -> 35"]
    assert number_differences("ELBO: -109.899 (converged)", "ELBO: -109.901 (converged)") == []
    assert number_differences("ELBO: -109.899 (converged)", "ELBO: -109.95 (converged)") != []
    assert number_differences("k-hat 0.33, 2.4e-07", "k-hat 0.34, 2.5e-07") == []
    shown = ["theta[1]  6.2", "...", "theta[8]  4.8"]
    printed = ["theta[1]  6.2", "theta[2]  4.9", "theta[8]  4.8"]
    want = [normalise(x) if x != "..." else x for x in shown]
    pairs = aligned(want, [normalise(x) for x in printed],
                    functools.partial(_differing, shown, printed))  # fmt: skip
    assert pairs == [(0, 0), (2, 2)]  # theta[8] with theta[8], not with theta[2]


def test_the_prose_quotes_the_stored_benchmark_run():
    """README.md's and algorithms.md's posteriordb numbers are the stored run's
    (benchmarks/results/accuracy_all.json, whose tables benchmarks/tables.py renders): README
    once said every mean within 0.24 sd and a median of 515 gradients after the run said
    otherwise."""
    import statistics

    run = json.loads((ROOT / "benchmarks" / "results" / "accuracy_all.json").read_text())
    rows = [r for r in run["rows"] if r["suite"] == "posteriordb"]
    good = [r for r in rows if r["class"] == "good"]
    median = f"{statistics.median(r['grad_evals'] for r in rows):,g}"
    worst = max(r["max_err"] for r in good)
    others_flagged = all(r["verdict"] == "not reliable" for r in rows if r["class"] != "good")
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = (f"the posterior means of {len(good)} of the {len(rows)} within {worst:.2f} reference "
            f"sd (the other's verdict says it is not reliable) with a median of {median} "
            "gradient evaluations")  # fmt: skip
    assert len(rows) - len(good) == 1 and others_flagged and said in readme, said
    algorithms = " ".join((DOCS / "algorithms.md").read_text().split())
    assert f"fell from a median of 21,540 to {median} on the posteriordb" in algorithms
