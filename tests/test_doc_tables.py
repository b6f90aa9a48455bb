"""The benchmark tables of docs/accuracy.md, docs/diagnostics.md and docs/auto.md are the stored
run (benchmarks/results/accuracy_all.json) rendered by benchmarks/tables.py: no number in them
is typed by hand, and a table that differs from its run fails here."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
tables = runpy.run_path(str(ROOT / "benchmarks" / "tables.py"), run_name="tables")

ESCALATION = (
    "auto: the mean-field fit had PSIS k-hat 0.95 > 0.5; a full-rank Gaussian (264 gradient "
    "evaluations) was kept: ELBO -85.62 vs -87.2311, k-hat 0.75; a normalizing flow (42752 "
    "gradient evaluations) was not better: ELBO -85.9 vs -85.62, k-hat 0.41; the ELBO stopped "
    "improving: no linear-response covariance tried"
)


def test_the_docs_tables_are_the_stored_run():
    run = tables["load"]()
    assert len(run["rows"]) >= 30 and run["method"] == "auto"
    assert tables["stale"](run) == [], "python benchmarks/tables.py rewrites them"


def test_a_changed_number_is_stale(tmp_path):
    run = tables["load"]()
    for doc, _ in tables["TABLES"].values():
        (tmp_path / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, tmp_path / doc)
    assert tables["stale"](run, tmp_path) == []
    run["rows"][0]["grad_evals"] += 1  # the accuracy and road tables
    run["rows"][0]["khat"] += 0.01  # ... and the verdict's
    every = [f"{doc}: table {name}" for name, (doc, _) in tables["TABLES"].items()]
    assert tables["stale"](run, tmp_path) == every


def test_the_road_table_reads_the_escalation_note():
    said = tables["candidates"]([ESCALATION])
    assert said == [
        "full-rank Gaussian: kept (264)",
        "normalizing flow: not better (42,752)",
        "linear-response covariance: not tried (ELBO stopped improving)",
    ]
    failed = (
        "auto: the mean-field fit had PSIS k-hat 0.9 > 0.5; a linear-response covariance failed "
        "after 300 gradient evaluations (the fixed-draw optimum is not strict)"
    )
    assert tables["candidates"]([failed]) == ["linear-response covariance: failed (300)"]
    row = {"description": "auto, then a normalizing flow (sinh-arcsinh ...)", "noncentred": True}
    assert tables["kept"](row) == "normalizing flow, non-centred"
    assert tables["kept"]({"description": None}) == "first fit"


def test_the_verdict_table_counts_class_against_verdict():
    rows = [
        {"posterior": "a", "class": "good", "verdict": "not reliable", "right": False, "khat": 0.3,
         "fault_list": [{"parameters": ["x", "y"], "how": "too narrow"}]},
        {"posterior": "b", "class": "inaccurate", "verdict": "usable", "right": False,
         "khat": 0.6, "psis_summaries": True},
        {"posterior": "c", "class": "ok", "verdict": "not reliable", "right": True, "khat": 0.9},
    ]  # fmt: skip
    text = tables["verdict_table"]({"method": "auto", "seed": 1, "rows": rows})
    assert "| a | good | 0.30 (0, 0.00) | not reliable | `x`, `y`: too narrow | **no** |" in text
    assert "| b | inaccurate | 0.60 (0, 0.00) | usable | PSIS-corrected summaries |" in text
    assert "| good | 0 | 0 | 1 |" in text and "| inaccurate | 0 | 1 | 0 |" in text
    assert 'Right on 1 of 3: 1 good fit(s) called "not reliable", 1 fit(s) not good' in text
