"""The tables of docs/accuracy.md, docs/diagnostics.md and docs/auto.md, made from the stored
accuracy run, so that no number in them is typed by hand:

    python benchmarks/accuracy.py --suite all --method auto --seed 1 \\
        --json benchmarks/results/accuracy_all.json
    python benchmarks/tables.py            # rewrite the tables between the docs' markers
    python benchmarks/tables.py --check    # exit 1 naming every table that is stale

A table sits between `<!-- table NAME: made by benchmarks/tables.py -->` and
`<!-- end table NAME -->` (NAME: accuracy, verdict, road); tests/test_doc_tables.py re-renders
them from the stored JSON and fails when a doc's differs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import doc_markers  # noqa: E402
from accuracy import FOOTER, HEADER, row, totals  # noqa: E402

SCRIPT = "benchmarks/tables.py"
RUN = ROOT / "benchmarks" / "results" / "accuracy_all.json"
COMMAND = (
    "python benchmarks/accuracy.py --suite all --method auto --seed 1 "
    "--json benchmarks/results/accuracy_all.json"
)
CLASSES = ("good", "ok", "inaccurate")
VERDICTS = ("good", "usable", "not reliable")
#: Names shown per fault before "+N more".
NAMES_SHOWN = 4


def load(path: Path = RUN) -> dict:
    return json.loads(path.read_text())


def provenance(run: dict) -> str:
    return (f"The stored run `benchmarks/results/accuracy_all.json` (`{COMMAND}`): "
            f"{run.get('date') or 'undated'}, ppl at {run.get('commit') or 'an unknown commit'}, "
            f"method {run['method']}, seed {run['seed']}, 4000 draws per fit.")  # fmt: skip


# ---- docs/accuracy.md: the benchmark's own printout -------------------------------------------


def accuracy_table(run: dict) -> str:
    """The lines accuracy.py printed, re-made from the rows (the seconds are as measured)."""
    lines = [f"$ python benchmarks/accuracy.py --suite {run['suite']} --method {run['method']} "
             f"--seed {run['seed']}",
             f"suite={run['suite']} method={run['method']} seed={run['seed']}",
             HEADER, "-" * len(HEADER)]  # fmt: skip
    lines += [row(r).rstrip() for r in run["rows"]]
    failed = run.get("failed") or []
    lines += totals(run["rows"]) + ([f"failed: {', '.join(failed)}"] if failed else [])
    lines.append(FOOTER)
    return "\n".join([provenance(run), "", "```text", *lines, "```"])


# ---- docs/diagnostics.md: the verdict ---------------------------------------------------------


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:NAMES_SHOWN])
    more = len(names) - NAMES_SHOWN
    return shown + (f" +{more} more" if more > 0 else "") if names else "q"


def faults_text(r: dict) -> str:
    faults = r.get("fault_list") or []
    text = "; ".join(f"{_names(f['parameters'])}: {f['how']}" for f in faults)
    extra = []
    if r.get("tail_only"):
        extra.append("k-hat over its threshold, weighted moments agree with q's")
    if r.get("psis_summaries"):
        extra.append("PSIS-corrected summaries")
    return "; ".join([t for t in [text] if t] + extra) or ""


def verdict_table(run: dict) -> str:
    """Per problem: the accuracy class, k-hat (from how many draws, against which threshold),
    the verdict, the faults it named and how, and whether it was right; then class against
    verdict, counted."""
    out = [provenance(run), "",
           "| problem | class | k-hat (draws, threshold) | verdict | faults, and what it said "
           "| right |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for r in run["rows"]:
        khat = f"{r['khat']:.2f} ({r.get('khat_draws', 0):,}, {r.get('khat_threshold', 0):.2f})"
        out.append(f"| {r['posterior']} | {r['class']} | {khat} | {r['verdict']} | "
                   f"{faults_text(r)} | {'yes' if r['right'] else '**no**'} |")  # fmt: skip
    counts = Counter((r["class"], r["verdict"]) for r in run["rows"])
    out += ["", "| class \\ verdict | " + " | ".join(VERDICTS) + " |",
            "|---|" + "---|" * len(VERDICTS)]  # fmt: skip
    for c in CLASSES:
        out.append(f"| {c} | " + " | ".join(str(counts[c, v]) for v in VERDICTS) + " |")
    n = len(run["rows"])
    right = sum(r["right"] for r in run["rows"])
    alarms = counts["good", "not reliable"]
    missed = n - right - alarms
    out += ["", f"Right on {right} of {n}: {alarms} good fit(s) called \"not reliable\", "
                f"{missed} fit(s) not good and not called so."]  # fmt: skip
    return "\n".join(out)


# ---- docs/auto.md: the road -------------------------------------------------------------------

_CANDIDATE = re.compile(
    r"an? (?P<name>[\w -]+?) (?:\((?P<grads>\d+) gradient evaluations\) was (?P<end>kept|not "
    r"better)|failed(?: after (?P<lost>\d+) gradient evaluations)?)"
)
_NOT_TRIED = re.compile(r"(?P<why>the ELBO stopped improving|the gradient budget was spent): "
                        r"no (?P<name>[\w -]+) tried")  # fmt: skip


def kept(r: dict) -> str:
    """What q is: the road's first fit (a family per parameter) or the candidate it kept."""
    desc = r.get("description") or ""
    m = re.match(r"auto, then an? (.+?) \(", desc)
    what = m.group(1) if m else "first fit"
    return what + (", non-centred" if r.get("noncentred") else "")


