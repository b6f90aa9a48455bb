"""GPFA on the peer benchmark's second data set, fitted as issue 31 reports it: `ppl fit
models/gpfa/gpfa.model DATA --draws 10000 --seed 0`, where DATA is benchmarks/gpfa.py's
`simulate(200, D=20, K=5, seed=0)` (Knowles 2015, section 4.2; 109 parameters, 20 x 5 loadings).

That call once ended after 814,649 gradient evaluations and 2.7 GB peak RSS in `internal error:
ValueError: zero-size array to reduction operation maximum` (PSIS on a degenerate tail). Run in a
fresh process, as a user would, it must end cleanly (exit 0, or 2 with an error message; never a
traceback), within the default road's budget of 50,000 gradient evaluations and far from that
memory, with an honest verdict: k-hat over its threshold is "not reliable" naming parameters,
and never "good" above 0.5. Measured on c7dc3e5 (one core, load ~1): exit 0, 55 s wall, 545 MB
peak RSS, 49,984 gradient evaluations, NOT converged (the budget), k-hat 1.25, not reliable.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from ppl.methods.auto import GRADIENT_BUDGET

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "gpfa" / "gpfa.model"
PEAK_RSS_MB = 1500  # measured 545 MB; the run the issue reports reached 2.7 GB


def _benchmark():
    """benchmarks/gpfa.py (not a package): its own generator and data writer."""
    spec = importlib.util.spec_from_file_location("gpfa_benchmark", ROOT / "benchmarks" / "gpfa.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: The CLI, writing its own peak RSS (VmHWM: this process's, reset at exec) at exit. os.wait4's
#: ru_maxrss is not enough: Linux carries the forking parent's high-water mark into the child,
#: so late in a long pytest process it reported the suite's 14 GB, not the fit's 545 MB.
WRAPPER = """
import atexit, os, runpy, sys
def peak():
    with open('/proc/self/status') as f:
        hwm = next(line for line in f if line.startswith('VmHWM'))
    with open(os.environ['PPL_TEST_PEAK_FILE'], 'w') as f:
        f.write(hwm.split()[1])
atexit.register(peak)
sys.argv = ['ppl'] + sys.argv[1:]
runpy.run_module('ppl.cli', run_name='__main__')
"""


def _run(args: list[str], out: Path, timeout: float = 900.0) -> tuple[int, str, str, float]:
    """The CLI in a fresh process: (exit code, stdout, stderr, peak RSS in MB of that process:
    its VmHWM where /proc has it, else os.wait4's)."""
    peak_file = out / "peak_kb"
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PPL_TEST_PEAK_FILE": str(peak_file)}
    proc_status = Path("/proc/self/status").exists()
    command = [sys.executable, "-c", WRAPPER] if proc_status else [sys.executable, "-m", "ppl.cli"]
    with open(out / "stdout", "w") as so, open(out / "stderr", "w") as se:
        proc = subprocess.Popen([*command, *args], stdout=so, stderr=se, env=env, cwd=ROOT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    peak_kb = float(peak_file.read_text()) if peak_file.exists() else usage.ru_maxrss
    return (proc.returncode, (out / "stdout").read_text(), (out / "stderr").read_text(),
            peak_kb / 1024)  # fmt: skip


@pytest.mark.slow
def test_gpfa_second_data_set_with_10000_draws_ends_cleanly_and_honestly(tmp_path):
    bench = _benchmark()
    _, Y = bench.simulate(200, D=20, K=5, seed=0)
    data = tmp_path / "gpfa_seed0.json"
    bench.write_data(str(data), Y, 5)
    output = tmp_path / "out"
    rc, out, err, peak_mb = _run(
        ["fit", str(MODEL), str(data), "--draws", "10000", "--seed", "0", "--output", str(output)],
        tmp_path,
    )
    assert "Traceback" not in err and "internal error" not in err, err[-3000:]
    assert rc in (0, 2), f"exit code {rc}:\n{err[-3000:]}"
    if rc == 2:
        assert "error:" in err
        return
    assert peak_mb < PEAK_RSS_MB, f"peak RSS {peak_mb:.0f} MB"
    fit = json.loads((output / "fit.json").read_text())
    assert fit["gradient_evaluations"] <= min(GRADIENT_BUDGET, 50_000)
    assert f"{fit['gradient_evaluations']} gradient evaluations" in out
    psis = fit["psis"]
    khat, threshold = psis["khat"], psis["khat_threshold"]
    assert threshold <= 0.7
    if khat > 0.5:
        assert fit["verdict"] != "good"
    if khat > threshold:
        assert fit["verdict"] == "not reliable"
        assert fit["faults"] and all(f["parameters"] for f in fit["faults"])
        assert "verdict: not reliable" in out
        assert any("not reliable" in w for w in fit["warnings"]), fit["warnings"]
    if not fit["converged"]:
        assert "(NOT converged)" in out
        assert any("not converged" in w for w in fit["warnings"]), fit["warnings"]
