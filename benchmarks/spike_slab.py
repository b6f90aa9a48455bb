"""Spike-and-slab regression on Boston housing: fitted inclusion probabilities vs exact enumeration.

models/spike_slab/spike_slab.model has 13 binary inclusion indicators, so its posterior can be
computed exactly (2^13 = 8,192 subsets; models/spike_slab/exact_inclusion.py, which writes
exact_inclusion.json: slab weights and intercept integrated out in closed form, pi analytically,
sigma by converged Gauss-Legendre quadrature). This prints, per predictor, the exact inclusion
probability, each fit's, and |p_fit - p_exact|; then each fit's ELBO beside the exact log
evidence and its time. A fit's inclusion probability is q(z = 1) when its q has one (mean-field
Bernoulli), else the mean of its draws of z.

    python benchmarks/spike_slab.py [--methods auto bbvi svi] [--seeds 1] [--json FILE]
    python benchmarks/spike_slab.py --methods svi --option local=gibbs   # options by Python name
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import ppl  # noqa: E402
from ppl.methods import METHODS  # noqa: E402

MODEL = ROOT / "models" / "spike_slab" / "spike_slab.model"
DATA = ROOT / "models" / "spike_slab" / "boston13.csv"
EXACT = ROOT / "models" / "spike_slab" / "exact_inclusion.json"


def parse_options(pairs: list[str]) -> dict:
    """key=value pairs as keyword options (numbers converted)."""
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        for kind in (int, float):
            try:
                out[key] = kind(value)
                break
            except ValueError:
                continue
        else:
            out[key] = value
    return out


def inclusion(fit: ppl.api.Fit, K: int) -> np.ndarray:
    """q(z = 1) when the fitted q is a Bernoulli over z, else the draws' mean of z."""
    vi = fit.result.vi
    try:
        return np.asarray(vi.family.describe(vi.theta)["z"]["p"], dtype=float).reshape(K)
    except (AttributeError, KeyError, TypeError):
        return np.asarray(fit.draws("z"), dtype=float).reshape(-1, K).mean(axis=0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--methods", nargs="+", default=["auto", "bbvi", "svi"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[1])
    ap.add_argument("--draws", type=int, default=2000, help="draws (z's mean when q has no p)")
    ap.add_argument("--option", nargs="*", default=[], help="key=value fit options")
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()

    exact_file = json.loads(EXACT.read_text())
    names = exact_file["predictors"]
    exact = np.array([exact_file["inclusion"][n] for n in names])
    log_evidence = exact_file["log_evidence"]
    print(f"exact posterior ({exact_file['subsets']} subsets, {EXACT.name}): log evidence "
          f"{log_evidence:.3f}")  # fmt: skip
    model = ppl.Model.from_file(str(MODEL))
    options = parse_options(args.option)
    runs = []
    for method in args.methods:
        if method not in METHODS:
            print(f"  {method}: not a method of this ppl ({', '.join(METHODS)}); skipped")
            continue
        for seed in args.seeds:
            start = time.perf_counter()
            fit = model.fit(str(DATA), method=method, seed=seed, draws=args.draws, quiet=True,
                            **(options if method == "svi" else {}))  # fmt: skip
            seconds = time.perf_counter() - start
            p = inclusion(fit, len(names))
            elbo = float(fit.result.vi.elbo) if fit.result.vi.elbo is not None else float("nan")
            runs.append({"label": f"{method} s{seed}", "method": method, "seed": seed,
                         "p": p.tolist(), "elbo": elbo, "seconds": seconds,
                         "road": fit.result.method})  # fmt: skip
            print(f"  {method} seed {seed} ({fit.result.method}): ELBO {elbo:.3f}, {seconds:.1f} s")
    print()
    head = f"{'predictor':<10}{'exact':>8}" + "".join(f"{r['label']:>16}" for r in runs)
    print(head + "\n" + "-" * len(head))
    for k, name in enumerate(names):
        cells = "".join(f"{r['p'][k]:>8.3f} ({abs(r['p'][k] - exact[k]):.3f})" for r in runs)
        print(f"{name:<10}{exact[k]:>8.3f}{cells}")
    print("-" * len(head))
    for r in runs:
        r["abs_error"] = np.abs(np.array(r["p"]) - exact).tolist()
    print(f"{'max |err|':<18}" + "".join(f"{max(r['abs_error']):>16.3f}" for r in runs))
    print(f"{'ELBO':<18}" + "".join(f"{r['elbo']:>16.2f}" for r in runs))
    print(f"{'log p(y) - ELBO':<18}" + "".join(f"{log_evidence - r['elbo']:>16.2f}" for r in runs))
    print(f"{'seconds':<18}" + "".join(f"{r['seconds']:>16.1f}" for r in runs))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"exact": dict(zip(names, exact.tolist(), strict=True)), "log_evidence": log_evidence,
             "options": options, "runs": runs}, indent=2) + "\n")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
