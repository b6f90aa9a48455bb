"""The EPM's link prediction by the default road (`ppl fit`'s `--method auto`), against the
paper's gammaSGVB: test AUC, gradient evaluations and CPU seconds per fit (docs/epm.md).

    python benchmarks/epm_road.py                      # split 0, K = 10: the README's example
    python benchmarks/epm_road.py --splits 0 1 2 --methods road gamma

`road` is `fit(model, "auto", iterations=1000)` with every default (the deterministic road:
mode search, fixed-draw solves, escalation), as `ppl fit ... --method auto --iter 1000`;
`gamma` is benchmarks/epm.py's gammaSGVB (1000 AdaDelta steps of one draw, Knowles 2015).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

sys.path.insert(0, str(Path(__file__).resolve().parent))
import epm  # noqa: E402 - benchmarks/epm.py, next to this script

from ppl.pipeline import fit  # noqa: E402


def run(split: int, k: int, method: str, seed: int, draws: int) -> dict:
    n, edges = epm.load_network("les_miserables")
    train, test, labels = epm.split_pairs(n, edges, seed=split)
    model = epm.build_epm(epm.epm_data(n, k, train, test))
    cpu = time.process_time()
    if method == "gamma":
        values, elbo, grads, _ = epm.fit_gamma_sgvb(model, seed=split, draws=draws,
                                                    iterations=1000, grad_samples=1)  # fmt: skip
    else:
        result = fit(model, "auto", seed=seed, draws=draws, iterations=1000)
        values, elbo, grads = result.draws, float(result.vi.elbo), int(result.vi.grad_evals)
    cpu = time.process_time() - cpu
    prob = epm.link_probability(values["phi"], values["r"], test)
    return {"auc": epm.auc(prob, labels), "elbo": elbo, "grads": grads, "cpu": cpu}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--splits", nargs="+", type=int, default=[0])
    ap.add_argument("--K", type=int, default=10)
    ap.add_argument("--methods", nargs="+", default=["road"], choices=["road", "gamma"])
    ap.add_argument("--seed", type=int, default=1, help="the road's --seed (ppl fit's default)")
    ap.add_argument("--draws", type=int, default=200, help="posterior draws for the AUC")
    args = ap.parse_args(argv)
    print(f"{'split':>5} {'K':>3} {'method':<6} {'AUC':>7} {'ELBO':>10} {'gradients':>9} "
          f"{'CPU s':>7}")  # fmt: skip
    for split in args.splits:
        for method in args.methods:
            r = run(split, args.K, method, args.seed, args.draws)
            print(f"{split:>5} {args.K:>3} {method:<6} {r['auc']:>7.4f} {r['elbo']:>10.1f} "
                  f"{r['grads']:>9} {r['cpu']:>7.1f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
