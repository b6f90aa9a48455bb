"""Fuzz the CLI: mutated example models, data and options, each run in a forked child under a
time and memory limit, counted by outcome (issue 23).

    python benchmarks/fuzz.py --cases 10000 --jobs 2 --seed 0

A case is one `ppl check`, `ppl ir --json` or short `ppl fit` on a model and data made from the
examples in models/ by a few mutations (tokens deleted, repeated, swapped or replaced by extreme
numbers and keywords; nesting to thousands of levels; long else-if and ?: chains; binary bytes,
BOMs, control characters; JSON values replaced by huge, negative, non-finite or mistyped ones)
and random options. Outcomes:

- ok: exit 0; user error: exit 2 (or 130 never expected); internal error: exit 1 or a
  traceback, a bug; timeout: more than --timeout seconds of CPU (RLIMIT_CPU); timeout (wall):
  past 5x that of wall time using under 5% of a core (a hang), or past 30x it; over memory:
  killed or out of memory under the RLIMIT_AS limit (--memory-gb). A user error whose message
  names neither the model nor a data file is counted as "unlocated" too. Each child's CPU time
  and peak RSS (from wait4) and its wall time are kept: a case over 30 s of CPU (or killed) is a
  failure; the count over 30 s of wall time is shown beside it (a loaded machine stretches it).

Cases are distinct: a draw that repeats an earlier case (command, options and file contents
alike: unmutated examples, mostly) is drawn again. The slow examples' data are cut to fewer rows
(CUT). The parent imports what a fit imports before it forks (warm_up), so a case costs its own
work, not imports or an interpreter start. --json writes the counts and each case's record
(benchmarks/fuzz_table.py makes docs/robustness.md's table from it), every 1000 cases and at the
end.

With --sigint N, N more trials start `ppl fit` as a command on the examples and send SIGINT at a
uniform random time: a trial that exits 0 after the signal is a lost interrupt (issue 32). These
need a real process start (the command's own signal handling), so they are not forked.

Prints a table of counts and, per bad outcome, the first few cases.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import math
import os
import random
import re
import resource
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # forked children must not share BLAS threads
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
#: (model, data files): small examples whose fits take well under a second
EXAMPLES = [
    ("models/eight_schools/noncentered.model", ["models/eight_schools/eight_schools.json"]),
    ("models/eight_schools/centered.model", ["models/eight_schools/eight_schools.json"]),
    ("models/varying_intercepts/varying_intercepts.model",
     ["models/varying_intercepts/varying_intercepts.json"]),
    ("models/posteriordb/arK-arK/model.stan", ["models/posteriordb/arK-arK/data.json"]),
    ("models/posteriordb/kidiq-kidscore_momiq/model.stan",
     ["models/posteriordb/kidiq-kidscore_momiq/data.json"]),
    ("models/posteriordb/arma-arma11/model.stan", ["models/posteriordb/arma-arma11/data.json"]),
    ("models/posteriordb/garch-garch11/model.stan", ["models/posteriordb/garch-garch11/data.json"]),
]  # fmt: skip


def _first_rows(data: dict, n: int) -> dict:
    """A time series cut to its first `n` observations (T and y)."""
    return {**data, "T": n, "y": data["y"][:n]}


def _first_groups(data: dict, j: int) -> dict:
    """The varying-intercepts rows of the first `j` groups."""
    keep = [i for i, g in enumerate(data["group"]) if g <= j]
    rows = {k: [data[k][i] for i in keep] for k in ("group", "X", "y")}
    return {**data, **rows, "N": len(keep), "J": j}


#: The base data of the cases, cut where a fit of the whole took seconds (ARMA(1, 1) 15 s of
#: CPU, GARCH(1, 1) 8 s, varying intercepts 5 s: 2% of the cases took 70% of a campaign's time):
#: the same model, the same types and shapes, fewer rows; the SIGINT trials use the whole files.
CUT = {
    "models/posteriordb/arma-arma11/data.json": lambda d: _first_rows(d, 40),
    "models/posteriordb/garch-garch11/data.json": lambda d: _first_rows(d, 40),
    "models/varying_intercepts/varying_intercepts.json": lambda d: _first_groups(d, 20),
}


def base_data(path: str) -> str:
    """The text of an example's data file, cut (CUT) where its fit is slow."""
    text = (ROOT / path).read_text()
    return json.dumps(CUT[path](json.loads(text))) if path in CUT else text


