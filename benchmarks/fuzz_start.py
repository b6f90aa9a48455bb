"""The Ctrl-C window at the start of `ppl` (issue 32): SIGINT at a uniform random delay after
the command starts, before its fit has begun; counts the runs that print Python's traceback.

    python benchmarks/fuzz_start.py --trials 200 --max-delay 0.4 --json start.json

Each trial starts `ppl check` on eight schools (0.5 s on a quiet machine, all of it start-up and
imports) with SIGINT at its default, as a terminal gives it, and sends SIGINT after a delay
uniform on [0, --max-delay]. With --compare SCRIPT, each trial runs that command too, at the same
delay (say, a console script made before the change), so that the machine's load falls on both
alike. A traceback is told apart by where it was raised: Python's start (`site`, the import
system) before any code of ppl's ran, or a ppl module.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = ["check", str(ROOT / "models/eight_schools/noncentered.model"),
        str(ROOT / "models/eight_schools/eight_schools.json")]  # fmt: skip


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def outcome(returncode: int, err: str) -> str:
    if "Traceback" in err:
        frames = re.findall(r'File "([^"]+)"', err)
        ours = [f for f in frames if "/ppl/" in f]
        return "traceback (ppl)" if ours else "traceback (Python's start)"
    if returncode == 130:
        return "exit 130"
    if returncode == -2:
        return "killed by SIGINT, no traceback"
    return f"exit {returncode}"


#: the first stderr texts of each traceback outcome, for the report
SHOWN: dict[str, list[str]] = {}


def trial(command: list[str], delay: float) -> tuple[str, float]:
    began = time.monotonic()
    p = subprocess.Popen([*command, *ARGS], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=_default_sigint)  # fmt: skip
    time.sleep(max(0.0, began + delay - time.monotonic()))
    finished = p.poll() is not None
    if not finished:
        p.send_signal(signal.SIGINT)
    err = p.communicate()[1].decode(errors="replace")
    what = "finished before the signal" if finished else outcome(p.returncode, err)
    if what.startswith("traceback") and len(SHOWN.setdefault(what, [])) < 3:
        SHOWN[what].append(f"{' '.join(command)} at {delay:.3f} s:\n{err[-1500:]}")
    return what, delay


def handler_times(command: list[str]) -> tuple[float, float] | None:
    """Under strace: the seconds from exec to Python's SIGINT handler (before it, SIGINT kills
    the process silently) and to the command's own (between the two, Python prints a
    traceback). None without strace."""
    import shutil

    if not shutil.which("strace"):
        return None
    p = subprocess.run(["strace", "-ttt", "-e", "trace=execve,rt_sigaction", "-e", "signal=none",
                        *command, *ARGS], capture_output=True, text=True,
                       preexec_fn=_default_sigint)  # fmt: skip
    stamps = [float(line.split()[0]) for line in p.stderr.splitlines()
              if re.match(r"^[0-9.]+ (execve|rt_sigaction\(SIGINT, \{)", line)]  # fmt: skip
    if len(stamps) < 3:
        return None
    return stamps[1] - stamps[0], stamps[2] - stamps[0]


def windows(commands: dict[str, list[str]], n: int, rng: random.Random) -> dict:
    """handler_times, `n` runs of each command interleaved: medians and largest, in ms."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(n):
        for name, command in sorted(commands.items(), key=lambda _: rng.random()):
            t = handler_times(command)
            if t:
                times[name].append(t)
    out = {}
    for name, ts in times.items():
        if ts:
            python = sorted(t[0] for t in ts)
            ours = sorted(t[1] for t in ts)
            gap = sorted(t[1] - t[0] for t in ts)
            out[name] = {
                f"{what}_ms": {"median": round(1e3 * v[len(v) // 2], 1),
                               "max": round(1e3 * v[-1], 1)}
                for what, v in (("python_handler", python), ("ppl_handler", ours),
                                ("traceback_window", gap))
            }  # fmt: skip
    return out


def summarise(results: list[tuple[str, float]]) -> dict:
    counts: dict[str, int] = {}
    delays: dict[str, list[float]] = {}
    for what, delay in results:
        counts[what] = counts.get(what, 0) + 1
        delays.setdefault(what, []).append(delay)
    tracebacks = sum(n for k, n in counts.items() if k.startswith("traceback"))
    spans = {k: [round(min(d), 3), round(max(d), 3)] for k, d in delays.items()}
    return {"counts": counts, "tracebacks": tracebacks, "delays": spans}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--max-delay", type=float, default=0.4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--command", default=str(Path(sys.executable).with_name("ppl")),
                        help="the command tested (default: ppl beside this Python)")  # fmt: skip
    parser.add_argument("--compare", help="another command, run at the same delays")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--strace", type=int, default=0, metavar="N",
                        help="time the handlers under strace, N runs of each command")  # fmt: skip
    args = parser.parse_args()
    rng = random.Random(args.seed)
    commands = {"command": [args.command]}
    if args.compare:
        commands["compare"] = [args.compare]
    results: dict[str, list] = {name: [] for name in commands}
    start = time.perf_counter()
    for _ in range(args.trials):
        delay = rng.uniform(0, args.max_delay)
        for name, command in sorted(commands.items(), key=lambda _: rng.random()):
            results[name].append(trial(command, delay))
    report = {"trials": args.trials, "max_delay_s": args.max_delay, "seed": args.seed,
              "seconds": round(time.perf_counter() - start, 1)}  # fmt: skip
    for name, command in commands.items():
        report[name] = {"argv": command, **summarise(results[name])}
        print(f"{' '.join(command)}: {args.trials} trials, delays uniform on [0, "
              f"{args.max_delay:g}] s")  # fmt: skip
        for what, n in sorted(report[name]["counts"].items(), key=lambda kv: -kv[1]):
            low, high = report[name]["delays"][what]
            print(f"  {what:<34}{n:>5}   delays {low:.3f} to {high:.3f} s")
    report["tracebacks_shown"] = SHOWN
    if args.strace:
        report["windows"] = windows(commands, args.strace, rng)
        for name, w in report["windows"].items():
            print(f"{' '.join(commands[name])}, {args.strace} runs under strace (ms after exec):")
            for what, v in w.items():
                print(f"  {what:<22} median {v['median']:>7.1f}   largest {v['max']:>7.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
