"""The package's import direction: every ppl module imports only from its own stage or stages
below it, in the order declared here (as stanc3's build checks its layering), and no import cycle.

Imports are read with `ast`, function-level ones included, so a lazy `import` inside a function
cannot hide an upward dependency. A new module must be placed in STAGES.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ppl"

#: Lowest first. A module belongs to the stage naming it or its nearest enclosing package
#: ("ppl.inference" covers ppl.inference.*); "ppl" itself (the package's __init__) only itself.
#: Within a stage imports may go either way (the cycle check still applies).
STAGES: list[tuple[str, list[str]]] = [
    # what every stage may use: errors, resource limits, the progress-callback protocol
    ("foundation", ["ppl", "ppl.errors", "ppl.limits", "ppl.progress", "ppl.safefiles"]),
    # the language's syntax and types: the library's signatures are written in these types
    (
        "syntax",
        ["ppl.language.ast", "ppl.language.types", "ppl.language.includes", "ppl.language.parser"],
    ),
    # Stan's functions, distributions and transforms, with their signatures
    ("library", ["ppl.library"]),
    # the rest of the front end: the checker reads the library's signatures
    ("language", ["ppl.language"]),
    # the families know no language: numerics on arrays, and the choice of one per latent
    ("families", ["ppl.families"]),
    # the IR between checker and runtime (stanc3's MIR), and the passes that rewrite it
    ("ir", ["ppl.ir"]),
    ("passes", ["ppl.ir.passes"]),
    # the backend: the lowered program compiled to a log joint over draws
    ("runtime", ["ppl.runtime"]),
    ("data", ["ppl.data"]),
    ("inference", ["ppl.inference"]),
    ("diagnostics", ["ppl.diagnostics"]),
    ("distributed", ["ppl.distributed"]),
    ("methods", ["ppl.methods"]),
    ("fit", ["ppl.pipeline"]),
    ("outputs", ["ppl.outputs"]),
    # the Python API: a model compiled once, fitted to data from Python; the CLI is a layer on it
    ("api", ["ppl.api", "ppl.api_point", "ppl.api_draws"]),
    # the command, and its entry point (ppl.__main__: a Ctrl-C handler, then ppl.cli)
    ("cli", ["ppl.cli", "ppl.__main__"]),
]

#: (importer, imported) pairs allowed to go up a stage, each with its reason.
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("ppl", "ppl.api"): "the package's top level names the API (ppl.Model), imported lazily "
    "on first use (PEP 562), so `import ppl` by the CLI does not load it",
}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, name: str, is_package: bool, known: set[str]) -> set[str]:
    """The ppl modules `source` (module `name`) imports, at any depth of the file."""
    found: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # `from ppl import ast` imports the module ppl.language.ast; `from ppl import
            # __version__`
            # the package itself
            targets = [
                f"{module}.{a.name}" if f"{module}.{a.name}" in known else module
                for a in node.names
            ]
        else:
            continue
        found |= {t for t in targets if t == "ppl" or t.startswith("ppl.")}
    found.discard(name)
    return found


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    files = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(files)
    return {
        name: imports_of(p.read_text(), name, p.name == "__init__.py", known)
        for name, p in files.items()
    }


def stage_of(module: str, stages=STAGES) -> int:
    best, index = "", None
    for i, (_, names) in enumerate(stages):
        for n in names:
            covers = module == n or (n != "ppl" and module.startswith(n + "."))
            if covers and len(n) > len(best):
                best, index = n, i
    if index is None:
        raise KeyError(f"{module} is in no stage of tests/test_layout.py STAGES; place it there")
    return index


def upward_imports(graph: dict[str, set[str]], stages=STAGES, exceptions=EXCEPTIONS):
    """(importer, its stage, imported, its stage) for every import that goes up a stage."""
    bad = []
    for mod, deps in sorted(graph.items()):
        for dep in sorted(deps):
            i, j = stage_of(mod, stages), stage_of(dep, stages)
            if j > i and (mod, dep) not in exceptions:
                bad.append((mod, stages[i][0], dep, stages[j][0]))
    return bad


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the graph's modules, as a path a -> ... -> a, or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                return stack[stack.index(d) :] + [d]
            if d not in state and (found := visit(d)) is not None:
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)) is not None:
            return found
    return None


def test_every_module_has_a_stage():
    for mod in import_graph():
        stage_of(mod)


def test_imports_point_down_the_stages():
    bad = upward_imports(import_graph())
    assert not bad, "upward imports (importer [stage] -> imported [stage]):\n" + "\n".join(
        f"  {m} [{s}] -> {d} [{t}]" for m, s, d, t in bad
    )


def test_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_exceptions_are_still_needed():
    graph = import_graph()
    for (mod, dep), reason in EXCEPTIONS.items():
        assert reason and dep in graph.get(mod, set()), f"stale exception {mod} -> {dep}"


# ---- the checks on a synthetic package ------------------------------------------------------


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "ppl"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


SYNTHETIC_STAGES = [("low", ["ppl", "ppl.low"]), ("mid", ["ppl.mid"]), ("high", ["ppl.high"])]


def test_an_upward_import_inside_a_function_is_found(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "def f():\n    from ppl.high import g\n    return g\n",
            "mid/__init__.py": "from .core import x\n",
            "mid/core.py": "from ppl import low\nx = 1\n",
            "high.py": "import ppl.mid\nfrom ppl.mid.core import x\ndef g():\n    return x\n",
        },
    )
    graph = import_graph(root)
    assert graph["ppl.mid"] == {"ppl.mid.core"}  # relative import resolved
    assert graph["ppl.mid.core"] == {"ppl.low"}  # `from ppl import low` is the module
    assert graph["ppl.high"] == {"ppl.mid", "ppl.mid.core"}
    assert upward_imports(graph, SYNTHETIC_STAGES, {}) == [("ppl.low", "low", "ppl.high", "high")]
    allowed = {("ppl.low", "ppl.high"): "a reason"}
    assert upward_imports(graph, SYNTHETIC_STAGES, allowed) == []
    assert find_cycle(graph) == ["ppl.high", "ppl.mid", "ppl.mid.core", "ppl.low", "ppl.high"]


def test_a_clean_synthetic_package_passes(tmp_path):
    root = _package(
        tmp_path,
        {
            "__init__.py": "",
            "low.py": "import numpy\n",
            "mid.py": "from ppl.low import numpy\n",
            "high.py": "def g():\n    import ppl.mid\n    from . import low\n",
        },
    )
    graph = import_graph(root)
    assert graph["ppl.high"] == {"ppl.mid", "ppl.low"}
    assert upward_imports(graph, SYNTHETIC_STAGES, {}) == []
    assert find_cycle(graph) is None


def test_a_module_without_a_stage_is_reported():
    with pytest.raises(KeyError, match="ppl.newthing"):
        stage_of("ppl.newthing")


# ---- the map in the docs follows the stages ---------------------------------------------------

ROOT = PACKAGE.parent


def _stage_paths() -> list[str]:
    """Each stage's place in the tree (`ppl/ir/`, `ppl/pipeline.py`), in stage order, once."""
    paths: list[str] = []
    for _, names in STAGES:
        for name in names:
            if name == "ppl":
                continue
            parts = name.split(".")
            is_package = (ROOT / Path(*parts)).is_dir()
            path = "/".join(parts) + ("/" if is_package else ".py")
            # a sub-stage of a package (ppl.language.ast) lives in its package's row
            while not is_package and len(parts) > 2:
                parts = parts[:-1]
                path = "/".join(parts) + "/"
            if path not in paths:
                paths.append(path)
    return paths


