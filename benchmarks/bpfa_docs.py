"""docs/bpfa.md's tables and plots, made from the stored runs (benchmarks/results/bpfa_*.json,
spike_slab_inclusion.json): no number in those tables is typed by hand.

A table sits between `<!-- table NAME: made by benchmarks/bpfa_docs.py -->` and
`<!-- end table NAME -->`; tests/models/test_bpfa_docs.py checks that the page matches the runs.
The PSNR-against-time plots (docs/bpfa/*_psnr.png) need matplotlib.

    python benchmarks/bpfa_docs.py           # rewrite the tables and the plots
    python benchmarks/bpfa_docs.py --check   # exit 1 if a table is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import doc_markers  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "bpfa.md"
SCRIPT = "benchmarks/bpfa_docs.py"
PLOTS = ROOT / "docs" / "bpfa"
NAMES = {"gibbs-ssvi": "Gibbs-SSVI (numpy reference)", "mf-svi": "MF-SVI (numpy reference)",
         "mf-ssvi": "MF-SSVI (numpy reference)", "gibbs": "Gibbs sampler (numpy reference)",
         "ppl-gibbs": "ppl `--method svi --local gibbs`",
         "ppl-meanfield": "ppl `--method svi --local meanfield`",
         "inpaint_biharmonic": "scikit-image `inpaint_biharmonic`",
         "local 5x5 mean": "local 5 x 5 mean of observed pixels",
         "oracle-gibbs": "Gibbs local step at the true globals",
         "oracle-mf": "mean-field local step at the true globals"}  # fmt: skip
IMAGE_RUNS = [
    "camera512_inpaint",
    "camera256_inpaint",
    "camera256_denoise",
    "brick256_inpaint",
    "camera64_ppl",
    "camera128_ppl",
    "camera256_ppl",
]
SYNTHETIC_RUNS = ["synthetic_n10000", "synthetic_small_ppl", "synthetic_paper", "synthetic_dense"]
SCORE_RUNS = ["synthetic_seeds", "synthetic_phivar"]  # with the other readings of "MSE"
CURVE_RUNS = ["synthetic_sampler", "synthetic_dense_sampler"]
# the paper's sec. 5.1 "predictive mean squared errors" (mean +- sd over its 100 experiments)
PAPER_MSE = {"gibbs-ssvi": "0.022 +- 0.002", "mf-ssvi": "0.027 +- 0.004", "gibbs": "0.020 +- 0.002"}


def load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def image_table(run: dict) -> str:
    a = run["args"]
    head = (f"{a['image']} {a['size']} x {a['size']}, task {a['task']}: N = {run['N']:,} "
            f"patches, {run['observed']:.1%} of pixels observed, K = {a['K']}, B = {a['batch']}, "
            f"training budget {a['time_budget']:g} s per method, seed {a['seed']}")  # fmt: skip
    if a["time_budget"] >= 1e5:  # an iteration cap, not a time budget
        cap = f"{a['max_iter']} iterations"
        head = head.replace(f"training budget {a['time_budget']:g} s", cap)
    if a.get("a", 1.0) != 1.0 or a.get("b", 1.0) != 1.0:
        head += f", a = {a['a']:g}, b = {a['b']:g}"
    if a.get("init_rows"):
        head += (f"; globals started by {a['init_sweeps']} Gibbs sweeps on {a['init_rows']:,} "
                 "random patches (timed as training)")  # fmt: skip
    rows = ["| method | PSNR (dB) | PSNR hidden pixels | iterations | training s | s / iteration |",
            "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, r in run["results"].items():
        f = r["final"]
        if r["curve"]:
            last = r["curve"][-1]
            extra = (f"{last['iteration']} | {last['seconds']:.0f} | "
                     f"{r['seconds_per_iteration']:.3f}")  # fmt: skip
        else:
            extra = " | | "
        rows.append(f"| {NAMES.get(name, name)} | {f['psnr']:.2f} | {f['psnr_hidden']:.2f} | "
                    f"{extra} |")  # fmt: skip
    return head + "\n\n" + "\n".join(rows) + "\n"


def synthetic_table(run: dict) -> str:
    a = run["args"]
    head = (f"N = {a['N']:,}, D = {a['D']}, {a['K_true']} true atoms, K = {a['K']} fitted, "
            f"a = b = {a['ab']:g}, B = {a['batch']}, budget {a['time_budget']:g} s per method, "
            f"seeds {', '.join(map(str, a['seeds']))}")  # fmt: skip
    if "cpu_clock" in a:  # bpfa_synthetic.py's later options: say the set-up they chose
        head += (f"; {'standardised' if a['standardise'] else 'raw scale'}, d0 = {a['d0']:g}, "
                 f"rho_t = (t + {a['tau0']:g})^-{a['kappa']:g}, seconds of "
                 f"{'CPU' if a['cpu_clock'] else 'wall'}")  # fmt: skip
        head += f" (Gibbs sampler: {a['gibbs_budget']:g} s)" if a.get("gibbs_budget") else ""
    at = list(next(iter(run["summary"].values())).get("at", {}))
    rows = ["| method | held-out MSE | s / iteration | iterations | training s |"
            + "".join(f" MSE at {t} s |" for t in at), "|---|---:|---:|---:|---:|"
            + "---:|" * len(at)]  # fmt: skip
    for name, s in run["summary"].items():
        mine = [r for r in run["runs"] if r["method"] == name]
        its = sum(r["iterations"] for r in mine) / len(mine)
        secs = sum(r["seconds"] for r in mine) / len(mine)
        sd = f" +- {s['mse_sd']:.4f}" if s["runs"] > 1 else ""
        rows.append(f"| {NAMES.get(name, name)} | {s['mse_mean']:.4f}{sd} | "
                    f"{s['seconds_per_iteration']:.3f} | {its:.0f} | {secs:.0f} |"
                    + "".join(f" {v:.4f} |" if v == v else " - |"  # nan: no checkpoint yet
                              for v in (s["at"][t] for t in at)))  # fmt: skip
    return head + "\n\n" + "\n".join(rows) + "\n"


def synthetic_head(a: dict) -> str:
    head = (f"N = {a['N']:,}, D = {a['D']}, {a['K_true']} true atoms, K = {a['K']} fitted, "
            f"a = b = {a['ab']:g}, B = {a['batch']}, "
            f"{'standardised' if a['standardise'] else 'raw scale'}, d0 = {a['d0']:g}, "
            f"rho_t = (t + {a['tau0']:g})^-{a['kappa']:g}")  # fmt: skip
    if a.get("gen_a"):
        head += f"; the data's a = {a['gen_a']:g} (the fit's a = b = {a['ab']:g})"
    if a.get("gen_phi_var"):
        head += f"; the data's Phi entries of variance {a['gen_phi_var']:g} (not 1 / D)"
    return head


def synthetic_scores_table(run: dict) -> str:
    """Per method: seeds, the three readings of "predictive MSE" (mean +- sd over seeds), the
    paper's number; then the paired Gibbs-SSVI - MF-SSVI differences."""
    a, summary = run["args"], run["summary"]
    rows_mse = [r["mse_rows"] for r in run["runs"] if "mse_rows" in r]
    head = synthetic_head(a) + f"; CPU seconds of training: SVI {a['time_budget']:g} s per seed"
    if "gibbs" in summary:
        sweeps = sorted({r["iterations"] for r in run["runs"] if r["method"] == "gibbs"})
        head += f", Gibbs sampler {', '.join(map(str, sweeps))} sweeps"
    if rows_mse:
        head += (f"; held-out whole rows (every method predicts the column means): "
                 f"{sum(rows_mse) / len(rows_mse):.4f}")  # fmt: skip
    rows = ["| method | seeds | MSE of the predictive mean | MSE of predictive draws | MSE, "
            "standardised scale | the paper | s / iteration | iterations |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for name, s in summary.items():
        if name == "paired":
            continue
        mine = [r for r in run["runs"] if r["method"] == name]

        def cell(score, mine=mine):
            v = [r[score] for r in mine if score in r]
            if not v:
                return ""
            m = sum(v) / len(v)
            sd = (sum((x - m) ** 2 for x in v) / len(v)) ** 0.5
            return f"{m:.4f}" + (f" +- {sd:.4f}" if len(v) > 1 else "")

        its = sum(r["iterations"] for r in mine) / len(mine)
        rows.append(f"| {NAMES.get(name, name)} | {len(mine)} | {cell('mse')} | "
                    f"{cell('mse_draw')} | {cell('mse_std')} | {PAPER_MSE.get(name, '')} | "
                    f"{s['seconds_per_iteration']:.3f} | {its:.0f} |")  # fmt: skip
    text = head + "\n\n" + "\n".join(rows) + "\n"
    by = {(r["seed"], r["method"]): r for r in run["runs"]}
    common = sorted(s for s, m in by if m == "gibbs" and (s, "gibbs-ssvi") in by)
    if common:

        def ratio(s, k):
            return by[s, "gibbs-ssvi"][k] / by[s, "gibbs"][k]

        cells = [f"seed {s}: {ratio(s, 'mse'):.3f} ({ratio(s, 'mse_draw'):.3f})" for s in common]
        text += (
            (
                "\nGibbs-SSVI's MSE over the Gibbs sampler's on the same data (the sampler's "
                "seeds), predictive mean (predictive draws): "
            )
            + "; ".join(cells)
            + "\n"
        )
    pair = summary.get("paired")
    if pair:
        label = {"mse": "predictive mean", "mse_draw": "predictive draws",
                 "mse_std": "standardised scale"}  # fmt: skip
        text += (
            "\nGibbs-SSVI - MF-SSVI, paired over seeds (mean +- standard error; seeds where "
            "Gibbs-SSVI is the lower):\n\n| score | difference | lower |\n|---|---:|---:|\n"
        )
        for k, v in pair.items():
            text += (f"| {label[k]} | {v['mean']:+.5f} +- {v['se']:.5f} | {v['lower']} of "
                     f"{v['n']} |\n")  # fmt: skip
    return text


def sampler_curve_table(run: dict) -> str:
    """The Gibbs sampler's held-out scores against sweeps (its running mean after burn-in)."""
    a = run["args"]
    head = synthetic_head(a) + (f"; burn-in {a['gibbs_burnin']} sweeps, then the running mean; "
                                f"seeds {', '.join(map(str, a['seeds']))}")  # fmt: skip
    rows = ["| seed | sweep | CPU s | MSE of the predictive mean | MSE of a predictive draw | "
            "MSE, standardised scale |", "|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in run["runs"]:
        curve = r["curve"]
        step = 10 if curve[-1]["iteration"] <= 100 else 50
        keep = {c["iteration"] for c in curve if c["iteration"] in (10, 20, 30)
                or c["iteration"] % step == 0} | {curve[-1]["iteration"]}  # fmt: skip
        for c in curve:
            if c["iteration"] in keep:
                scores = " | ".join(f"{c[k]:.4f}" for k in ("mse", "mse_draw", "mse_std"))
                rows.append(f"| {r['seed']} | {c['iteration']} | {c['seconds']:.0f} | {scores} |")
    return head + "\n\n" + "\n".join(rows) + "\n"


def spike_slab_table(run: dict) -> str:
    names = list(run["exact"])
    labels = [
        f"{r['method']}"
        + (f" (road: {r['road']})" if r["road"] != r["method"] else "")
        + f", seed {r['seed']}"
        for r in run["runs"]
    ]
    rows = ["| predictor | exact | " + " | ".join(labels) + " |",
            "|---|---:|" + "---:|" * len(labels)]  # fmt: skip
    for k, name in enumerate(names):
        cells = " | ".join(f"{r['p'][k]:.3f} ({r['abs_error'][k]:.3f})" for r in run["runs"])
        rows.append(f"| {name} | {run['exact'][name]:.3f} | {cells} |")
    rows.append("| max abs error | | " + " | ".join(
        f"**{max(r['abs_error']):.3f}**" for r in run["runs"]) + " |")  # fmt: skip
    rows.append("| seconds | | " + " | ".join(f"{r['seconds']:.0f}" for r in run["runs"]) + " |")
    return "\n".join(rows) + "\n"


def tables() -> dict[str, str]:
    """Every table the stored runs give, by NAME."""
    out = {}
    for name in IMAGE_RUNS:
        run = load(f"bpfa_{name}")
        if run is not None:
            out[name] = image_table(run)
    for name in SYNTHETIC_RUNS:
        run = load(f"bpfa_{name}")
        if run is not None:
            out[name] = synthetic_table(run)
    for names, table in ((SCORE_RUNS, synthetic_scores_table), (CURVE_RUNS, sampler_curve_table)):
        for name in names:
            run = load(f"bpfa_{name}")
            if run is not None:
                out[name] = table(run)
    run = load("spike_slab_inclusion")
    if run is not None:
        out["spike_slab"] = spike_slab_table(run)
    return out


def render(text: str) -> str:
    for name, table in tables().items():
        text = doc_markers.rewritten(text, "table", name, SCRIPT, table)
    return text


def stale(doc: Path = DOC) -> list[str]:
    """The tables of `doc` that differ from the stored runs (or are missing from it)."""
    text = doc.read_text()
    out = []
    for name, table in tables().items():
        m = doc_markers.marked("table", name, SCRIPT).search(text)
        if m is None or m.group(2) != table:
            out.append(name)
    return out


def plot(name: str, run: dict) -> Path:
    """PSNR against training time, one line per method, baselines as horizontal lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for method, r in run["results"].items():
        if r["curve"]:
            ax.plot([c["seconds"] for c in r["curve"]], [c["psnr"] for c in r["curve"]],
                    marker="o", ms=3, label=NAMES.get(method, method))  # fmt: skip
        else:
            ax.axhline(r["final"]["psnr"], ls="--", lw=1, color="grey" if "mean" in method
                       else "black", label=NAMES.get(method, method))  # fmt: skip
    a = run["args"]
    ax.set_title(f"BPFA {a['task']}: {a['image']} {a['size']} x {a['size']}, K = {a['K']}")
    ax.set_xlabel("training time (s; predictions not counted)")
    ax.set_ylabel("PSNR (dB)")
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path = PLOTS / f"{name}_psnr.png"
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale()
        print("stale: " + ", ".join(bad) if bad else "up to date")
        return 1 if bad else 0
    DOC.write_text(render(DOC.read_text()))
    PLOTS.mkdir(exist_ok=True)
    for name in IMAGE_RUNS:
        run = load(f"bpfa_{name}")
        if run is not None:
            print(f"wrote {plot(name, run).relative_to(ROOT)}")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