def candidates(notes: list[str]) -> list[str]:
    """The escalation's candidates, each with its gradients and its end, from the road's note."""
    out = []
    for note in notes:
        if not note.startswith("auto: the mean-field fit had"):
            continue
        for part in note.split("; ")[1:]:
            m, skip = _CANDIDATE.match(part), _NOT_TRIED.match(part)
            if m and m.group("end"):
                out.append(f"{m.group('name')}: {m.group('end')} ({int(m.group('grads')):,})")
            elif m:
                lost = m.group("lost")
                out.append(f"{m.group('name')}: failed" + (f" ({int(lost):,})" if lost else ""))
            elif skip:
                why = "budget spent" if "budget" in skip.group("why") else "ELBO stopped improving"
                out.append(f"{skip.group('name')}: not tried ({why})")
    return out


def road_notes(notes: list[str]) -> list[str]:
    """The road's other decisions, short: the mode as a suspect, a second mode, non-centring,
    restarts."""
    out = []
    for note in notes:
        start = re.search(r"and the (.+?) start had the higher ELBO", note)
        kept_start = f", {start.group(1)} start kept" if start else ""
        if "grows without bound" in note:
            out.append(f"no mode (unbounded density): both starts solved{kept_start}")
        elif "mode search did not converge" in note:
            out.append(f"mode search unconverged: both starts solved{kept_start}")
        elif note.startswith("auto: a second mode"):
            out.append("second mode found")
        elif note.startswith("auto: non-centred"):
            out.append("non-centred refit kept")
        elif "non-centred fit" in note and "not better" in note:
            out.append("non-centred refit not better")
        elif note.startswith("auto: left centred"):
            out.append("left centred (data informative)")
        elif "restart(s)" in note:
            out.append("restarted")
    return out


def road_table(run: dict) -> str:
    """Per problem: unconstrained dimension, gradients, what the road kept, its candidates and
    its other decisions; then the totals."""
    out = [provenance(run), "",
           "| problem | D | gradients | kept | candidates (gradients) "
           "| the road's other decisions |",
           "|---|---|---|---|---|---|"]  # fmt: skip
    for r in run["rows"]:
        budget = "" if r["converged"] else " (NOT converged)"
        out.append(f"| {r['posterior']} | {r.get('dim', r['params'])} | {r['grad_evals']:,}"
                   f"{budget} | {kept(r)} | {'; '.join(candidates(r.get('notes', [])))} | "
                   f"{'; '.join(road_notes(r.get('notes', [])))} |")  # fmt: skip
    grads = sorted(r["grad_evals"] for r in run["rows"])
    n = len(grads)
    median = grads[n // 2] if n % 2 else (grads[n // 2 - 1] + grads[n // 2]) / 2
    kinds = Counter(kept(r).split(",")[0] for r in run["rows"])
    said = ", ".join(f"{k} {v}" for k, v in kinds.most_common())
    over = sum(g > 50_000 for g in grads)
    out += ["", f"Gradient evaluations: median {median:,.0f}, max {grads[-1]:,}; over 50,000: "
                f"{over} of {n}. Kept: {said}."]  # fmt: skip
    return "\n".join(out)


# ---- the docs' markers ------------------------------------------------------------------------

TABLES = {
    "accuracy": ("docs/accuracy.md", accuracy_table),
    "verdict": ("docs/diagnostics.md", verdict_table),
    "road": ("docs/auto.md", road_table),
}


def rewritten(text: str, name: str, table: str) -> str:
    """The doc's text with table `name` replaced; ValueError when its markers are missing."""
    return doc_markers.rewritten(text, "table", name, SCRIPT, table)


def stale(run: dict, root: Path = ROOT) -> list[str]:
    """The tables whose docs differ from what the run renders."""
    out = []
    for name, (doc, render) in TABLES.items():
        text = (root / doc).read_text()
        if rewritten(text, name, render(run)) != text:
            out.append(f"{doc}: table {name}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=RUN, help="the stored accuracy run")
    ap.add_argument("--check", action="store_true", help="only say which tables are stale")
    args = ap.parse_args(argv)
    run = load(args.json)
    if args.check:
        return doc_markers.report_stale(stale(run), SCRIPT)
    blocks = [(name, doc, render(run)) for name, (doc, render) in TABLES.items()]
    doc_markers.rewrite_all(ROOT, blocks, "table", SCRIPT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
