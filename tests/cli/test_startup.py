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


def _sigint_default() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_command_is_the_small_entry_module():
    """`ppl` starts in ppl.__main__, whose handler is in place before ppl.cli's imports (issue
    32: a Ctrl-C in the first 0.1-0.4 s printed Python's traceback)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    assert 'ppl = "ppl.__main__:main"' in (root / "pyproject.toml").read_text().splitlines()
    source = (root / "ppl" / "__main__.py").read_text()
    head = source.split("\ndef ", 1)[0]  # what runs before the handler is installed
    imports = [line.strip() for line in head.splitlines()
               if line.strip().startswith(("import ", "from "))]  # fmt: skip
    assert imports == ["import sys", "import _signal as signal", "import signal"]


def test_a_ctrl_c_before_ppl_cli_is_imported_is_exit_130_without_a_traceback(tmp_path):
    """The signal noted by ppl.__main__ is handed to ppl.cli: exit 130, no traceback."""
    import os
    import subprocess
    from pathlib import Path

    model = tmp_path / "m.model"
    model.write_text("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }\n")
    code = ("import signal, sys\nimport ppl.__main__ as entry\n"
            "assert 'ppl.cli' not in sys.modules\nsignal.raise_signal(signal.SIGINT)\n"
            f"sys.argv = ['ppl', 'check', {str(model)!r}]\nsys.exit(entry.main())\n")  # fmt: skip
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env,
                       cwd=Path(__file__).resolve().parents[2], preexec_fn=_sigint_default,
                       timeout=120)  # fmt: skip
    err = p.stderr.decode()
    assert p.returncode == 130, err
    assert "Traceback" not in err and "interrupted after" in err


def test_python_dash_m_ppl_runs_the_command(tmp_path):
    import subprocess

    model = tmp_path / "m.model"
    model.write_text("parameters { real mu; }\nmodel { mu ~ normal(0, 1); }\n")
    p = subprocess.run([sys.executable, "-m", "ppl", "check", str(model)], capture_output=True,
                       timeout=120, preexec_fn=_sigint_default)  # fmt: skip
    assert p.returncode == 0, p.stderr.decode()
    assert "model OK" in p.stdout.decode()