def test_conventions_lists_the_stages_in_order():
    text = (ROOT / "docs" / "conventions.md").read_text()
    line = text.split("Stages, lowest first:", 1)[1].split(".\n", 1)[0]
    listed = [s.strip() for s in " ".join(line.split()).split("→")]
    assert listed == [name for name, _ in STAGES]


def test_readme_layout_shows_every_stage_in_order():
    text = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    rows = [r for r in text.splitlines() if r.startswith("| `ppl/")]
    first_paths = [row.split("`")[1] for row in rows]
    order = [p for p in first_paths if p in _stage_paths()]
    assert order == [p for p in _stage_paths() if p in order], "README rows out of stage order"
    missing = [p for p in _stage_paths() if not any(p in row for row in rows)]
    assert not missing, f"stages missing from README.md's layout: {missing}"


def test_every_package_is_in_the_readme_layout():
    text = (ROOT / "README.md").read_text().split("## Layout", 1)[1]
    packages = sorted({p.parent.relative_to(ROOT).as_posix() + "/"
                       for p in PACKAGE.rglob("__init__.py")} - {"ppl/"})  # fmt: skip
    missing = [p for p in packages
               if f"`{p}`" not in text and f"`{p.split('/')[-2]}/`" not in text]  # fmt: skip
    assert not missing, f"packages missing from README.md's layout: {missing}"


def test_tests_mirror_the_packages():
    """Every folder of tests/ is a package of ppl (or `models`, whole example models)."""
    packages = {p.parent.name for p in PACKAGE.rglob("__init__.py")} | {"api", "cli", "models"}
    folders = [d.name for d in (ROOT / "tests").iterdir()
               if d.is_dir() and not d.name.startswith((".", "__"))]  # fmt: skip
    assert folders and not [f for f in folders if f not in packages]
