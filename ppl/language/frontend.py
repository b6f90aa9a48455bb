"""The front end on one screen: a model's text -> parse tree -> checked program (stanc3's
frontend); everything after it (lowering to the IR, passes, compiling) takes a CheckedProgram."""

from __future__ import annotations

from collections.abc import Sequence

from ppl.language.checker import CheckedProgram, check
from ppl.language.parser import parse, parse_file


def load_model(path: str, include_paths: Sequence[str] | None = None) -> CheckedProgram:
    """`include_paths`: where `#include` looks after the model's own directory (None: the
    CLI's --include-paths, ppl.language.includes.default_include_paths)."""
    return check(parse_file(path, include_paths))


def model_from_text(
    code: str, filename: str = "<model>", include_paths: Sequence[str] | None = None
) -> CheckedProgram:
    return check(parse(code, filename, include_paths))
