"""The benchmark printouts in README.md and docs/ are the stored results
(benchmarks/results/) rendered by benchmarks/doc_outputs.py: a block that differs from what its
stored run renders fails here, and so does a `text` block that no script makes and that is not
listed below as something other than a command's output."""

from __future__ import annotations

import runpy
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
outputs = runpy.run_path(str(ROOT / "benchmarks" / "doc_outputs.py"), run_name="doc_outputs")

#: `text` blocks that are no command's output, by (doc, first line): equations, the usage
#: synopsis.
NOT_OUTPUT = {
    ("README.md", "ppl fit   MODEL [DATA ...] [--method"),
    ("docs/cli.md", "ppl fit   MODEL [DATA ...] [options]"),
    ("docs/advi.md", "L(q) = E_q["),
    ("docs/advi.md", "∇_μ L ≈ (1/S) Σ_s g_s"),
    ("docs/auto.md", "x = F⁻¹(u; a, b)"),
}


def _text_blocks(doc: Path) -> list[tuple[int, str]]:
    """(line, first line) of each `text` block outside the scripts' markers, and of each
    `console benchmark` block that shows output (the docs tests only parse its commands)."""
    out, lines, inside, i = [], doc.read_text().splitlines(), 0, 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(("<!-- table ", "<!-- output ")):
            inside += 1
        elif line.startswith(("<!-- end table ", "<!-- end output ")):
            inside -= 1
        elif line.startswith("```text") or line.startswith("```console benchmark"):
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            shows = line.startswith("```text") or any(b and not b.startswith("$ ") for b in body)
            if shows and not inside:
                out.append((start, body[0] if body else ""))
        i += 1
    return out


def test_the_docs_printouts_are_the_stored_runs():
    assert outputs["stale"]() == [], "python benchmarks/doc_outputs.py rewrites them"


def test_a_changed_stored_number_is_stale(tmp_path):
    docs, results = tmp_path / "docs", tmp_path / "results"
    for doc, _ in outputs["OUTPUTS"].values():
        (docs / doc).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / doc, docs / doc)
    shutil.copytree(ROOT / "benchmarks" / "results", results / "benchmarks" / "results")
    assert outputs["stale"](docs, results) == []
    for path in sorted((results / "benchmarks" / "results").iterdir()):
        path.write_text(path.read_text().replace("3", "4").replace("6", "7"))  # most numbers
    every = [f"{doc}: output {name}" for name, (doc, _) in outputs["OUTPUTS"].items()]
    assert outputs["stale"](docs, results) == every


def test_every_text_block_is_made_by_a_script_or_is_no_output():
    """A benchmark's printout typed into a doc is a number nobody checks: store the run and
    render it (benchmarks/doc_outputs.py), or run the command in a console block."""
    typed = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        name = str(doc.relative_to(ROOT))
        for line, first in _text_blocks(doc):
            known = NOT_OUTPUT
            if not any(d == name and first.startswith(start) for d, start in known):
                typed.append(f"{name}:{line}: {first[:60]}")
    assert typed == []


def test_the_lists_name_blocks_that_exist():
    """An entry of NOT_OUTPUT whose block is gone (made by a script now) goes."""
    firsts = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        firsts[str(doc.relative_to(ROOT))] = [f for _, f in _text_blocks(doc)]
    for doc, start in NOT_OUTPUT:
        assert any(f.startswith(start) for f in firsts[doc]), (doc, start)


def test_epm_prose_quotes_its_stored_runs():
    """docs/epm.md's counts of converged fits and the fallback rows' AUC are the stored runs'
    (it once said no NormSGVB fit converged where 5 of 30 had, and 0.810 for a row of 0.780)."""
    import json

    text = " ".join((ROOT / "docs" / "epm.md").read_text().split())
    results = ROOT / "benchmarks" / "results"
    les = json.loads((results / "epm_les_miserables.json").read_text())

    def met(rows, method):
        return sum(bool(r.get("converged")) for r in rows if r["method"] == method)

    auc = {(r["K"], r["split"]): r["auc"] for r in les if r["method"] == "auto"}
    assert f"(AUC {auc[10, 2]:.3f} and {auc[20, 0]:.3f}, the stored run's rows)" in text
    assert (
        f"No gammaSGVB fit and {met(les, 'advi')} of 30 NormSGVB fits met Stan's 1% rule "
        f"within 1000 iterations; {met(les, 'auto')} of 30 `auto` fits did"
    ) in text
    assert met(les, "gamma") == 0
    dicty = json.loads((results / "epm_dicty_publication.json").read_text())
    assert (f"({met(dicty, 'auto')} of 30 `auto` fits met it; no gammaSGVB fit and "
            f"{met(dicty, 'advi')} of 30 NormSGVB fits did") in text  # fmt: skip
    assert met(dicty, "gamma") == 0


