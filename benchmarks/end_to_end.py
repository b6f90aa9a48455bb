"""End-to-end `ppl fit` (process start to summary) beside NumPyro and PyMC, each in a fresh process.

    python benchmarks/end_to_end.py [--problems eight_schools breast_cancer linreg20k]
        [--tools ppl numpyro-svi numpyro-nuts pymc-advi] [--repeat 1] [--python PEER_PYTHON]
        [--iter 10000] [--seed 1] [--json OUT] [--workdir DIR] [--cold-pytensor]

The acceptance of the end-to-end issue: on a quiet machine, `ppl fit` from process start to the
printed summary takes <= 1 s on eight schools, <= 2 s on the breast-cancer logistic regression,
and <= 2 s and <= 300 MB peak RSS on a 20,000-row, 6-parameter linear regression. Problems:

- eight_schools: models/eight_schools/noncentered.model, eight_schools.json (10 parameters).
- breast_cancer: models/logistic_regression/breast_cancer/breast_cancer.model on
  breast_cancer.csv (569 rows, 30 standardised features + intercept = 31 parameters).
- linreg20k: models/linear_regression/vectorised.model on 20,000 simulated rows with 4
  predictors (intercept, 4 coefficients, sigma = 6 parameters), written by
  models/linear_regression/simulate.py (seeded) into --workdir before any timing.

Tools, each run as a subprocess whose wall time (start to exit) and peak resident memory
(ru_maxrss from os.wait4, the process and any child it waited for) are measured from outside,
so imports, compilation and start-up count:

- ppl: `python -m ppl.cli fit MODEL DATA --seed S --iter N` with --ppl-python (default: this
  interpreter, with this checkout first on PYTHONPATH); its gradient evaluations and its own fit
  seconds are read from its `method:` line.
- numpyro-svi, numpyro-nuts, pymc-advi: benchmarks/end_to_end_peer.py with --python (the
  interpreter that has PyMC / NumPyro, e.g. a virtualenv with `pip install '.[bench]'`): import,
  build the benchmarks/peer_problems statement of the model, fit, print a summary. SVI and ADVI
  run --iter steps (10000, as benchmarks/peers.py; NumPyro: AutoNormal, Adam(0.01), double
  precision; PyMC: pm.fit defaults); NUTS is one chain, 1000 warmup + 1000 draws, for
  reference. A peer that --python cannot import is skipped with a note.

Every child gets this process's environment (thread settings included); --threads 1 sets
OPENBLAS/OMP/MKL_NUM_THREADS=1 for all of them. PyTensor keeps compiled C code in its cache
directory between processes, so PyMC's first run on a machine pays C compilation that later runs
do not; --cold-pytensor gives every PyMC run an empty cache (a first run). With --repeat N each
(problem, tool) runs N times and the table shows the medians; --json OUT keeps every run.

Columns: wall s (median), CPU s (median of user + system time: on a busy machine the
single-threaded run's CPU time stays near its quiet-machine wall time; run with --threads 1),
peak RSS MB (median of ru_maxrss), gradient evaluations (ppl's count;
the peers' are in the JSON and the notes: SVI/ADVI one per step, NUTS its leapfrog steps),
notes (ppl: its target and whether it is met; everyone: time relative to ppl's, and where the
time went as the process itself measured it, medians over the runs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEER_SCRIPT = ROOT / "benchmarks" / "end_to_end_peer.py"
TOOLS = ("ppl", "numpyro-svi", "numpyro-nuts", "pymc-advi")
PEER_IMPORTS = {"numpyro": "import numpyro, jax", "pymc": "import pymc, arviz"}
LINREG_ROWS = 20000


@dataclass(frozen=True)
class Spec:
    name: str
    model: Path
    data: tuple[Path, ...]  # empty: made on demand (linreg20k)
    params: int
    target_s: float
    target_mb: float | None = None


PROBLEMS = {
    "eight_schools": Spec(
        "eight_schools",
        ROOT / "models" / "eight_schools" / "noncentered.model",
        (ROOT / "models" / "eight_schools" / "eight_schools.json",),
        10,
        1.0,
    ),
    "breast_cancer": Spec(
        "breast_cancer",
        ROOT / "models" / "logistic_regression" / "breast_cancer" / "breast_cancer.model",
        (ROOT / "models" / "logistic_regression" / "breast_cancer" / "breast_cancer.csv",),
        31,
        2.0,
    ),
    "linreg20k": Spec(
        "linreg20k", ROOT / "models" / "linear_regression" / "vectorised.model", (), 6, 2.0, 300.0
    ),
}


@dataclass
class Run:
    wall_s: float
    rss_mb: float
    exit_code: int
    cpu_s: float | None = None  # user + system seconds of the process and its waited-for children
    grad_evals: int | None = None
    inner: dict = field(default_factory=dict)  # what the process said about itself
    error: str | None = None


@dataclass
class Row:
    problem: str
    tool: str
    runs: list[Run] = field(default_factory=list)
    skipped: str | None = None

    @property
    def ok(self) -> list[Run]:
        return [r for r in self.runs if r.error is None]

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.ok]
        return statistics.median(values) if values else None

    def inner(self, key: str):
        """The median over the runs of a number the process reported about itself."""
        values = [r.inner[key] for r in self.ok if isinstance(r.inner.get(key), (int, float))]
        return statistics.median(values) if values else None


# ---------------------------------------------------------------- running one process


def measure(
    argv: list[str], env: dict, timeout: float
) -> tuple[float, float, float, int, str, str]:
    """Run argv; (wall seconds, CPU seconds, peak RSS MB, exit code, stdout, stderr). CPU
    seconds (user + system) and the peak RSS (ru_maxrss, kilobytes on Linux) are the child's,
    from os.wait4. On a busy machine the CPU time of a single-threaded run stays near the wall
    time it would take on a quiet one, where the wall time itself does not."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=ROOT)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode("utf-8", "replace")
        stderr = err.read().decode("utf-8", "replace")
    cpu = usage.ru_utime + usage.ru_stime
    return wall, cpu, usage.ru_maxrss / 1024.0, proc.returncode, stdout, stderr


