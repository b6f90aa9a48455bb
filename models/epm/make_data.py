"""Write the Stan-JSON data of models/epm/epm.model for one random 80/20 split of a network's pairs.

    python models/epm/make_data.py les_miserables --K 10 --seed 0 --out /tmp/les_k10.json

The split is the one benchmarks/epm.py uses for the same seed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _benchmark():
    spec = importlib.util.spec_from_file_location("epm_benchmark", ROOT / "benchmarks" / "epm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None) -> int:
    epm = _benchmark()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("network", choices=epm.NETWORKS)
    ap.add_argument("--K", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    n, edges = epm.load_network(args.network)
    train, test, labels = epm.split_pairs(n, edges, seed=args.seed)
    Path(args.out).write_text(json.dumps(epm.epm_data(n, args.K, train, test)))
    print(
        f"wrote {args.out}: N = {n}, K = {args.K}, {len(train)} training edges, "
        f"{len(test)} held-out pairs ({int(labels.sum())} edges)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
