"""Link prediction with the infinite edge partition model (EPM): gamma SGVB vs Gaussian ADVI.

Knowles (2015), section 4.1 and Figure 3: hold out 20% of the node pairs of a network (edges and
non-edges alike), fit the K-truncated EPM (models/epm/epm.model) to the rest, and score the
held-out pairs by their posterior mean link probability, averaged over posterior draws:
P(y_ij = 1) = E_q[1 - exp(-sum_k r_k phi_ik phi_jk)]; report the test AUC. Methods:

- `gamma`: gamma SGVB with every latent in the gamma family from its default start, AdaDelta with
  momentum = the paper's "gammaSGVB" (`ppl.inference.sgvb.fit_sgvb`);
- `auto`: `fit(model, "auto")`, ppl's default: mean-field ADVI, moment-matched to gamma, then
  (without `--polish`) a stochastic gamma SGVB phase with Adam, or (with `--polish`) ADVI's
  deterministic polish and an L-BFGS refinement of the gamma fit;
- `advi`: mean-field Gaussian ADVI on the log scale = the paper's "NormSGVB" baseline
  (the paper used softplus instead of exp as the positivity map).

For each network (models/epm/data/), each truncation K and each of the splits (seeds 0, 1, ...)
each method is fitted; the table gives the mean and sd of the test AUC over the splits and the
mean seconds per fit.

    python benchmarks/epm.py            # 2 networks x K in {5, 10, 20} x 10 splits x 3 methods
    python benchmarks/epm.py --quick    # 3 splits
    python benchmarks/epm.py --networks les_miserables --K 5 10 --splits 2 --save out.json

Fit options (both methods alike): --iter (default 1000, the paper's budget), --grad-samples
(default 1, as in the paper), --polish (ppl's deterministic L-BFGS polish; off by default: too
slow at these sizes, see docs/epm.md).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

# One BLAS thread per process, set before numpy loads: --jobs workers (forked) and any other job
# on the machine then share the cores instead of oversubscribing them. With OpenBLAS's default
# threads, two workers beside one other busy process slowed a 29 s fit to more than 14 minutes.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402
from scipy.stats import rankdata  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ppl.data.build import build  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

MODEL = ROOT / "models" / "epm" / "epm.model"
DATA = ROOT / "models" / "epm" / "data"
NETWORKS = ("les_miserables", "dicty_publication")
METHODS = ("auto", "gamma", "advi")
LABELS = {"auto": "auto (ADVI->gamma)", "gamma": "gammaSGVB (adadelta)", "advi": "NormSGVB (advi)"}


def load_network(name: str, folder: Path = DATA) -> tuple[int, np.ndarray]:
    """N and the (E, 2) array of 0-based undirected edges i < j."""
    nodes = np.loadtxt(folder / f"{name}_nodes.csv", delimiter=",", skiprows=1, usecols=0)
    edges = np.loadtxt(folder / f"{name}_edges.csv", delimiter=",", skiprows=1, dtype=int)
    edges = np.sort(edges.reshape(-1, 2), axis=1)
    return int(np.size(nodes)), edges


def split_pairs(n: int, edges: np.ndarray, seed: int, test_fraction: float = 0.2):
    """Random split of the n(n-1)/2 pairs i < j; returns (train edges, test pairs, test labels).

    Edges and pairs are 0-based (E, 2) / (H, 2) arrays with i < j; labels are 1 for an edge.
    """
    iu, ju = np.triu_indices(n, k=1)
    adj = np.zeros((n, n), dtype=bool)
    adj[edges[:, 0], edges[:, 1]] = True
    labels = adj[iu, ju]
    rng = np.random.default_rng(seed)
    test = np.zeros(iu.size, dtype=bool)
    test[rng.permutation(iu.size)[: int(round(test_fraction * iu.size))]] = True
    train_edges = np.column_stack([iu[~test & labels], ju[~test & labels]])
    test_pairs = np.column_stack([iu[test], ju[test]])
    return train_edges, test_pairs, labels[test].astype(int)


def epm_data(n: int, k: int, train_edges: np.ndarray, held_out: np.ndarray) -> dict:
    """The data of models/epm/epm.model (1-based node ids)."""
    return {
        "N": int(n),
        "K": int(k),
        "E": int(len(train_edges)),
        "src": (train_edges[:, 0] + 1).tolist(),
        "dst": (train_edges[:, 1] + 1).tolist(),
        "H": int(len(held_out)),
        "hsrc": (held_out[:, 0] + 1).tolist(),
        "hdst": (held_out[:, 1] + 1).tolist(),
    }


def build_epm(data: dict, model_path: Path = MODEL):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "data.json"
        path.write_text(json.dumps(data))
        return build(str(model_path), [str(path)])


def link_probability(phi: np.ndarray, r: np.ndarray, pairs: np.ndarray, chunk: int = 50):
    """Posterior mean of 1 - exp(-sum_k r_k phi_ik phi_jk) for 0-based pairs, over the draws.

    phi: (S, N, K) draws, r: (S, K) draws.
    """
    total = np.zeros(len(pairs))
    for s in range(0, len(phi), chunk):
        p, w = phi[s : s + chunk], r[s : s + chunk]
        rate = np.einsum("spk,spk,sk->sp", p[:, pairs[:, 0]], p[:, pairs[:, 1]], w)
        total += np.sum(-np.expm1(-rate), axis=0)
    return total / len(phi)


def auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney; ties count one half)."""
    labels = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(labels.sum()), int((~labels).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores)
    return float((ranks[labels].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def fit_options(iterations: int = 1000, grad_samples: int = 1, polish: bool = False) -> dict:
    """Options of `ppl.pipeline.fit`, the same for both methods.

    Defaults follow the paper's EPM runs (1000 iterations, one draw per gradient step) with Stan's
    relative-ELBO stopping rule; the deterministic polish is off by default because its 64-256
    fixed draws of up to 8500 latents cost minutes per fit here (docs/epm.md).
    """
    return {
        "iterations": iterations,
        "grad_samples": grad_samples,
        "refine_draws": 64 if polish else 0,
    }


def fit_gamma_sgvb(
    model,
    *,
    seed: int,
    draws: int,
    iterations: int,
    grad_samples: int,
    polish: bool = False,
    optimizer: str = "adadelta",
):
    """The paper's gammaSGVB: every latent gets a gamma family, cold start, no ADVI warm start,
    AdaDelta with momentum (the paper's optimiser; with Adam's fixed step of 0.01 the softplus
    rates cannot grow to the hundreds they need in 1000 steps: AUC 0.47 at K = 5, split 0,
    against 0.80 with AdaDelta).

    (`fit(model, "auto")` first fits and polishes mean-field ADVI and then moment-matches it to the
    gamma family; this calls the same SGVB routine from its default start instead.)
    Returns (draws by name, ELBO, iterations, converged).
    """
    from ppl.inference.sgvb import Block, MixedFamily, fit_sgvb

    rng = np.random.default_rng(seed)
    init = model.random_init(rng)
    blocks = [Block(lat.name, "gamma", lat.offset, lat.size) for lat in model.latents]
    family = MixedFamily(blocks, model.dim)
    vi = fit_sgvb(
        model.log_joint, family, init, seed=int(rng.integers(2**31)), max_iter=iterations,
        grad_samples=grad_samples, polish=polish, optimizer=optimizer,
    )  # fmt: skip
    values = model.constrained_draws(vi.sample(rng, draws), rng)
    return values, float(vi.elbo), int(vi.iterations), bool(vi.converged)


class _FitTimeout(Exception):
    pass


def _raise_timeout(signum, frame):
    raise _FitTimeout


def run_one_guarded(network: str, k: int, split: int, method: str, *, timeout: int, **kwargs):
    """run_one, but a fit that fails (ppl's FitError) or exceeds `timeout` seconds becomes a row
    with AUC NaN and the reason, so that one bad fit neither stops nor stalls the experiment."""
    from ppl.errors import PplError

    base = {"network": network, "K": k, "split": split, "method": method}
    base["options"] = dict(kwargs.get("options") or fit_options())
    previous = signal.signal(signal.SIGALRM, _raise_timeout)
    signal.alarm(timeout)
    start = time.perf_counter()
    try:
        return run_one(network, k, split, method, **kwargs)
    except _FitTimeout:
        error = f"no result within the {timeout} s limit"
    except PplError as exc:
        error = f"{type(exc).__name__}: {exc}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    nan = float("nan")
    seconds = time.perf_counter() - start
    return {**base, "auc": nan, "seconds": seconds, "elbo": nan, "iterations": 0,
            "converged": False, "error": error}  # fmt: skip


def run_one(network: str, k: int, split: int, method: str, *, draws: int = 200, options=None):
    n, edges = load_network(network)
    train, test, labels = split_pairs(n, edges, seed=split)
    model = build_epm(epm_data(n, k, train, test))
    options = dict(options or fit_options())
    start = time.perf_counter()
    if method == "gamma":
        values, elbo, iterations, converged = fit_gamma_sgvb(
            model, seed=split, draws=draws, iterations=options["iterations"],
            grad_samples=options["grad_samples"], polish=options["refine_draws"] > 0,
        )  # fmt: skip
    else:
        result = fit(model, method, seed=split, draws=draws, **options)
        values, elbo = result.draws, float(result.vi.elbo)
        iterations, converged = int(result.vi.iterations), bool(result.vi.converged)
    seconds = time.perf_counter() - start
    prob = link_probability(values["phi"], values["r"], test)
    return {
        "network": network,
        "K": k,
        "split": split,
        "method": method,
        "auc": auc(prob, labels),
        "seconds": seconds,
        "elbo": elbo,
        "iterations": iterations,
        "converged": converged,
        "n_train_edges": int(len(train)),
        "n_test_pairs": int(len(test)),
        "n_test_edges": int(labels.sum()),
        "options": options,
    }


def _key(row: dict) -> tuple:
    """What identifies a fit: the data, the split, the method and the fit options."""
    options = tuple(sorted(row.get("options", {}).items()))
    return (row["network"], row["K"], row["split"], row["method"], options)


def table(rows: list[dict]) -> str:
    out = [
        f"{'network':<18} {'K':>3} {'method':<26} {'splits':>6} {'failed':>6} {'test AUC':>17} "
        f"{'s/fit':>8}",
        "-" * 90,
    ]

    def group(row):
        polished = row.get("options", {}).get("refine_draws", 0) > 0
        return row["network"], row["K"], row["method"], polished

    keys = []
    for row in rows:
        if group(row) not in keys:
            keys.append(group(row))
    for key in keys:
        net, k, method, polished = key
        sel = [r for r in rows if group(r) == key]
        failed = sum("error" in r for r in sel)
        a = np.array([r["auc"] for r in sel if "error" not in r])
        sd = float(np.std(a, ddof=1)) if len(a) > 1 else float("nan")
        secs = float(np.mean([r["seconds"] for r in sel]))
        label = LABELS.get(method, method) + (" +polish" if polished else "")
        out.append(
            f"{net:<18} {k:>3} {label:<26} {len(a):>6} {failed:>6} "
            f"{np.mean(a) if len(a) else float('nan'):>8.4f} ± {sd:<6.4f} {secs:>8.1f}"
        )
    return "\n".join(out) + "\n\n" + paired(rows)


def paired(rows: list[dict]) -> str:
    """Per-split AUC differences (same held-out pairs), the comparison the splits allow."""
    auc = {
        (r["network"], r["K"], r["split"], r["method"]): r["auc"]
        for r in rows
        if "error" not in r and r.get("options", {}).get("refine_draws", 0) == 0
    }
    pairs = [("gamma", "advi"), ("auto", "advi"), ("auto", "gamma")]
    out = [
        f"{'network':<18} {'K':>3} {'paired by split':<26} {'splits':>6} {'mean diff':>10} "
        f"{'higher in':>10}",
        "-" * 78,
    ]
    for net, k in sorted({(key[0], key[1]) for key in auc}):
        for a, b in pairs:
            splits = sorted(
                key[2]
                for key in auc
                if key[:2] == (net, k) and key[3] == a and (net, k, key[2], b) in auc
            )
            if not splits:
                continue
            d = np.array([auc[(net, k, s, a)] - auc[(net, k, s, b)] for s in splits])
            out.append(
                f"{net:<18} {k:>3} {a + ' - ' + b:<26} {len(d):>6} {d.mean():>+10.4f} "
                f"{f'{int(np.sum(d > 0))}/{len(d)}':>10}"
            )
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS), choices=NETWORKS)
    ap.add_argument("--K", nargs="+", type=int, default=[5, 10, 20])
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--splits", type=int, default=10, help="number of random 80/20 splits")
    ap.add_argument("--quick", action="store_true", help="3 splits instead of 10")
    ap.add_argument("--draws", type=int, default=200, help="posterior draws for the AUC")
    ap.add_argument("--iter", type=int, default=1000, help="maximum iterations per fit")
    ap.add_argument("--grad-samples", type=int, default=1, help="draws per gradient step")
    ap.add_argument(
        "--polish", action="store_true", help="run ppl's deterministic L-BFGS polish (slow here)"
    )
    ap.add_argument(
        "--save",
        help="write every fit's result to this JSON file as it finishes; an existing file is "
        "resumed (fits already in it with the same options are not run again)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="fits run in parallel processes")
    ap.add_argument(
        "--timeout", type=int, default=900, help="seconds after which a fit counts as failed"
    )
    ap.add_argument("--table", help="only print the table of a JSON file written by --save")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    splits = 3 if args.quick else args.splits
    options = fit_options(args.iter, args.grad_samples, args.polish)
    print(
        f"EPM link prediction: networks {', '.join(args.networks)}; K {args.K}; "
        f"{splits} splits (seeds 0..{splits - 1}); 20% of pairs held out; "
        f"methods {', '.join(args.methods)}; {args.draws} draws; fit options {options}",
        flush=True,
    )
    save = Path(args.save) if args.save else None
    rows = json.loads(save.read_text()) if save and save.exists() else []
    done = {_key(r) for r in rows}
    todo = [
        (net, k, split, method)
        for net in args.networks
        for k in args.K
        for split in range(splits)
        for method in args.methods
        if _key({"network": net, "K": k, "split": split, "method": method, "options": options})
        not in done
    ]
    if rows:
        print(f"resuming: {len(rows)} fits already in {save}, {len(todo)} to run", flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [
            pool.submit(
                run_one_guarded,
                net,
                k,
                split,
                method,
                timeout=args.timeout,
                draws=args.draws,
                options=options,
            )  # fmt: skip
            for net, k, split, method in todo
        ]
        for future in as_completed(futures):
            row = future.result()
            rows.append(row)
            print(
                f"  {row['network']} K={row['K']} split={row['split']} {row['method']}: "
                f"AUC {row['auc']:.4f}, {row['seconds']:.1f} s, {row['iterations']} it, "
                f"ELBO {row['elbo']:.1f}, converged {row['converged']}"
                + (f" -- FAILED: {row['error']}" if "error" in row else ""),
                flush=True,
            )
            if save:
                tmp = save.with_suffix(".tmp")
                tmp.write_text(json.dumps(rows, indent=1))
                tmp.replace(save)
    print()
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
