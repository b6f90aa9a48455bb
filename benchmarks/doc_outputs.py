"""The benchmark printouts in README.md and docs/, made from the stored results under
benchmarks/results/, so that no number in them is typed by hand (the sibling of
benchmarks/tables.py, which makes the accuracy run's tables):

    python benchmarks/doc_outputs.py            # rewrite every block between the docs' markers
    python benchmarks/doc_outputs.py --check    # exit 1 naming every block that is stale

A block sits between `<!-- output NAME: made by benchmarks/doc_outputs.py -->` and
`<!-- end output NAME -->`. It is either the benchmark's own printout re-made from the JSON it
stored (the same formatting functions) or, for a benchmark that stores no JSON, its printed
output kept verbatim in benchmarks/results/NAME.txt (`python benchmarks/X.py ... | tee
benchmarks/results/NAME.txt`). tests/test_doc_outputs.py re-renders every block and fails when
a doc's differs, and fails on a `text` block that is neither made here nor listed there as not
a command's output.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path("benchmarks") / "results"
for _p in (ROOT, ROOT / "benchmarks"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import doc_markers  # noqa: E402

SCRIPT = "benchmarks/doc_outputs.py"


def _json(root: Path, name: str):
    return json.loads((root / RESULTS / name).read_text())


def fenced(text: str) -> str:
    return "```text\n" + text.rstrip("\n") + "\n```"


# ---- a benchmark's printout kept verbatim -----------------------------------------------------


def stored_text(name: str, lines: slice | None = None) -> Callable[[Path], str]:
    """The printout in benchmarks/results/NAME (all of it, or the lines `lines` selects)."""

    def render(root: Path) -> str:
        text = (root / RESULTS / name).read_text().rstrip("\n").splitlines()
        return fenced("\n".join(line.rstrip() for line in (text[lines] if lines else text)))

    return render


# ---- accuracy.py (a run other than the accuracy_all one tables.py renders) --------------------


def accuracy_printout(name: str) -> Callable[[Path], str]:
    """What accuracy.py printed for a run stored with --json, re-made from its rows."""

    def render(root: Path) -> str:
        from accuracy import FOOTER, HEADER, row, totals

        run = _json(root, name)
        lines = [f"suite={run['suite']} method={run['method']} seed={run['seed']}",
                 HEADER, "-" * len(HEADER)]  # fmt: skip
        lines += [row(r).rstrip() for r in run["rows"]]
        failed = run.get("failed") or []
        lines += totals(run["rows"]) + ([f"failed: {', '.join(failed)}"] if failed else [])
        lines.append(FOOTER)
        return fenced("\n".join(lines))

    return render


# ---- peers.py: docs/benchmarks.md -------------------------------------------------------------

PEER_RUNS = ("peers_posteriordb.json", "peers_pima_epilepsy_gpfa.json")


def _printed(function, *args) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(*args)
    return out.getvalue().strip("\n")


def peers_summary(root: Path) -> str:
    """peers.py's closing summary over the two stored runs (posteriordb; pima, epilepsy, gpfa)."""
    import peers

    problems = [p for name in PEER_RUNS for p in _json(root, name)["problems"]]
    return fenced(_printed(peers.print_summary, problems))


def peers_problems(root: Path) -> str:
    """peers.py's table per problem, from the same two runs."""
    import peers

    out = []
    for name in PEER_RUNS:
        for p in _json(root, name)["problems"]:
            problem = SimpleNamespace(
                name=p["problem"],
                reference=range(p["compared"]),
                reference_source=p["reference_source"],
                notes=p["notes"],
            )
            rows = [peers.Row(**r) for r in p["rows"]]
            out.append(_printed(peers.print_problem, problem, rows))
    return fenced("\n\n".join(out))


