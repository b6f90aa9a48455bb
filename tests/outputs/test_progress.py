"""Progress that tells the truth: a line per phase with its iteration, value and relative change,
no percentage or ETA; nothing for quick fits or in logs until LOG_AFTER; the ELBO trace of the
default road in elbo.csv, iteration by iteration."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

import numpy as np

from ppl.progress import StatusLines, start_phase
from tests.cli.test_cli import NONCENTERED, SCHOOLS_JSON


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_status_lines_on_a_terminal():
    out = Terminal()
    lines = StatusLines(out, terminal=True, delay=0.0)
    start_phase(lines, "mode by L-BFGS", "log density")
    lines(1, -40.0)
    lines(2, -35.0)
    start_phase(lines, "ELBO on 8 fixed draws (L-BFGS)")
    lines(3, -33.0)
    lines.close()
    finished = [s.split("\r\x1b[K")[-1] for s in out.getvalue().split("\n") if s]
    assert finished == [
        "mode by L-BFGS: iteration 2, log density -35, relative change 1.4e-01",
        "ELBO on 8 fixed draws (L-BFGS): iteration 3, ELBO -33",
    ]
    assert "%" not in out.getvalue() and "ETA" not in out.getvalue()


def test_a_log_gets_plain_lines_only_for_long_fits():
    quick, slow = io.StringIO(), io.StringIO()
    for stream, after in ((quick, 3600.0), (slow, 0.0)):
        lines = StatusLines(stream, terminal=False, log_after=after)
        start_phase(lines, "phase one")
        lines(5, -2.0)
        start_phase(lines, "phase two")
        lines(6, -1.0)
        lines.close()
    assert quick.getvalue() == ""
    assert slow.getvalue() == "phase one: iteration 5, ELBO -2\nphase two: iteration 6, ELBO -1\n"


def test_a_real_fit_names_its_phases_and_traces_every_iteration(tmp_path, monkeypatch):
    import ppl.cli as cli

    monkeypatch.setattr(cli, "BAR_DELAY", 0.0)
    err = Terminal()
    monkeypatch.setattr(cli.sys, "stderr", err)
    with contextlib.redirect_stdout(io.StringIO()):
        rc = cli.main(["fit", NONCENTERED, SCHOOLS_JSON, "--output", str(tmp_path)])
    shown = err.getvalue()
    assert rc == 0
    for phase in ("mode by L-BFGS: iteration", "ELBO on 8 fixed draws (L-BFGS): iteration",
                  "ELBO on 32 fixed draws", "PSIS check of q's 1000 draws"):  # fmt: skip
        assert phase in shown, phase
    with open(Path(tmp_path) / "elbo.csv", newline="") as f:
        rows = [(int(r[0]), float(r[1])) for r in list(csv.reader(f))[1:]]
    iterations = [r[0] for r in rows]
    assert len(rows) > 20 and iterations == sorted(iterations) and np.isfinite(rows[-1][1])