def _failure(code: int, stderr: str, timeout: float) -> str:
    if code == -9:
        return f"killed after the --timeout of {timeout:g} s"
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    return f"exit {code}: {lines[-1][:160] if lines else 'no message'}"


_PPL_METHOD = re.compile(r"^method: (.*), (\d+) iterations, (\d+) gradient evaluations, ([\d.]+) s",
                         re.M)  # fmt: skip
_PPL_KHAT = re.compile(r"^PSIS k-hat: (\S+)", re.M)


def run_ppl(spec: Spec, data: list[Path], args, env: dict) -> Run:
    argv = [args.ppl_python, "-m", "ppl.cli", "fit", str(spec.model), *map(str, data),
            "--seed", str(args.seed), "--iter", str(args.iter)]  # fmt: skip
    wall, cpu, rss, code, stdout, stderr = measure(argv, env, args.timeout)
    run = Run(wall, rss, code, cpu)
    m = _PPL_METHOD.search(stdout)
    if code != 0 or m is None:
        run.error = _failure(code, stderr, args.timeout) if code else "no `method:` line"
        return run
    run.grad_evals = int(m.group(3))
    run.inner = {"method": m.group(1), "iterations": int(m.group(2)), "fit_s": float(m.group(4))}
    k = _PPL_KHAT.search(stdout)
    if k:
        run.inner["khat"] = k.group(1)
    return run


def run_peer(spec: Spec, tool: str, data: list[Path], args, env: dict) -> Run:
    argv = [args.python, str(PEER_SCRIPT), tool, spec.name, "--iter", str(args.iter),
            "--seed", str(args.seed)]  # fmt: skip
    if not spec.data:
        argv += ["--data", str(data[0])]
    if tool == "pymc-advi" and args.cold_pytensor:
        cache = tempfile.mkdtemp(prefix="pytensor-")
        env = {**env, "PYTENSOR_FLAGS": f"compiledir={cache}"}
    wall, cpu, rss, code, stdout, stderr = measure(argv, env, args.timeout)
    if tool == "pymc-advi" and args.cold_pytensor:
        shutil.rmtree(cache, ignore_errors=True)
    run = Run(wall, rss, code, cpu)
    line = next((ln for ln in stdout.splitlines() if ln.startswith("E2E-RESULT ")), None)
    if code != 0 or line is None:
        run.error = _failure(code, stderr, args.timeout) if code else "no E2E-RESULT line"
        return run
    run.inner = json.loads(line[len("E2E-RESULT ") :])
    run.grad_evals = run.inner.get("grad_evals")
    return run


def peer_missing(python: str, tool: str, env: dict) -> str | None:
    """Why `python` cannot run this peer, or None."""
    family = tool.split("-")[0]
    try:
        done = subprocess.run([python, "-c", PEER_IMPORTS[family]], env=env, capture_output=True,
                              text=True, timeout=300)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{python}: {e}"
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return f"{family} is not installed in {python} ({last[:80]})"
    return None


# ---------------------------------------------------------------- the table


def _fmt(x, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}{spec}}"