def _ppl_row(name: str) -> dict:
    import json

    run = json.loads((ROOT / "benchmarks" / "results" / name).read_text())
    return next(r for p in run["problems"] for r in p["rows"] if r["method"] == "ppl")


def test_benchmarks_gpfa_prose_quotes_its_stored_runs():
    """docs/benchmarks.md's GPFA numbers with 20,000 output draws are the two stored runs'."""
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    road, before = (
        _ppl_row("peers_gpfa_20000_draws.json"),
        _ppl_row("peers_gpfa_20000_draws_202de36.json"),
    )
    assert (f"the road's max err is {road['max_err']:.3f} and its median error "
            f"{road['median_err']:.3f}") in text  # fmt: skip
    assert f"gives {before['max_err']:.3f}: the road is not worse" in text
    assert road["max_err"] <= before["max_err"]


def test_dsvi_ard_prose_quotes_its_stored_run():
    """docs/dsvi.md's ARD counts and test errors are benchmarks/results/ard.txt's rows."""
    import re

    rows = {}
    for line in (ROOT / "benchmarks" / "results" / "ard.txt").read_text().splitlines()[1:]:
        m = re.match(r"(\w+)\s+(ARD|fixed N\(0,1\))\s+\d+\s+\d+\s+\S+\s+(\d+)/(\d+)\s+(\S*)", line)
        if m:
            rows[m[1], m[2]] = int(m[3]), int(m[4]), m[5]
    text = " ".join((ROOT / "docs" / "dsvi.md").read_text().split())
    (ard, n, hits), (fixed, _, _) = rows["synthetic", "ARD"], rows["synthetic", "fixed N(0,1)"]
    assert f"ARD finds {hits.split('/')[0]} of the 20 true features" in text
    assert f"halves the fixed prior's test error ({ard / n:.1%} vs {fixed / n:.1%})" in text
    assert 0.4 < ard / fixed < 0.6  # "halves"
    nci_ard, nci_fixed = rows["nci60", "ARD"], rows["nci60", "fixed N(0,1)"]
    assert (f"ARD misclassifies {nci_ard[0]} of {nci_ard[1]} test lines, the fixed prior "
            f"{nci_fixed[0]}") in text  # fmt: skip
    assert abs(nci_ard[0] - nci_fixed[0]) == 1  # "the difference is one line"


def test_bbvi_prose_quotes_its_stored_run():
    """docs/bbvi.md's variance ratios are the 'all' rows of the stored bbvi_variance.py run."""
    import re

    out = (ROOT / "benchmarks" / "results" / "bbvi_variance_at_start.txt").read_text()
    alls = [line.split() for line in out.splitlines() if line.startswith("all ")]
    (start, run) = ([float(x.rstrip("x")) for x in row[5:7]] for row in alls)
    terms = re.search(r"median (\d+) log-joint terms per coordinate \(max \d+\) of (\d+)", out)
    text = " ".join((ROOT / "docs" / "bbvi.md").read_text().split())
    mantissa, exponent = f"{start[0]:.0e}".split("e")
    assert f"by a factor of about {mantissa} x 10^{int(exponent)}" in text
    assert f"a median of {terms[1]} of the {terms[2]} terms" in text
    assert f"a further {start[1]:.1f}x at the start and {run[1]:.0f}x along the run" in text


def test_benchmarks_peer_gpfa_bullet_quotes_its_stored_run():
    """docs/benchmarks.md's GPFA bullet under the summary is the stored peers run's GPFA rows."""
    import json

    run = json.loads(
        (ROOT / "benchmarks" / "results" / "peers_pima_epilepsy_gpfa.json").read_text()
    )
    gpfa = next(p for p in run["problems"] if p["problem"] == "gpfa-synthetic")
    row = {r["method"]: r for r in gpfa["rows"]}
    ppl, numpyro, pymc = row["ppl"], row["numpyro-normal"], row["pymc-advi"]
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    assert (f"ppl's means are the closest (max {ppl['max_err']:.2f} sd against NumPyro's "
            f"{numpyro['max_err']:.1f} and PyMC's {pymc['max_err']:.0f}), but its sds are far "
            f"too small (median ratio {ppl['median_sd_ratio']:.3f}) and its k-hat of "
            f"{ppl['khat']:.2f} says so") in text  # fmt: skip
    assert ppl["max_err"] == min(r["max_err"] for r in gpfa["rows"])


