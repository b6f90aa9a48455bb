"""`#include` as in stanc3: the directive's line is replaced by the named file's text before
parsing, and a source map keeps, for every line of the result, the file and line it came from,
so that an error inside an included file points at that file's line.

A file is searched relative to the including file, then in the include paths
(`--include-paths DIR,...`, `Model(..., include_paths=[...])`); a file that includes itself
(directly or through others) and a file not found are located errors, as in stanc3. A
`.stanfunctions` file included a second time is skipped, as stanc3 skips it."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from ppl.errors import ModelSyntaxError
from ppl.limits import LIMITS, read_limited

#: `#include "f"`, `#include <f>`, `#include f` on a line of its own (a `//` comment may follow)
_DIRECTIVE = re.compile(
    r'^(?P<indent>[ \t]*)#include(?=[\s"<])[ \t]*'
    r'(?:"(?P<q>[^"\n]*)"|<(?P<a>[^>\n]*)>|(?P<p>[^\s"<>]+))'
    r"[ \t]*(?P<rest>.*)$"
)
#: strings and `//` and block comments (where `#include` is text, not a directive)
_NOT_CODE = re.compile(r'"[^"\n]*"|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)
_ANY_INCLUDE = re.compile(r"#include\b")

_DEFAULT_PATHS: list[str] = []


@contextmanager
def default_include_paths(paths: Sequence[str]) -> Iterator[None]:
    """The include paths of every model read inside the block that is not given its own (the
    CLI's `--include-paths`, for the several places a command reads the model file)."""
    saved = list(_DEFAULT_PATHS)
    _DEFAULT_PATHS[:] = [str(p) for p in paths]
    try:
        yield
    finally:
        _DEFAULT_PATHS[:] = saved


@dataclass
class Unit:
    """One inclusion of one file: its shown name, its text, and the line that included it."""

    name: str
    text: str
    parent: tuple[int, int] | None  # (unit index, line) of the #include, None for the model


@dataclass
class SourceMap:
    """For each line of the expanded text (1-based index - 1): (unit index, line in the unit)."""

    units: list[Unit] = field(default_factory=list)
    lines: list[tuple[int, int]] = field(default_factory=list)

    def locate(self, line: int) -> tuple[str, int, str, list[str]]:
        """The file, its line, the line's text and the `file:line` chain of #includes that
        brought it in (innermost first), for `line` of the expanded text."""
        if not 0 < line <= len(self.lines):
            return self.units[0].name, line, "", []
        unit, at = self.lines[line - 1]
        text = self.units[unit].text.splitlines()
        return self.units[unit].name, at, text[at - 1] if at <= len(text) else "", self.chain(unit)

    def chain(self, unit: int) -> list[str]:
        out = []
        parent = self.units[unit].parent
        while parent is not None:
            out.append(f"{self.units[parent[0]].name}:{parent[1]}")
            parent = self.units[parent[0]].parent
        return out


def has_directive(source: str) -> bool:
    return "#" in source and _ANY_INCLUDE.search(source) is not None


def expand(
    source: str, filename: str, include_paths: Sequence[str] | None = None
) -> tuple[str, SourceMap]:
    """`source` with its #include lines replaced by the files' texts, recursively, and the map
    from the result's lines back to the files."""
    paths = [str(p) for p in (_DEFAULT_PATHS if include_paths is None else include_paths)]
    smap = SourceMap()
    out: list[str] = []
    root = [os.path.realpath(filename)] if os.path.isfile(filename) else []
    _Expander(paths, smap, out).run(source, filename, None, root)
    text = "\n".join(out) + ("\n" if out else "")
    return text, smap


class _Expander:
    def __init__(self, paths: list[str], smap: SourceMap, out: list[str]):
        self.paths, self.smap, self.out = paths, smap, out
        self.size = 0
        self.seen_functions: set[str] = set()

    def run(self, text: str, name: str, parent, stack: list[str]) -> None:
        unit = len(self.smap.units)
        self.smap.units.append(Unit(name, text, parent))
        self.size += len(text)
        if self.size > LIMITS.max_model_bytes:
            raise ModelSyntaxError(
                f"{name}: the model with its included files is over "
                f"{LIMITS.max_model_bytes:,} bytes; is an include repeated?"
            )
        lines = text.removeprefix("\ufeff").splitlines()
        inside = _non_code_lines(text)
        for k, line in enumerate(lines, 1):
            directive = None if k in inside else _directive(line)
            if directive is None:
                if k not in inside and _ANY_INCLUDE.search(_code_of(line)):
                    col = _code_of(line).find("#") + 1
                    self.fail(unit, k, col, "#include must be on a line of its own: "
                              '`#include "file.stan"`')  # fmt: skip
                self.out.append(line)
                self.smap.lines.append((unit, k))
                continue
            wanted, col, rest = directive
            if rest and not rest.startswith("//"):
                self.fail(unit, k, col, f"unexpected text after the #include: {rest!r}")
            self.include(unit, k, col, wanted, name, stack)

    def include(self, unit: int, k: int, col: int, wanted: str, name: str, stack) -> None:
        if not wanted:
            self.fail(unit, k, col, "#include names no file")
        found = self.find(wanted, name)
        if found is None:
            looked = [_dir_of(name), *self.paths]
            self.fail(unit, k, col, f"cannot find the included file {wanted!r} (looked in: "
                      f"{', '.join(looked)}; add a directory with --include-paths)")  # fmt: skip
        shown, real = found
        if real in stack:
            names = [u.name for u in self._chain_units(unit)] + [shown]
            self.fail(unit, k, col, f"{shown} includes itself: {' -> '.join(names)}")
        if real.endswith(".stanfunctions") and real in self.seen_functions:
            return  # as stanc3: a functions file is included once
        if real.endswith(".stanfunctions"):
            self.seen_functions.add(real)
        try:
            data = read_limited(real, LIMITS.max_model_bytes, "included file")
            text = data.decode("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            self.fail(unit, k, col, f"cannot read the included file {shown} ({e})")
        self.run(text, shown, (unit, k), [*stack, real])

    def _chain_units(self, unit: int) -> list[Unit]:
        units = [self.smap.units[unit]]
        while units[-1].parent is not None:
            units.append(self.smap.units[units[-1].parent[0]])
        return units[::-1]

    def find(self, wanted: str, including: str) -> tuple[str, str] | None:
        """(the name to show, the real path) of the first match: next to the including file,
        then in the include paths."""
        for folder in [_dir_of(including), *self.paths]:
            candidate = os.path.normpath(os.path.join(folder, wanted))
            if os.path.isfile(candidate):
                return candidate, os.path.realpath(candidate)
        return None

    def fail(self, unit: int, line: int, col: int, message: str):
        u = self.smap.units[unit]
        text = u.text.splitlines()
        shown = text[line - 1] if 0 < line <= len(text) else ""
        where = "".join(f"\n    included from {c}" for c in self.smap.chain(unit))
        caret = " " * (max(col, 1) - 1) + "^"
        raise ModelSyntaxError(f"{u.name}:{line}:{col}: {message}\n    {shown}\n    {caret}{where}")


def _dir_of(name: str) -> str:
    folder = os.path.dirname(name) if not name.startswith("<") else ""
    return folder or "."


def _directive(line: str) -> tuple[str, int, str] | None:
    m = _DIRECTIVE.match(line)
    if m is None and line.strip() == "#include":
        return "", len(line) - len(line.lstrip()) + 1, ""
    if m is None:
        return None
    wanted = next(g for g in (m.group("q"), m.group("a"), m.group("p")) if g is not None)
    return wanted, len(m.group("indent")) + 1, m.group("rest").strip()


def _code_of(line: str) -> str:
    """The line with strings and `//` comments blanked."""
    return _NOT_CODE.sub(lambda m: " " * len(m.group(0)), line)


def _non_code_lines(text: str) -> set[int]:
    """Lines that start inside a block comment (where `#include` is not a directive)."""
    out: set[int] = set()
    for m in _NOT_CODE.finditer(text):
        if m.group(0).startswith("/*"):
            first = text.count("\n", 0, m.start()) + 1
            last = first + m.group(0).count("\n")
            out.update(range(first + 1, last + 1))
    return out


def included_files(path: str, include_paths: Sequence[str] | None = None) -> list[str]:
    """The files a model file includes, recursively, in order (a checkpoint's fingerprint
    covers them too: a resumed fit of a model whose included file changed is refused)."""
    text = read_limited(path, LIMITS.max_model_bytes, "model file").decode("utf-8", "replace")
    if not has_directive(text):
        return []
    _, smap = expand(text, path, include_paths)
    return [unit.name for unit in smap.units[1:]]