TOKEN = re.compile(r"\s+|[A-Za-z_]\w*|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\S")
POOL = [
    "0", "-1", "1e308", "1e-320", "9" * 5000, "2147483648", "-0", "0.0", "inf", "nan", "1e999",
    "for", "while", "if", "else", "{", "}", "(", ")", "[", "]", ";", ",", ":", "?", "~", "=",
    "+=", "*", "/", "^", "'", ".*", "|", "&&", "<lower=0>", "<upper=-1>", "vector", "matrix",
    "simplex", "cov_matrix", "cholesky_factor_cov", "array", "int", "real", "target", "reject",
    "print", "break", "continue", "return", "normal", "log", "exp", "rep_vector", "N", "K",
    "\x1b[31m", "\x00", "\ufeff", "/*", "//", "#", '"',
]  # fmt: skip
EXTREMES = [0, -1, 1, 10**12, -(10**12), 2**63, 1e308, -1e308, 1e-320, 0.5, "inf", "NaN", None,
            [], [[]], "x", True, [1, 2], {"a": 1}, int("9" * 400)]  # fmt: skip
OPTIONS = {
    "--method": ["auto", "advi", "fullrank", "bbvi", "dsvi", "meanfield"],
    "--iter": ["0", "1", "-3", "7", "50", "abc"],
    "--draws": ["0", "1", "-1", "10", "1000000000000"],
    "--eta": ["0", "-1", "nan", "inf", "1e300", "1e-300", "0.1"],
    "--tol-rel-obj": ["0", "-1", "nan", "1e-300", "10"],
    "--seed": ["-1", "0", str(2**64), "7"],
    "--grad-samples": ["0", "1", "1000000000", "3"],
    "--batch": ["0", "1", "-2", "5", "100000"],
    "--rank": ["diag", "full", "3"],
    "--family": ["mu=gamma", "tau=gaussian", "nope=gamma", "x"],
    "--set": ["N=0", "N=-1", "J=1000000000000", "K=abc", "N"],
    "--max-loop-iterations": ["1", "100", "0"],
    "--optimizer": ["adam", "lbfgs", "stan", "nope"],
}


def tokens(text: str) -> list[str]:
    return TOKEN.findall(text)


#: loop sizes for nested and endless loops: small, over the iteration limit when nested, huge
LOOP_SIZES = [10, 3000, 30000, 10**6, 10**9]


def loop_statement(rng: random.Random) -> str:
    """A loop nest that must be refused at once (over the iteration or memory budget), stopped
    in seconds (endless), or run (small): issue 32's `for (i in 1:30000) for (j in 1:30000)`."""
    a, b, c = (rng.choice(LOOP_SIZES) for _ in range(3))
    # a single loop of 10^6 in the model block is a legitimately slow model (seconds a
    # gradient), not a runaway: those run small or past the limit
    n = rng.choice([10, 3000, 10**9])
    return rng.choice([
        f"{{ real zz = 0; for (i in 1:{a}) for (j in 1:{b}) zz += i * j; }}",
        f"{{ real zz = 0; for (i in 1:{a}) {{ for (j in 1:{b}) {{ for (k in 1:{c}) zz += 1; }} }}"
        " }",
        f"{{ real zz = 0; for (i in 1:{n}) zz = zz / 2 + i; }}",
        f"{{ vector[{a}] v = rep_vector(1, {a}); real zz = 0; for (j in 1:{b}) zz += sum(v); }}",
        "{ real zz = 0; while (1) zz += 1; }",
        f"{{ real zz = 0; while (zz < {n}) zz += 1; }}",
        f"{{ int k = 0; while (1) {{ k += 1; if (k > {n}) break; }} }}",
    ])  # fmt: skip


