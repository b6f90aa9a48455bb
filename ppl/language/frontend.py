"""The front end on one screen: a model's text -> parse tree -> checked program (stanc3's
frontend); everything after it (lowering to the IR, passes, compiling) takes a CheckedProgram."""

from __future__ import annotations

from ppl.language.checker import CheckedProgram, check
from ppl.language.parser import parse, parse_file


def load_model(path: str) -> CheckedProgram:
    return check(parse_file(path))


def model_from_text(code: str, filename: str = "<model>") -> CheckedProgram:
    return check(parse(code, filename))
