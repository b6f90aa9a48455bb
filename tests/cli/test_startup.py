"""Start-up cost of the CLI: what `ppl fit` defers until it is needed."""

from __future__ import annotations

import io
import sys

from ppl import cli


def test_progress_waits_for_a_slow_fit(monkeypatch):
    err = io.StringIO()
    err.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(cli, "BAR_DELAY", 3600.0)
    progress, close = cli._progress_lines(quiet=False)
    for i in range(1, 50):
        progress(i, -10.0)
    close()
    assert err.getvalue() == ""  # a quick fit shows nothing


def test_quiet_progress():
    progress, close = cli._progress_lines(quiet=True)
    assert progress is None
    close()