def mutate_model(text: str, rng: random.Random, n: int) -> str | bytes:
    """`n` token mutations, sometimes a structural blow-up, sometimes an encoding change."""
    toks = tokens(text)
    for _ in range(n):
        if not toks:
            break
        i = rng.randrange(len(toks))
        op = rng.randrange(9)
        if op == 0:
            del toks[i]
        elif op == 1:
            toks.insert(i, toks[i])
        elif op == 2 and i + 1 < len(toks):
            toks[i], toks[i + 1] = toks[i + 1], toks[i]
        elif op == 3:
            toks[i] = rng.choice(POOL)
        elif op == 4:
            numbers = [k for k, t in enumerate(toks) if t[:1].isdigit()]
            if numbers:
                toks[rng.choice(numbers)] = rng.choice(POOL[:11])
        elif op == 5:
            depth = rng.choice([10, 300, 3000])
            toks[i] = "(" * depth + toks[i] + ")" * depth
        elif op == 6:
            model = max((k for k, t in enumerate(toks) if t == "model"), default=None)
            if model is not None and model + 2 < len(toks):
                depth = rng.choice([50, 600, 3000])
                if rng.random() < 0.5:
                    chain = "if (0) {} " + "else if (0) {} " * depth
                else:
                    chain = "real zz = " + "0 ? 1 : " * depth + "2; "
                toks.insert(model + 2, " " + chain)
        elif op == 7:
            model = max((k for k, t in enumerate(toks) if t == "model"), default=None)
            if model is not None and model + 2 < len(toks):
                toks.insert(model + 2, " " + loop_statement(rng) + " ")
        else:
            toks.insert(i, rng.choice(POOL))
    out = "".join(toks)
    r = rng.random()
    if r < 0.03:
        return out.encode("utf-16")
    if r < 0.06:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    if r < 0.08:
        return "\ufeff" + out
    if r < 0.10:
        return out + "\n// " + "x" * rng.choice([10**5, 10**6])
    return out


def _extreme(rng: random.Random):
    """A copy of one of EXTREMES: a list put into the data must not be the shared one, which a
    later mutation could put inside itself (json: "Circular reference detected")."""
    return copy.deepcopy(rng.choice(EXTREMES))


def mutate_json(text: str, rng: random.Random, n: int) -> str:
    try:
        data = json.loads(text)
    except ValueError:
        return text
    for _ in range(n):
        if not data:
            break
        key = rng.choice(list(data))
        r = rng.random()
        if r < 0.1:
            del data[key]
        elif r < 0.2:
            data[rng.choice(["zz", key + "x", ""])] = _extreme(rng)
        elif r < 0.4 and isinstance(data[key], list) and data[key]:
            items = data[key]
            items[rng.randrange(len(items))] = _extreme(rng)
        elif r < 0.5 and isinstance(data[key], list):
            data[key] = data[key][: rng.randrange(len(data[key]) + 1)]
        else:
            data[key] = _extreme(rng)
    out = json.dumps(data, allow_nan=True)
    if rng.random() < 0.05:
        out = out[: rng.randrange(len(out) + 1)]
    return out


def make_case(rng: random.Random, workdir: Path, index: int, commands=("check", "ir", "fit", "fit",
              "fit")) -> list[str]:  # fmt: skip
    """Writes the case's files under `workdir`; returns the CLI's argv."""
    model_path, data_paths = rng.choice(EXAMPLES)
    source = (ROOT / model_path).read_text()
    mutated = mutate_model(source, rng, rng.choice([0, 0, 1, 1, 2, 3]))
    model = workdir / f"c{index}{Path(model_path).suffix}"
    if isinstance(mutated, bytes):
        model.write_bytes(mutated)
    else:
        model.write_text(mutated, encoding="utf-8", errors="surrogatepass")
    data = []
    for k, path in enumerate(data_paths):
        text = base_data(path)
        if rng.random() < 0.6:
            text = mutate_json(text, rng, rng.choice([1, 1, 2, 4]))
        target = workdir / f"c{index}_{k}.json"
        target.write_text(text)
        data.append(str(target))
    command = rng.choice(commands)
    argv = [command, str(model), *data]
    if command == "ir":
        argv.append("--json")
    if command == "fit":
        argv += ["--quiet", "--iter", "50", "--draws", "50", "--method", "advi"]
        for option in rng.sample(list(OPTIONS), rng.choice([0, 0, 1, 2, 3])):
            argv += [option, rng.choice(OPTIONS[option])]
    argv += ["--max-memory", "0.25"]
    return argv


