"""benchmarks/end_to_end.py: a ppl run is timed from outside and its output parsed; peers that
the given interpreter cannot run are skipped with a note."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
bench = runpy.run_path(str(ROOT / "benchmarks" / "end_to_end.py"), run_name="end_to_end")


def test_ppl_run_and_skipped_peer(tmp_path, capsys):
    out = tmp_path / "e2e.json"
    code = bench["main"]([
        "--problems", "eight_schools", "--tools", "ppl", "pymc-advi", "--iter", "300",
        "--python", str(tmp_path / "no-such-python"), "--json", str(out),
    ])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "eight_schools  ppl" in printed and "target <= 1 s" in printed
    assert "skipped: " in printed and "no-such-python" in printed
    rows = {r["tool"]: r for r in json.loads(out.read_text())["rows"]}
    (run,) = rows["ppl"]["runs"]
    assert run["exit_code"] == 0 and run["error"] is None
    assert run["grad_evals"] > 0 and run["wall_s"] > 0 and run["rss_mb"] > 20
    assert 0 < run["cpu_s"] < 10 * run["wall_s"]
    assert run["inner"]["fit_s"] <= run["wall_s"]
    assert rows["pymc-advi"]["runs"] == [] and rows["pymc-advi"]["skipped"]


def test_a_failing_run_is_reported_not_raised(tmp_path):
    spec = bench["Spec"]("bad", tmp_path / "missing.model", (), 1, 1.0)
    args = bench["parse_args"](["--timeout", "60"])
    run = bench["run_ppl"](spec, [], args, {"PYTHONPATH": str(ROOT)})
    assert run.exit_code == 2 and "missing.model" in run.error
