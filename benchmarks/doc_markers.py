"""The markers between which a benchmark script keeps a block of a doc up to date, written once
for every script that renders docs from stored runs (tables.py, doc_outputs.py, bpfa_docs.py,
dsvi_optimum.py):

    <!-- KIND NAME: made by SCRIPT -->
    ...the block...
    <!-- end KIND NAME -->
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path


def marked(kind: str, name: str, script: str) -> re.Pattern:
    return re.compile(
        rf"(<!-- {kind} {re.escape(name)}: made by {re.escape(script)} -->\n)(.*?)"
        rf"(<!-- end {kind} {re.escape(name)} -->)",
        re.S,
    )


def rewritten(text: str, kind: str, name: str, script: str, block: str) -> str:
    """The doc's text with block `name` replaced; ValueError when its markers are missing."""
    pattern = marked(kind, name, script)
    if not pattern.search(text):
        raise ValueError(f"no markers for {kind} {name!r}")
    body = block.rstrip("\n") + "\n"
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text, count=1)


def rewrite_all(root: Path, blocks: Iterable[tuple[str, str, str]], kind: str, script: str) -> None:
    """Write each (name, doc, block) into its doc under `root`, saying which docs changed."""
    for name, doc, block in blocks:
        path = root / doc
        text = path.read_text()
        new = rewritten(text, kind, name, script, block)
        if new != text:
            path.write_text(new)
            print(f"rewrote {doc}: {kind} {name}")


def report_stale(bad: list[str], script: str) -> int:
    """--check: name every stale block; exit status 1 if any."""
    for line in bad:
        print(f"stale: {line} (python {script} rewrites it)")
    return 1 if bad else 0
