"""Rewrite the outputs in the console blocks of docs/*.md (and README.md) from fresh runs, keeping
each block's `...` elisions: after a change to what `ppl` prints, run

    python tests/docs_regen.py docs/cli.md README.md      # or no arguments: every page

then read the diff. Each run of lines between `...` markers is replaced by the actual lines that
start where its first line's words (numbers ignored) first appear; tests/test_docs.py checks the
result as always. Not a test module (pytest collects test_*.py only)."""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_docs import DOC_FILES, ROOT, blocks, console_steps, run  # noqa: E402


def _words(line: str) -> str:
    """The line without its number tokens: what stays the same when only numbers change."""

    def number(word: str) -> bool:
        try:
            float(word.rstrip(",;)").lstrip("("))
        except ValueError:
            return False
        return True

    return " ".join(w for w in line.split() if not number(w))


_SECONDS = re.compile(r"\b\d+(?:\.\d+)? s\b")


def _keep_timings(old: list[str], new: list[str]) -> list[str]:
    """Keep the page's seconds ("1.23 s") in a line that is the page's line in its words: a
    timing measured on a quiet machine is not replaced by one from whatever load the rerun
    saw (the docs test does not compare seconds); the line's other numbers are the rerun's."""
    by_shape = {_words(line): line for line in old}
    out = []
    for line in new:
        page = by_shape.get(_words(line))
        if page is not None and len(_SECONDS.findall(page)) == len(_SECONDS.findall(line)):
            pieces = _SECONDS.split(line)  # the rerun's text around the page's seconds
            timings = _SECONDS.findall(page)
            line = "".join(p + t for p, t in zip(pieces, [*timings, ""], strict=True))
        out.append(line)
    return out


def _take(actual: list[str], start: int, count: int) -> list[str]:
    """From `start`, lines of `actual` up to and including the `count`-th non-blank one."""
    out, seen = [], 0
    for line in actual[start:]:
        if seen == count:
            break
        out.append(line)
        seen += bool(line.strip())
    return out


def regenerate(expected: list[str], actual: list[str]) -> list[str]:
    """`expected`'s segments between `...` lines, replaced by the matching runs of `actual`."""
    segments: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            segments.append([])
        else:
            segments[-1].append(line)
    out, at = [], 0
    for i, seg in enumerate(segments):
        if i:
            out.append("...")
        if not seg:
            continue
        keys = [_words(a) for a in actual]
        found = [j for j in range(at, len(actual)) if keys[j] == _words(seg[0])]
        if i == 0:
            start = 0
        elif found:
            start = found[0]
        else:  # the last segment ends the output; a middle one follows the previous
            tail = len(actual) - len(seg)
            start = max(at, tail) if i == len(segments) - 1 else at
        taken = _take(actual, start, sum(bool(x.strip()) for x in seg))
        out.extend(taken)
        at = start + len(taken)
    if len(segments) == 1:
        return actual
    return out


def regenerate_page(doc: Path) -> bool:
    """Run the page's console blocks in order (as the docs test does), then rewrite them."""
    lines = doc.read_text().splitlines()
    edits = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        for entry in ROOT.iterdir():
            if entry.name not in (".git", ".venv", "out") and not entry.name.startswith("."):
                (cwd / entry.name).symlink_to(entry)
        for block in blocks(doc):
            if "file" in block.attrs:  # files later commands read
                (cwd / block.attrs["file"]).write_text(block.text)
                continue
            if block.kind == "sh" and not block.flags:
                for command in block.text.splitlines():
                    if command.strip() and not command.lstrip().startswith("#"):
                        run(command, cwd)
                continue
            if block.kind != "console" or "benchmark" in block.flags:
                continue
            old_body = block.text.rstrip("\n").splitlines()
            if any(line.rstrip().endswith("\\") for line in old_body):
                continue  # continuation lines: rewrite by hand
            new_body = []
            for command, expected in console_steps(block.text):
                new_body.append(f"$ {command}")
                if command.strip() == "echo $?":
                    new_body.extend(expected)
                    continue
                got = run(command, cwd).stdout.rstrip().splitlines()
                while expected and not expected[-1].strip():
                    expected = expected[:-1]
                new_body.extend(_keep_timings(expected, regenerate(expected, got)))
            if new_body != old_body:
                indent = re.match(r"\s*", lines[block.line - 1]).group(0)
                edits.append((block.line, len(old_body), [indent + b for b in new_body]))
    for start, length, body in reversed(edits):
        lines[start : start + length] = body
    if edits:
        doc.write_text("\n".join(lines) + "\n")
    return bool(edits)


if __name__ == "__main__":
    pages = [Path(p).resolve() for p in sys.argv[1:]] or [*DOC_FILES, ROOT / "README.md"]
    for page in pages:
        print(f"{page.relative_to(ROOT)}: {'rewritten' if regenerate_page(page) else 'unchanged'}")