def peers_before_after(before: str, after: str) -> Callable[[Path], str]:
    """ppl's row per problem in two stored peers.py runs, side by side (a markdown table)."""

    def ppl_rows(root: Path, name: str) -> dict[str, dict]:
        problems = _json(root, name)["problems"]
        return {p["problem"]: r for p in problems for r in p["rows"] if r["method"] == "ppl"}

    def cells(r: dict | None) -> str:
        if r is None:
            return " | | | "
        return (f"{r['grad_evals']:,} | {r['max_err']:.3f} | {r['median_sd_ratio']:.3f} | "
                f"{r['khat']:.2f}")  # fmt: skip

    def render(root: Path) -> str:
        old, new = ppl_rows(root, before), ppl_rows(root, after)
        lines = ["| problem | before: gradient evaluations | max err | sd ratio | k-hat | "
                 "after: gradient evaluations | max err | sd ratio | k-hat |",
                 "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for problem in dict.fromkeys([*old, *new]):
            lines.append(f"| {problem} | {cells(old.get(problem))} | {cells(new.get(problem))} |")
        return "\n".join(lines)

    return render


# ---- epm.py: docs/epm.md ----------------------------------------------------------------------


def epm_table(name: str) -> Callable[[Path], str]:
    """`python benchmarks/epm.py --table benchmarks/results/NAME`."""

    def render(root: Path) -> str:
        import epm

        return fenced(epm.table(_json(root, name)))

    return render


# ---- scale.py: docs/dsvi.md -------------------------------------------------------------------

SCALE_HEADER = (f"{'rows':>9} {'road':<7} {'wall s':>7} {'driver MB':>9} {'workers MB':>10} "
                f"{'passes':>6} {'max err':>8} {'sd ratio':>13}")  # fmt: skip


def scale_table(name: str) -> Callable[[Path], str]:
    """scale.py's printout (its header and row format, restated) from the JSON of --save."""

    def render(root: Path) -> str:
        lines = [SCALE_HEADER]
        for r in _json(root, name):
            workers = r["workers_mb"] if r["road"].startswith("dask") else 0
            low, high = r["sd_ratio"]
            lines.append(f"{r['rows']:>9} {r['road']:<7} {r['wall']:>7.1f} {r['driver_mb']:>9.0f} "
                         f"{workers:>10.0f} {r['passes']:>6} {r['max_err']:>8.3f} "
                         f"{low:>6.3f}-{high:.3f}")  # fmt: skip
        return fenced("\n".join(lines))

    return render


# ---- gpfa.py --polish: docs/gpfa.md ----------------------------------------------------------

GPFA_METHODS = {"auto": "gamma SGVB (auto)", "advi": "Gaussian ADVI (advi)"}


def gpfa_polish_table(name: str) -> Callable[[Path], str]:
    """The rows gpfa.py --json stored, as a markdown table (the lower Amari error per N bold)."""

    def render(root: Path) -> str:
        rows = _json(root, name)
        best = {n: min(r["amari"] for r in rows if r["N"] == n) for n in {r["N"] for r in rows}}
        lines = ["| N | method | Amari error | total s | note |", "|---:|---|---:|---:|---|"]
        for r in rows:
            amari = f"{r['amari']:.4f}"
            amari = f"**{amari}**" if r["amari"] == best[r["N"]] else amari
            note = "converged" if r["converged"] else "not converged"
            lines.append(f"| {r['N']} | {GPFA_METHODS[r['method']]} | {amari} | "
                         f"{r['total_seconds']:.0f} | {note} |")  # fmt: skip
        return "\n".join(lines)

    return render


def gpfa_printout(name: str) -> Callable[[Path], str]:
    """What gpfa.py printed after its fits, re-made from the rows it stored with --json."""

    def render(root: Path) -> str:
        import gpfa

        out = io.StringIO()  # print_table's default `out` is the stdout of its import
        gpfa.print_table(_json(root, name), out=out)
        return fenced(out.getvalue().strip("\n"))

    return render


# ---- bpfa_inpainting.py: docs/bbvi.md --------------------------------------------------------

BPFA_ROWS = {
    "mean imputation": "mean imputation (baseline)",
    "local 5x5 mean": "local 5 x 5 mean of observed pixels (baseline)",
    "BPFA (ppl auto)": "BPFA (`auto`), non-overlapping patches",
}


def bpfa_inpainting_table(name: str) -> Callable[[Path], str]:
    """bpfa_inpainting.py --json's PSNRs (hidden pixels, whole image) as a markdown table."""

    def render(root: Path) -> str:
        run = _json(root, name)
        lines = ["| method | PSNR hidden pixels | PSNR image |", "|---|---:|---:|"]
        for key, (hidden, image) in run["psnr"].items():
            lines.append(f"| {BPFA_ROWS.get(key, key)} | {hidden:.2f} | {image:.2f} |")
        args = run["args"]
        lines.append(f"\n`--K {args['K']} --stride {args['stride']} --iter {args['iter']} "
                     f"--seed {args['seed']}`: {run['seconds']:.0f} s.")  # fmt: skip
        return "\n".join(lines)

    return render


def end_to_end_table(name: str) -> Callable[[Path], str]:
    """end_to_end.py's table for a run stored with --json, re-made from its runs."""

    def render(root: Path) -> str:
        import end_to_end

        rows = [
            end_to_end.Row(
                problem=r["problem"],
                tool=r["tool"],
                skipped=r.get("skipped"),
                runs=[end_to_end.Run(**run) for run in r["runs"]],
            )
            for r in _json(root, name)["rows"]
        ]
        return fenced(_printed(end_to_end.print_table, rows))

    return render


# ---- the docs' markers ------------------------------------------------------------------------

#: name -> (doc, render(root) -> the fenced block)
OUTPUTS: dict[str, tuple[str, Callable[[Path], str]]] = {
    "peers-summary": ("docs/benchmarks.md", peers_summary),
    "peers-problems": ("docs/benchmarks.md", peers_problems),
    "peers-default-road": (
        "docs/benchmarks.md",
        peers_before_after("peers_pima_epilepsy_gpfa.json", "peers_default_road.json"),
    ),
    "epm-les-miserables": ("docs/epm.md", epm_table("epm_les_miserables.json")),
    "epm-dicty": ("docs/epm.md", epm_table("epm_dicty_publication.json")),
    "accuracy-auto-202de36": ("docs/accuracy.md", stored_text("accuracy_auto_202de36.txt")),
    "scale": ("docs/dsvi.md", scale_table("scale_default_road.json")),
    "scale-1e7": ("docs/dsvi.md", scale_table("scale_default_road_1e7.json")),
    "bpfa-k32": ("docs/bbvi.md", bpfa_inpainting_table("bpfa_k32_stride8.json")),
    "gradient-speed-hand": ("docs/benchmarks.md", stored_text("gradient_speed_hand.txt")),
    "end-to-end-peers": (
        "docs/benchmarks.md",
        end_to_end_table("end_to_end_peers_2026-11-26.json"),
    ),
    "api-overhead": ("docs/python.md", stored_text("api_overhead_eight_schools.txt")),
    "ard": ("docs/dsvi.md", stored_text("ard.txt")),
    "bbvi-variance": ("docs/bbvi.md", stored_text("bbvi_variance_at_start.txt")),
    "gp-boston": ("docs/dsvi.md", stored_text("gp_boston.txt")),
    "gpfa-grad-only": ("docs/gpfa.md", stored_text("gpfa_grad_only.txt")),
    "dsvi-pima": ("docs/dsvi.md", stored_text("dsvi_pima.txt")),
    "gpfa-synthetic": ("docs/gpfa.md", gpfa_printout("gpfa_synth.json")),
    "gpfa-polish": ("docs/gpfa.md", gpfa_polish_table("gpfa_polish_n1000_n100.json")),
}


def rewritten(text: str, name: str, block: str) -> str:
    """The doc's text with output `name` replaced; ValueError when its markers are missing."""
    return doc_markers.rewritten(text, "output", name, SCRIPT, block)


def stale(root: Path = ROOT, results: Path | None = None) -> list[str]:
    """The blocks whose docs (under `root`) differ from what the stored results (under
    `results`, default `root`) render."""
    out = []
    for name, (doc, render) in OUTPUTS.items():
        text = (root / doc).read_text()
        if rewritten(text, name, render(results or root)) != text:
            out.append(f"{doc}: output {name}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say which blocks are stale")
    args = ap.parse_args(argv)
    if args.check:
        return doc_markers.report_stale(stale(), SCRIPT)
    blocks = [(name, doc, render(ROOT)) for name, (doc, render) in OUTPUTS.items()]
    doc_markers.rewrite_all(ROOT, blocks, "output", SCRIPT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