def notes(row: Row, spec: Spec, ppl_wall: float | None) -> str:
    if row.skipped:
        return f"skipped: {row.skipped}"
    if not row.ok:
        return "FAILED: " + (row.runs[0].error or "?")
    wall, rss = row.median("wall_s"), row.median("rss_mb")
    out = []
    if row.tool == "ppl":
        met = wall <= spec.target_s and (spec.target_mb is None or rss <= spec.target_mb)
        target = f"<= {spec.target_s:g} s" + (f", <= {spec.target_mb:g} MB" if spec.target_mb
                                               else "")  # fmt: skip
        out.append(f"target {target}: {'met' if met else 'NOT met'}")
        out.append(f"fit {row.inner('fit_s'):.2f} s of it")
        if "khat" in row.ok[0].inner:
            out.append(f"k-hat {row.ok[0].inner['khat']}")
    else:
        if ppl_wall:
            out.append(f"{wall / ppl_wall:.1f}x ppl's time")
        out.append(f"import {row.inner('import_s'):.1f} s, "
                   f"fit+compile {row.inner('fit_s'):.1f} s")  # fmt: skip
        out.append(f"{row.ok[0].inner['grad_evals']} grad evals")
    failed = len(row.runs) - len(row.ok)
    if failed:
        out.append(f"{failed} of {len(row.runs)} runs failed")
    return "; ".join(out)


HEADER = (f"{'problem':<15}{'tool':<14}{'wall s':>8}{'CPU s':>8}{'peak RSS MB':>13}"
          f"{'grad evals':>12}  notes")  # fmt: skip


def print_table(rows: list[Row]) -> None:
    print("\n" + HEADER)
    print("-" * 100)
    for row in rows:
        spec = PROBLEMS[row.problem]
        ppl = next((r for r in rows if r.problem == row.problem and r.tool == "ppl"), None)
        ppl_wall = ppl.median("wall_s") if ppl else None
        grads = row.ok[0].grad_evals if row.ok and row.tool == "ppl" else None
        print(f"{row.problem:<15}{row.tool:<14}{_fmt(row.median('wall_s'), '.2f', 8)}"
              f"{_fmt(row.median('cpu_s'), '.2f', 8)}"
              f"{_fmt(row.median('rss_mb'), '.0f', 13)}{_fmt(grads, 'd', 12)}  "
              f"{notes(row, spec, ppl_wall)}")  # fmt: skip
    sys.stdout.flush()


# ---------------------------------------------------------------- main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=list(PROBLEMS))
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell; the table shows medians")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter for the NumPyro and PyMC runs (default: this one)")
    ap.add_argument("--ppl-python", default=sys.executable,
                    help="interpreter for `ppl fit` (default: this one)")  # fmt: skip
    ap.add_argument("--iter", type=int, default=10000, help="ppl's --iter; SVI/ADVI steps")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None,
                    help="set OPENBLAS/OMP/MKL_NUM_THREADS for every run")  # fmt: skip
    ap.add_argument("--cold-pytensor", action="store_true",
                    help="an empty PyTensor compile cache for every PyMC run")  # fmt: skip
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="where the simulated table is written (default: a temporary folder)")
    ap.add_argument("--json", type=Path, default=None, help="write every run to this file")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    return args


def problem_data(spec: Spec, workdir: Path) -> list[Path]:
    if spec.data:
        return list(spec.data)
    sys.path.insert(0, str(ROOT / "models" / "linear_regression"))
    import simulate

    path = workdir / f"linreg_{LINREG_ROWS}.csv"
    if not path.exists():
        simulate.write(path, LINREG_ROWS)
    return [path]


def write_json(path: Path, payload: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    tmp.replace(path)


def main(argv=None) -> int:
    args = parse_args(argv)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    if args.threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(args.threads)
    temp = None
    if args.workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="ppl-e2e-")
        workdir = Path(temp.name)
    else:
        workdir = args.workdir
        workdir.mkdir(parents=True, exist_ok=True)
    missing = {t: peer_missing(args.python, t, env) for t in args.tools if t != "ppl"}
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    print(f"ppl: {args.ppl_python}; peers: {args.python}; --iter {args.iter}, --seed {args.seed}, "
          f"--repeat {args.repeat}; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    rows: list[Row] = []
    try:
        for name in args.problems:
            spec = PROBLEMS[name]
            data = problem_data(spec, workdir)
            for tool in args.tools:
                row = Row(name, tool, skipped=missing.get(tool))
                rows.append(row)
                for _ in range(0 if row.skipped else args.repeat):
                    if tool == "ppl":
                        run = run_ppl(spec, data, args, env)
                    else:
                        run = run_peer(spec, tool, data, args, env)
                    row.runs.append(run)
                    print(f"  {name} {tool}: {run.wall_s:.2f} s ({run.cpu_s or 0:.2f} s CPU), "
                          f"{run.rss_mb:.0f} MB"
                          + (f" ({run.error})" if run.error else ""), flush=True)  # fmt: skip
                if args.json:
                    write_json(args.json, {"settings": settings,
                                           "rows": [asdict(r) for r in rows]})  # fmt: skip
    finally:
        if temp is not None:
            temp.cleanup()
    print_table(rows)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f} (the targets are for a quiet "
          "machine); wall s = process start to exit, summary printed")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