def test_benchmarks_accuracy_bullet_quotes_the_stored_peer_runs():
    """docs/benchmarks.md's accuracy bullet under the summary: the ranges and counts are those of
    the two stored peers runs (posteriordb: 11 problems; pima, epilepsy, gpfa: 3)."""
    import json
    import math

    runs = [
        json.loads((ROOT / "benchmarks" / "results" / n).read_text()) for n in outputs["PEER_RUNS"]
    ]
    pdb = runs[0]["problems"]

    def rows(problems, method):
        return [
            r
            for p in problems
            for r in p["rows"]
            if r["method"] == method and r["max_err"] is not None
        ]

    ppl, pymc, numpyro = (rows(pdb, m) for m in ("ppl", "pymc-advi", "numpyro-normal"))
    errs = [r["max_err"] for r in ppl]
    ratios = [r["median_sd_ratio"] for r in ppl]
    close = sum(round(e, 2) <= 0.1 for e in errs)

    def span(rs):
        low, high = min(r["max_err"] for r in rs), max(r["max_err"] for r in rs)
        return f"{low:.2g}-{high:.0f}"

    within = math.ceil(max(errs) * 100) / 100  # "within": rounded up
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    assert (f"every mean within {within:.2f} reference sd ({close} of {len(pdb)} within 0.1), "
            f"and its median sd ratio is {min(ratios):.2f}-{max(ratios):.2f}. PyMC's mean-field "
            f"ADVI misses by {span(pymc)} sd and NumPyro's AutoNormal by {span(numpyro)} sd"
            ) in text  # fmt: skip
    problems = [p for run in runs for p in run["problems"]]
    assert (
        f"on all {len(problems)} problems, and than every peer column on all {len(problems)}"
        in text
    )
    for p in problems:
        ours = next(r["max_err"] for r in p["rows"] if r["method"] == "ppl")
        assert all(
            ours < r["max_err"]
            for r in p["rows"]
            if r["method"] != "ppl" and r["max_err"] is not None
        )


def test_dsvi_gp_prose_quotes_its_stored_run():
    """docs/dsvi.md's GP paragraph: DSVI beats ML-II on both scores, most on NLPD, and ML-II's
    largest length-scale (input and size) is the stored gp_boston.py run's."""
    import re

    out = (ROOT / "benchmarks" / "results" / "gp_boston.txt").read_text()
    score = {
        m[1]: (float(m[2]), float(m[3]))
        for m in re.finditer(r"^(ML-II|DSVI) .*?\)\s+(\S+)\s+(\S+)", out, re.M)
    }
    (smse_ml, nlpd_ml), (smse_vi, nlpd_vi) = score["ML-II"], score["DSVI"]
    assert smse_vi < smse_ml and nlpd_vi < nlpd_ml
    assert 1 - nlpd_vi / nlpd_ml > 1 - smse_vi / smse_ml  # "on NLPD most"
    rho = [float(x) for x in re.search(r"ML-II: .*?rho \[(.*?)\]", out, re.S)[1].split()]
    big = max(rho)
    mantissa, exponent = f"{big:.1e}".split("e")
    text = " ".join((ROOT / "docs" / "dsvi.md").read_text().split())
    assert (
        f"one length-scale to {mantissa}e{int(exponent)} (input {rho.index(big) + 1}, `indus`"
        in text
    )
    assert rho.index(big) == 2  # Boston's third input is indus


def test_dsvi_pima_prose_quotes_its_stored_run():
    """docs/dsvi.md's Pima paragraph: full rank within the issue's bar on every seed, the
    mean-field fits' worst sd and correlation errors, from benchmarks/results/dsvi_pima.txt."""
    rows = {}
    for line in (ROOT / "benchmarks" / "results" / "dsvi_pima.txt").read_text().splitlines():
        words = line.split()
        if len(words) >= 6 and (words[2].isdigit() or words[2] == "max"):
            rows.setdefault(" ".join(words[:2]), []).append([float(w) for w in words[3:6]])
    for full in ("dsvi full", "fullrank ADVI"):
        assert all(m <= 0.1 and s <= 0.15 and c <= 0.1 for m, s, c in rows[full])
    assert rows["dsvi full"] == rows["fullrank ADVI"]  # "identical numbers"
    mean_field = rows["dsvi diag"] + rows["meanfield ADVI"]
    sd, corr = max(r[1] for r in mean_field), max(r[2] for r in mean_field)
    text = " ".join((ROOT / "docs" / "dsvi.md").read_text().split())
    assert (f"miss the sds by up to {sd:.0%} and cannot represent the correlations "
            f"(up to {corr:.2f} in the posterior)") in text  # fmt: skip