def case_digest(argv: list[str], workdir: Path) -> str:
    """What makes a case: its command, options and the bytes of its files (not their names)."""
    import hashlib

    h = hashlib.sha256()
    for arg in argv:
        path = Path(arg)
        if path.parent == workdir and path.is_file():
            h.update(b"file" + path.suffix.encode() + b"\0" + path.read_bytes())
        else:
            h.update(arg.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


def distinct_case(rng: random.Random, workdir: Path, index: int, seen: set[str]) -> tuple[
        list[str], int]:  # fmt: skip
    """A case unlike every case before it (about 9% of draws repeat one: unmutated examples,
    mostly, whose fits are the campaign's slowest); returns its argv and the repeats redrawn."""
    redrawn = 0
    while True:
        argv = make_case(rng, workdir, index)
        digest = case_digest(argv, workdir)
        if digest not in seen:
            seen.add(digest)
            return argv, redrawn
        redrawn += 1
        for path in workdir.glob(f"c{index}[._]*"):
            path.unlink()


def warm_up() -> int:
    """Imports here what a check, an ir and fits by every method import (a child runs them on an
    unmutated example and names its modules) and loads the parser's tables: a forked case then
    costs its own work, not imports (0.5 s of a 1.5 s fit) or the grammar cache (0.1 s). Returns
    how many modules it imported."""
    import importlib

    model, data = (str(ROOT / p) for p in (EXAMPLES[0][0], EXAMPLES[0][1][0]))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            from ppl.cli import main as cli_main

            runs = [["check", model, data], ["ir", model, data, "--json"]]
            runs += [["fit", model, data, "--quiet", "--iter", "5", "--draws", "5", "--method", m]
                     for m in OPTIONS["--method"]]  # fmt: skip
            for argv in runs:
                with contextlib.suppress(BaseException):
                    cli_main(argv)
            with os.fdopen(write, "w") as pipe:
                pipe.write("\n".join(sys.modules))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        names = pipe.read().split()
    os.waitpid(pid, 0)
    imported = 0
    for name in names:
        if name not in sys.modules and not name.startswith("__"):
            with contextlib.suppress(BaseException):
                importlib.import_module(name)
                imported += 1
    from ppl.language.parser import _lark

    _lark()
    return imported


def run_case(argv: list[str], out_path: Path, memory_bytes: int, cpu_seconds: float = 0) -> int:
    """Fork; the child runs `ppl` in-process under RLIMIT_AS (and RLIMIT_CPU) with its output
    in `out_path`."""
    pid = os.fork()
    if pid:
        return pid
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        if cpu_seconds:  # SIGXCPU at the soft limit: CPU time, which a loaded machine does not
            soft = int(math.ceil(cpu_seconds))  # stretch as it stretches wall time
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        from ppl.cli import main

        rc = main(argv)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc if isinstance(rc, int) else 0)
    except SystemExit as e:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(e.code if isinstance(e.code, int) else 2)
    except BaseException:  # noqa: BLE001 - a traceback escaping main() is what we count
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)


def classify(status: int | None, text: str, argv: list[str]) -> str:
    if status is None:  # killed at 5x the CPU limit of wall time: a hang, or a loaded machine
        return "timeout (wall)"
    if "out of memory" in text or "MemoryError" in text:
        return "over memory"
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return "timeout"
    if os.WIFSIGNALED(status):
        return "over memory" if os.WTERMSIG(status) in (signal.SIGKILL, signal.SIGSEGV) else (
            f"signal {os.WTERMSIG(status)}")  # fmt: skip
    rc = os.WEXITSTATUS(status)
    if rc == 1 or "Traceback" in text or "internal error" in text:
        return "internal error"
    if rc == 0:
        return "ok"
    if rc == 2:
        return "user error"
    return f"exit {rc}"


def located(text: str, argv: list[str]) -> bool:
    """The error names the model or a data file (or an option, for a bad option)."""
    names = [Path(a).name for a in argv[1:] if not a.startswith("-") and "/" in a]
    return any(n in text for n in names) or "--" in text or "ppl: error:" in text


