"""Start-up cost of the CLI: what `ppl fit` defers until it is needed."""

from __future__ import annotations

import io
import sys

from ppl import cli


def test_progress_bar_waits_for_a_slow_fit(monkeypatch):
    err = io.StringIO()
    err.isatty = lambda: True
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr(cli, "BAR_DELAY", 3600.0)
    progress, close = cli._progress_bar(100, quiet=False)
    for i in range(1, 50):
        progress(i, -10.0)
    close()
    assert err.getvalue() == ""  # a quick fit shows no bar

    monkeypatch.setattr(cli, "BAR_DELAY", 0.0)
    progress, close = cli._progress_bar(100, quiet=False)
    progress(7, -3.5)
    progress(20, None)
    close()
    shown = err.getvalue()
    assert "fit:" in shown and "/100" in shown  # the bar, once the fit has run BAR_DELAY


def test_quiet_progress_bar():
    progress, close = cli._progress_bar(100, quiet=True)
    assert progress is None
    close()
