"""One record of what a fit did (ppl.outputs.record): the console, fit.json and the Python API
say the same method, kept q, families, ending, verdict, notes and advice; the advice never
repeats what the fit already did."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ppl
from ppl.families.choice import FamilyPolicy
from ppl.methods.auto import CANDIDATE
from ppl.methods.escalation import FULL_RANK, LINEAR_RESPONSE, LOW_RANK, gaussian_how

#: auto keeps a full-rank Gaussian over its mean-field fit (k-hat 0.67 > 0.5)
CORRELATED = """parameters { vector[2] x; }
model { x ~ multi_normal([0, 0]', [[1, 0.95], [0.95, 1]]); }
"""
#: mean-field misses the correlation: not reliable, with advice
RIDGE = """parameters { vector[2] x; }
model { x ~ multi_normal([0, 0]', [[1, 0.995], [0.995, 1]]); }
"""
#: a half-normal scale: its log has a tail no Gaussian follows, whatever its covariance
HALF_NORMAL = """parameters { real mu; real<lower=0> sigma; }
model { mu ~ normal(0, 1); sigma ~ normal(0, 2); }
"""

CASES = [
    pytest.param(CORRELATED, ["--method", "auto"], id="auto-keeps-full-rank"),
    pytest.param(RIDGE, ["--method", "meanfield"], id="meanfield-not-reliable"),
    pytest.param(HALF_NORMAL, ["--method", "fullrank"], id="fullrank-not-reliable"),
]


def _console(text: str) -> dict:
    """What the console says, by line: the record's fields as printed."""
    lines = text.splitlines()
    first = next(x for x in lines if x.startswith("method: "))
    method_text = re.sub(r", \d+ iterations, \d+ gradient evaluations, [\d.]+ s$", "",
                         first[len("method: "):])  # fmt: skip
    families = dict(re.findall(r"^  q\((\w+)\): (.*)$", text, flags=re.M))
    verdict = next(x for x in lines if x.startswith("verdict: "))[len("verdict: ") :]
    return {
        "method_text": method_text,
        "ended_by": next(x for x in lines if x.startswith("ended by: "))[len("ended by: ") :],
        "verdict": verdict.split(" (")[0],
        "notes": [x[len("note: ") :] for x in lines if x.startswith("note: ")],
        "families": families,
        "warnings": [x[len("  - ") :] for x in lines if x.startswith("  - ")],
    }


@pytest.mark.parametrize("code, options", CASES)
def test_console_fit_json_and_fit_say_the_same(tmp_path: Path, code: str, options: list[str]):
    model = tmp_path / "m.stan"
    model.write_text(code)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "ppl.cli", "fit", str(model), *options,
                          "--output", str(tmp_path / "out"), "--quiet"],
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    console = _console(out.stdout + out.stderr)
    info = json.loads((tmp_path / "out" / "fit.json").read_text())
    for key in ("method_text", "ended_by", "verdict", "notes", "families"):
        assert console[key] == info[key], key
    assert "ended_by" not in info["psis"]  # no second, older account of the ending
    if info["advice"] is not None:
        assert any(w.endswith(info["advice"]) for w in console["warnings"])
        if any("full-rank" in family for family in info["families"].values()):
            assert "--method fullrank" not in info["advice"]  # never what was done
    else:
        assert info["verdict"] != "not reliable"

    method = dict(zip(options[::2], options[1::2], strict=True))["--method"]
    with pytest.warns() if info["verdict"] == "not reliable" else _nothing():
        fit = ppl.Model.from_file(model).fit(method=method, progress=None)
    api = fit.info()
    for key in ("method", "method_text", "kept", "ended_by", "verdict", "faults", "advice",
                "notes", "families", "converged"):  # fmt: skip
        assert api[key] == info[key], key
    assert (fit.method, fit.verdict, fit.families, fit.notes) == (
        info["method"], info["verdict"], info["families"], info["notes"])  # fmt: skip
    assert _console(str(fit))["ended_by"] == info["ended_by"]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_the_kept_candidate_is_named():
    model = ppl.Model(CORRELATED)
    fit = model.fit(progress=None)
    assert fit.info()["kept"] == FULL_RANK
    assert ppl.Model(CORRELATED).fit(method="fullrank", progress=None).info()["kept"] is None


@pytest.mark.parametrize("name", [LOW_RANK, LINEAR_RESPONSE])
def test_a_kept_gaussian_is_labelled_as_what_it_is(name: str):
    """A low-rank-plus-diagonal or linear-response Gaussian kept by auto is not labelled
    full-rank (the family lines once said full-rank where the note said low-rank)."""
    how = gaussian_how(CANDIDATE, name)
    assert name.split()[0] in how.families.gaussian
    assert "full-rank" not in how.families.gaussian and how.fitted_as == "auto"
    assert CANDIDATE.families.gaussian == FamilyPolicy(gaussian=FULL_RANK).gaussian
    assert gaussian_how(CANDIDATE, FULL_RANK) is CANDIDATE