def _commit() -> str:
    """The commit the cases ran on: git's, else a COMMIT file (a `git archive` copy)."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)  # fmt: skip
        if out.returncode == 0:
            return out.stdout.strip()
    except OSError:
        pass
    marker = ROOT / "COMMIT"
    return marker.read_text().strip() if marker.is_file() else "unknown"


def _finish(result: dict, pid: int, status, usage, began: float, argv: list[str], out: Path,
            show: int) -> None:  # fmt: skip
    """Counts one ended case into `result` and keeps its record."""
    wall = time.monotonic() - began
    cpu = usage.ru_utime + usage.ru_stime
    rss_mb = usage.ru_maxrss / 1024  # kilobytes on Linux
    text = out.read_text(errors="replace") if out.exists() else ""
    outcome = classify(status, text, argv)
    result["counts"][outcome] = result["counts"].get(outcome, 0) + 1
    if outcome == "user error" and not located(text, argv):
        result["unlocated"] += 1
        outcome = "unlocated"
    result["records"].append([argv[0], outcome, round(wall, 3), round(cpu, 3), round(rss_mb, 1)])
    late = wall > 30 or cpu > 30
    if outcome not in ("ok", "user error") or late:
        key = "over 30 s" if outcome in ("ok", "user error") else outcome
        shown = result["examples"].setdefault(key, [])
        if len(shown) < show:
            source = Path(argv[1]).read_bytes()[:300] if Path(argv[1]).exists() else b""
            shown.append(f"{' '.join(argv)} ({wall:.0f} s, {cpu:.1f} s CPU)\n"
                         f"      {text.strip()[-400:]}\n"
                         f"      model: {source!r}")  # fmt: skip


def _summarise(result: dict) -> None:
    """The totals of `result`'s records: peak RSS, CPU and wall time, cases over 30 s."""
    records = result["records"]
    result["peak_rss_mb"] = max((r[4] for r in records), default=0)
    result["over_1gb"] = sum(r[4] > 1000 for r in records)
    result["max_cpu_s"] = max((r[3] for r in records), default=0)
    result["max_wall_s"] = max((r[2] for r in records), default=0)
    # the failure: 30 s of CPU (a case at the CPU limit, --timeout, is one too); wall time over
    # 30 s is shown beside it, as a loaded machine stretches it
    result["over_30s_cpu"] = sum(r[3] > 30 or r[1] in ("timeout", "timeout (wall)")
                                 for r in records)  # fmt: skip
    result["over_30s_wall"] = sum(r[2] > 30 for r in records)
    by_command: dict[str, dict[str, int]] = {}
    for r in records:
        counts = by_command.setdefault(r[0], {})
        counts[r[1]] = counts.get(r[1], 0) + 1
    result["by_command"] = by_command


