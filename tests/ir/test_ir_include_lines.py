"""`ppl ir` names the line a user finds in their editor: a statement from an `#include`d file by
that file's name and its own line, a statement of the model file after an include by the model
file's line (not a line of the text with the includes expanded)."""

from __future__ import annotations

import json
from pathlib import Path

from ppl.ir.graph import build_graph
from ppl.ir.passes import lowered, parse
from ppl.language.frontend import load_model

LIKELIHOOD = "mu ~ normal(0, 10);\nfor (n in 1:N)\n  y[n] ~ normal(mu, 1);\n"
MODEL = """data { int N; vector[N] y; }
parameters { real mu; }
model {
  #include "parts/lik.stan"
  target += -0.5 * square(mu);
}
"""


def _graph(tmp_path: Path):
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "lik.stan").write_text(LIKELIHOOD)
    (tmp_path / "m.stan").write_text(MODEL)
    path = str(tmp_path / "m.stan")
    return build_graph(lowered(load_model(path), parse("all"))), path


def test_factors_and_decisions_name_the_included_file_and_its_line(tmp_path: Path):
    graph, model = _graph(tmp_path)
    included = str(tmp_path / "parts" / "lik.stan")
    by_text = {n.text.split(";")[0]: n for n in graph.of_kind("factor")}
    assert graph.where(by_text["mu ~ normal(0, 10)"].line) == (included, 1)
    assert graph.where(by_text["y[n] ~ normal(mu, 1)"].line) == (included, 3)
    # the model's own statement after the 3-line include: its line 5, not the expanded text's 7
    assert graph.where(by_text["target += (-0.5) * square(mu)"].line) == (None, 5)
    text = graph.to_text()
    assert f"{included}:3" in text and f"{included}:1" in text
    vectorised = [line for line in text.splitlines() if "vectorised over n" in line]
    assert vectorised and f"line {included}:2" in vectorised[0], text
    nodes = {n["text"].split(";")[0]: n for n in json.loads(graph.to_json())["nodes"]
             if n["kind"] == "factor"}  # fmt: skip
    assert nodes["y[n] ~ normal(mu, 1)"]["file"] == included
    assert nodes["y[n] ~ normal(mu, 1)"]["line"] == 3
    assert "file" not in nodes["target += (-0.5) * square(mu)"]
    assert nodes["target += (-0.5) * square(mu)"]["line"] == 5
    assert graph.model == model


def test_a_model_without_includes_keeps_its_lines(tmp_path: Path):
    (tmp_path / "m.stan").write_text(MODEL.replace('  #include "parts/lik.stan"\n', LIKELIHOOD))
    graph = build_graph(lowered(load_model(str(tmp_path / "m.stan")), parse("all")))
    lines = sorted(n.line for n in graph.of_kind("factor"))
    assert lines == [4, 6, 7] and all(graph.where(x) == (None, x) for x in lines)