def test_benchmarks_speed_bullet_quotes_the_stored_peer_runs():
    """docs/benchmarks.md's speed bullet under the peers' summary: the fit and set-up seconds and
    the count of kept full-rank fits are the two stored peers runs' rows."""
    import json

    runs = [
        json.loads((ROOT / "benchmarks" / "results" / n).read_text()) for n in outputs["PEER_RUNS"]
    ]
    table = [{r["method"]: r for r in p["rows"]} for run in runs for p in run["problems"]]

    def span(method: str, key: str) -> tuple[float, float]:
        values = [r[method][key] for r in table]
        return min(values), max(values)

    fit, pymc, numpyro = (span(m, "fit_seconds") for m in ("ppl", "pymc-advi", "numpyro-normal"))
    compile_numpyro, compile_pymc = (
        span(m, "setup_seconds") for m in ("numpyro-normal", "pymc-advi")
    )
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    assert (f"{fit[0]:.0f}-{fit[1]:.0f} s against PyMC's {pymc[0]:.1f}-{pymc[1]:.1f} s and "
            f"NumPyro's {numpyro[0]:.2f}-{numpyro[1]:.1f} s") in text  # fmt: skip
    assert (f"NumPyro also spends {compile_numpyro[0]:.0f}-{compile_numpyro[1]:.0f} s compiling, "
            f"PyMC {compile_pymc[0]:.1f}-{compile_pymc[1]:.0f} s") in text  # fmt: skip
    assert span("ppl", "setup_seconds")[1] < 0.4  # "ppl's setup is under 0.4 s"
    kept = sum(any("fitted too and kept" in n for n in r["ppl"]["notes"]) for r in table)
    assert f"(kept on {kept} of the {len(table)} problems here, tried on GPFA)" in text


def test_benchmarks_end_to_end_prose_says_what_the_stored_run_says():
    """'Every ppl target is met' under docs/benchmarks.md's end-to-end table is the stored run's."""
    block = outputs["OUTPUTS"]["end-to-end-peers"][1](ROOT)
    ppl_rows = [line for line in block.splitlines() if line.split()[1:2] == ["ppl"]]
    assert len(ppl_rows) == 3 and all(": met;" in line for line in ppl_rows)
    text = " ".join((ROOT / "docs" / "benchmarks.md").read_text().split())
    assert "Every ppl target is met." in text


def test_gpfa_synthetic_prose_says_what_the_stored_run_says():
    """docs/gpfa.md's reading of the synthetic run: gamma SGVB's Amari error lower at every N by
    the stated margins, both errors falling with N, no fit meeting Stan's rule."""
    import json

    rows = json.loads((ROOT / "benchmarks" / "results" / "gpfa_synth.json").read_text())
    amari = {(r["N"], r["method"]): r["amari"] for r in rows}
    sizes = sorted({r["N"] for r in rows})
    gains = [1 - amari[n, "auto"] / amari[n, "advi"] for n in sizes]
    text = " ".join((ROOT / "docs" / "gpfa.md").read_text().split())
    assert len(sizes) == 3
    assert f"yes, at all three N, by {min(gains):.0%}-{max(gains):.0%}".replace("%-", "-") in text
    for method in ("auto", "advi"):
        errors = [amari[n, method] for n in sizes]
        assert errors == sorted(errors, reverse=True), method  # "the error falls with N"
    assert not any(r["converged"] for r in rows)  # "none met it in the stored run"


def test_dsvi_student_t_elbo_gap_is_the_two_console_blocks():
    """docs/dsvi.md's 'Its ELBO is 1.5 nats below the full-rank normal fit's (-109.9, ...)' is
    the difference of the ELBO lines of its console block and docs/advi.md's example."""
    import re

    def elbo(doc: str) -> float:
        return float(re.search(r"^ELBO: (\S+)", (ROOT / "docs" / doc).read_text(), re.M)[1])

    student_t, normal = elbo("dsvi.md"), elbo("advi.md")
    text = " ".join((ROOT / "docs" / "dsvi.md").read_text().split())
    assert (f"Its ELBO is {normal - student_t:.1f} nats below the full-rank normal fit's "
            f"({normal:.1f},") in text  # fmt: skip
    bound = (ROOT / "tests" / "data" / "test_stream.py").read_text()
    assert (
        "< 0.75)" in bound and "< 0.2)" in bound
    )  # "within 0.75 sd and ... 20%, the test's bounds"