def _cpu_seconds(pid: int) -> float:
    """A running child's CPU time so far (Linux /proc), 0 where it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _hung(pid: int, wall: float, cpu_limit: float) -> bool:
    """A case to kill by wall time: past 5x the CPU limit while using under 5% of a core (a
    hang: a blocked read, a sleep), or past 30x it whatever it does. A case that computes is
    left to RLIMIT_CPU, so that a loaded machine, which stretches wall time, kills nothing."""
    if wall < 5 * cpu_limit:
        return False
    return wall > 30 * cpu_limit or _cpu_seconds(pid) < 0.05 * wall


def campaign(args) -> dict:
    """Runs `args.cases` cases, `args.jobs` at a time, each forked from this process."""
    import ppl.cli  # noqa: F401 - imported once, before the forks
    import ppl.pipeline  # noqa: F401

    warmed = warm_up() if args.warm else 0
    rng = random.Random(args.seed)
    memory = int(args.memory_gb * 2**30)
    result = {"kind": "fuzz", "commit": _commit(), "seed": args.seed, "cases": args.cases,
              "jobs": args.jobs, "timeout_cpu_s": args.timeout, "memory_gb": args.memory_gb,
              "warm_modules": warmed, "load_before": os.getloadavg(), "counts": {},
              "unlocated": 0, "examples": {}, "records": []}  # fmt: skip
    seen: set[str] = set()
    result["repeats_redrawn"] = 0
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ppl-fuzz-") as tmp:
        workdir = Path(tmp)
        running: dict[int, tuple[float, list[str], Path, int]] = {}
        made = 0
        while made < args.cases or running:
            while made < args.cases and len(running) < args.jobs:
                argv, redrawn = distinct_case(rng, workdir, made, seen)
                result["repeats_redrawn"] += redrawn
                out = workdir / f"c{made}.out"
                pid = run_case(argv, out, memory, args.timeout)
                running[pid] = (time.monotonic(), argv, out, made)
                made += 1
            time.sleep(0.003)
            for pid, (began, argv, out, index) in list(running.items()):
                done, status, usage = os.wait4(pid, os.WNOHANG)
                if not done:
                    if not _hung(pid, time.monotonic() - began, args.timeout):
                        continue
                    os.kill(pid, signal.SIGKILL)
                    _, _, usage = os.wait4(pid, 0)
                    status = None
                del running[pid]
                _finish(result, pid, status, usage, began, argv, out, args.show)
                for path in workdir.glob(f"c{index}[._]*"):
                    path.unlink()
                finished = len(result["records"])
                if finished % 1000 == 0:  # a running count: a long run's table is never all lost
                    print(f"{finished} cases ({time.perf_counter() - start:.0f} s): "
                          f"{result['counts']}", flush=True)  # fmt: skip
                    if args.json:
                        partial = {**result, "seconds": round(time.perf_counter() - start, 1)}
                        _summarise(partial)
                        _write(args.json, {"fuzz": {**partial, "finished": False}})
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["finished"] = True
    result["load_after"] = os.getloadavg()
    _summarise(result)
    return result


def print_campaign(result: dict) -> None:
    counts = dict(result["counts"])
    print(f"{result['cases']} cases, seed {result['seed']}, {result['jobs']} jobs, CPU limit "
          f"{result['timeout_cpu_s']:g} s, RLIMIT_AS {result['memory_gb']:g} GiB, at "
          f"{result['commit']}: {result['seconds']:.0f} s (load {result['load_before'][0]:.1f} "
          f"before, {result['load_after'][0]:.1f} after); {result['repeats_redrawn']} draws "
          "that repeated an earlier case were drawn again")  # fmt: skip
    print()
    print(f"{'outcome':<16}{'cases':>8}")
    print("-" * 24)
    for outcome in ("ok", "user error", "internal error", "timeout", "timeout (wall)",
                    "over memory"):  # fmt: skip
        print(f"{outcome:<16}{counts.pop(outcome, 0):>8}")
    for outcome, n in sorted(counts.items()):
        print(f"{outcome:<16}{n:>8}")
    print(f"{'(unlocated)':<16}{result['unlocated']:>8}  user errors naming no file")
    print(f"{'(over 1 GB RSS)':<16}{result['over_1gb']:>8}  largest peak RSS of a case: "
          f"{result['peak_rss_mb']:.0f} MB")  # fmt: skip
    print(f"{'(over 30 s CPU)':<16}{result['over_30s_cpu']:>8}  largest CPU time of a case: "
          f"{result['max_cpu_s']:.1f} s (a case at the CPU limit counts)")  # fmt: skip
    print(f"{'(over 30 s wall)':<16}{result['over_30s_wall']:>8}  largest wall time of a case: "
          f"{result['max_wall_s']:.1f} s (stretched by the machine's load)")  # fmt: skip
    for outcome, shown in result["examples"].items():
        print(f"\n{outcome}:")
        for line in shown:
            print(f"  {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--timeout",
        type=float,
        default=20.0,
        help="CPU seconds of a case (RLIMIT_CPU); wall time is allowed 5x that",
    )
    parser.add_argument("--memory-gb", type=float, default=1.5, help="RLIMIT_AS of each case")
    parser.add_argument("--show", type=int, default=3, help="cases shown per bad outcome")
    parser.add_argument("--sigint", type=int, default=0,
                        help="also this many SIGINT trials: `ppl fit` started as a command, "
                        "interrupted at a random time")  # fmt: skip
    parser.add_argument("--sigint-max-delay", type=float, default=4.0,
                        help="the trials' delays are uniform on [0, this] seconds")  # fmt: skip
    parser.add_argument("--json", metavar="PATH",
                        help="write the counts and every case's outcome, wall and CPU "
                        "seconds and peak RSS here (benchmarks/fuzz_table.py makes the "
                        "docs' table)")  # fmt: skip
    parser.add_argument("--no-warm", dest="warm", action="store_false",
                        help="do not import a fit's modules before forking (each case then "
                        "imports them: 0.5 s more a fit)")  # fmt: skip
    args = parser.parse_args()
    results = {}
    if args.cases:
        results["fuzz"] = campaign(args)
        print_campaign(results["fuzz"])
        _write(args.json, results)
    if args.sigint:
        if args.cases:
            print()
        results["sigint"] = sigint_trials(args.sigint, args.sigint_max_delay, args.jobs, args.seed)
        _write(args.json, results)


def _write(path: str | None, results: dict) -> None:
    """JSON with one line per record (10^4 records stay readable and diffable)."""
    if not path:
        return
    parts = []
    for name, result in results.items():
        head = {k: v for k, v in result.items() if k != "records"}
        body = ",\n".join("  " + json.dumps(r) for r in result.get("records", []))
        text = json.dumps(head, indent=1)[:-2]
        parts.append(f'"{name}": {text},\n "records": [\n{body}\n ]\n}}')
    Path(path).write_text("{\n" + ",\n".join(parts) + "\n}\n")


def _command() -> list[str]:
    """`ppl` as a user starts it: the console script beside this Python, else `-m ppl.cli`."""
    script = Path(sys.executable).with_name("ppl")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ppl.cli"]


def _sigint_argv(rng: random.Random, out: Path) -> list[str]:
    model, data = rng.choice(EXAMPLES)
    argv = [*_command(), "fit", str(ROOT / model), *(str(ROOT / d) for d in data), "--quiet",
            "--output", str(out)]  # fmt: skip
    if rng.random() < 0.5:
        argv += ["--method", rng.choice(["advi", "fullrank", "meanfield", "auto"])]
    if rng.random() < 0.2:
        argv += ["--checkpoint", str(out) + ".ckpt"]
    return argv


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _sigint_outcome(p, finished_first: bool, err: str) -> str:
    if finished_first:
        return "finished before the signal"
    if "Traceback" in err:  # in ppl's code, or in Python's start before any of it runs
        frames = re.findall(r'File "([^"]+)"', err)
        ours = [f for f in frames if "/ppl/" in f and not f.endswith("/bin/ppl")]
        return "traceback (ppl)" if ours else "traceback (Python's start)"
    if p.returncode == 0:
        return "lost (exit 0)"
    if "stopped:" in err:  # --checkpoint: stopped after an iteration, checkpoint written
        return f"stopped (exit {p.returncode})"
    return "interrupted (130)" if p.returncode == 130 else f"exit {p.returncode}"


def sigint_trials(n: int, max_delay: float, jobs: int, seed: int) -> dict:
    """`ppl fit` on the examples, SIGINT at a uniform random time in [0, max_delay] s; a trial
    whose fit ended before the signal does not count. Lost: exit 0 after the signal."""
    import subprocess

    rng = random.Random(seed + 1)
    counts: Counter = Counter()
    shown: list[str] = []
    records: list = []
    load_before = os.getloadavg()
    delays: dict[str, list[float]] = {}  # each outcome's delays after the start
    start = time.perf_counter()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="ppl-sigint-") as tmp:
        running: list = []
        made = 0
        while made < n or running:
            while made < n and len(running) < jobs:
                argv = _sigint_argv(rng, Path(tmp) / f"o{made}")
                # SIGINT as a terminal gives it: a background job of a script inherits it
                # ignored (SIG_IGN), and a command that ignores Ctrl-C cannot be tested
                p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env=env, preexec_fn=_default_sigint)  # fmt: skip
                began = time.monotonic()
                running.append([p, began + rng.uniform(0, max_delay), None, argv, began])
                made += 1
            time.sleep(0.002)
            for trial in list(running):
                p, when, sent, argv, began = trial
                if sent is None and time.monotonic() >= when:
                    trial[2] = p.poll() is not None  # ended before the signal
                    if not trial[2]:
                        p.send_signal(signal.SIGINT)
                if trial[2] is None or p.poll() is None:
                    continue
                running.remove(trial)
                err = p.stderr.read().decode(errors="replace")
                outcome = _sigint_outcome(p, trial[2], err)
                counts[outcome] += 1
                delays.setdefault(outcome, []).append(when - began)
                records.append([outcome, round(when - began, 3), p.returncode, " ".join(argv[1:])])
                if outcome not in ("interrupted (130)", "finished before the signal"):
                    if len(shown) < 5:
                        shown.append(f"{outcome}: {' '.join(argv[1:])}\n      {err[-300:]}")
    seconds = time.perf_counter() - start
    print(f"{n} SIGINT trials, delays uniform on [0, {max_delay:g}] s, {jobs} jobs: "
          f"{seconds:.0f} s")  # fmt: skip
    for outcome, k in counts.most_common():
        d = delays[outcome]
        print(f"  {outcome:<28}{k:>6}   delays {min(d):.2f} to {max(d):.2f} s")
    for line in shown:
        print(f"  {line}")
    return {"kind": "sigint", "commit": _commit(), "seed": seed, "trials": n,
            "max_delay_s": max_delay, "jobs": jobs, "seconds": round(seconds, 1),
            "load_before": load_before, "load_after": os.getloadavg(), "counts": dict(counts),
            "delays": {k: [round(min(d), 3), round(max(d), 3)] for k, d in delays.items()},
            "lost": sum(k for o, k in counts.items() if o.startswith("lost")), "examples": shown,
            "records": records}  # fmt: skip


if __name__ == "__main__":
    main()
