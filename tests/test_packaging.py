"""Packaging: the grammar ships as package data and the CLI runs (no venvs are built here)."""

from __future__ import annotations

import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_grammar_is_a_package_resource():
    grammar = resources.files("ppl.grammars").joinpath("stan.lark")
    assert grammar.is_file()
    text = grammar.read_text()
    assert "start:" in text and "model_block" in text


def test_resource_grammar_is_the_one_the_parser_uses():
    from ppl.language import parser

    source_tree = (ROOT / "grammars" / "stan.lark").read_text()
    assert parser._grammar_text() == source_tree
    assert resources.files("ppl.grammars").joinpath("stan.lark").read_text() == source_tree


def test_pyproject_ships_every_package_and_the_grammar():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = config["tool"]["setuptools"]
    packages = set(setuptools["packages"])
    on_disk = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "ppl").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert on_disk <= packages, f"packages missing from pyproject.toml: {on_disk - packages}"
    assert "ppl.grammars" in packages
    assert setuptools["package-dir"]["ppl.grammars"] == "grammars"
    assert "*.lark" in setuptools["package-data"]["ppl.grammars"]
    assert config["project"]["scripts"]["ppl"] == "ppl.__main__:main"  # its Ctrl-C handler first


def test_cli_module_help_runs(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "ppl.cli", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for command in ("fit", "ir", "check"):
        assert command in out.stdout


def test_language_doc_names_every_function_and_distribution():
    import re

    from ppl.library.distributions import DISTRIBUTIONS
    from ppl.library.functions import CONSTANTS, LIBRARY

    names = set(re.findall(r"`([A-Za-z_0-9]+)`", (ROOT / "docs" / "language.md").read_text()))
    for group in (LIBRARY, CONSTANTS, DISTRIBUTIONS):
        missing = sorted(set(group) - names)
        assert not missing, f"docs/language.md does not list: {', '.join(missing)}"
