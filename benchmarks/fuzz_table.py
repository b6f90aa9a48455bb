"""docs/robustness.md's fuzzing tables, made from the JSON that `benchmarks/fuzz.py --json`
wrote, so that the numbers in the doc are the run's.

    python benchmarks/fuzz.py --cases 10000 --jobs 2 --seed 20 --json fuzz.json
    python benchmarks/fuzz.py --cases 0 --sigint 200 --jobs 1 --seed 33 --json sigint.json
    python benchmarks/fuzz_table.py --fuzz fuzz.json --sigint sigint.json --doc docs/robustness.md

Replaces what lies between the markers `<!-- fuzz-table -->` and `<!-- /fuzz-table -->` in the
doc (or prints the tables without --doc).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

START, END = "<!-- fuzz-table -->", "<!-- /fuzz-table -->"
#: the outcomes in the table's order; others (a signal, an odd exit code) follow
OUTCOMES = ["ok", "user error", "internal error", "timeout", "timeout (wall)", "over memory"]


def _n(x: float) -> str:
    return f"{x:,}"


def fuzz_table(run: dict) -> list[str]:
    counts = dict(run["counts"])
    counts["user error"] = counts.get("user error", 0)  # "unlocated" is counted in user error
    cases = len(run["records"])
    done = "" if run.get("finished", True) else f" (stopped at {_n(cases)} of {_n(run['cases'])})"
    cpu = sum(r[3] for r in run["records"])
    lines = [
        f"{_n(cases)} distinct cases{done}, seed {run['seed']}, at {run['commit']}, "
        f"{run['jobs']} jobs under `nice -n 5`, {run['seconds'] / 60:.0f} minutes "
        f"(load average {run['load_before'][0]:.0f} at the start"
        + (f", {run['load_after'][0]:.0f} at the end" if "load_after" in run else "")
        + f"); the cases' CPU time {cpu / 60:.1f} minutes in all, {cpu / max(cases, 1):.3f} s "
        f"a case; {_n(run.get('repeats_redrawn', 0))} draws that repeated a case were drawn "
        "again:",
        "",
        "| command | cases | ok | user error | internal error | over the CPU limit "
        f"({run['timeout_cpu_s']:g} s) | hung | over memory |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by = run["by_command"]
    for command in [*sorted(by), "all"]:
        c = counts if command == "all" else dict(by[command])
        if command != "all":
            c["user error"] = c.get("user error", 0) + c.pop("unlocated", 0)
        total = sum(c.values()) if command != "all" else cases
        cells = [c.get(k, 0) for k in OUTCOMES]
        name = "**all**" if command == "all" else f"`{command}`"
        lines.append(f"| {name} | {_n(total)} | " + " | ".join(_n(x) for x in cells) + " |")
    other = {k: v for k, v in counts.items() if k not in OUTCOMES and k != "unlocated"}
    lines += [
        "",
        "| failure the issue counts | cases | largest |",
        "|---|---:|---:|",
        f"| internal error (exit 1 or a traceback) | {_n(counts.get('internal error', 0))} | |",
        f"| over 30 s of CPU time (or killed) | {_n(run['over_30s_cpu'])} | "
        f"{run['max_cpu_s']:.1f} s |",
        f"| over the memory limit ({run['memory_gb']:g} GiB RLIMIT_AS) | "
        f"{_n(counts.get('over memory', 0))} | {run['peak_rss_mb']:.0f} MB peak RSS |",
        f"| over 1 GB of RSS | {_n(run['over_1gb'])} | |",
        f"| user error naming no file | {_n(run['unlocated'])} | |",
        f"| other outcomes ({', '.join(other) or 'none'}) | {_n(sum(other.values()))} | |",
        f"| *over 30 s of wall time (the machine's load; not a failure)* | "
        f"{_n(run['over_30s_wall'])} | {run['max_wall_s']:.0f} s |",
    ]
    return lines


def sigint_table(run: dict) -> list[str]:
    lines = [
        f"{_n(run['trials'])} SIGINT trials, delays uniform on [0, {run['max_delay_s']:g}] s, "
        f"seed {run['seed']}, at {run['commit']}, {run['jobs']} at a time, "
        f"{run['seconds'] / 60:.0f} minutes (load average {run['load_before'][0]:.0f}):",
        "",
        "| outcome | trials | delays |",
        "|---|---:|---|",
    ]
    for outcome, n in sorted(run["counts"].items(), key=lambda kv: -kv[1]):
        low, high = run["delays"][outcome]
        lines.append(f"| {outcome} | {_n(n)} | {low:.2f} to {high:.2f} s |")
    lines.append(f"| **lost (exit 0 after the signal)** | **{_n(run['lost'])}** | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fuzz", help="fuzz.py --json's file of the cases")
    parser.add_argument("--sigint", help="fuzz.py --json's file of the SIGINT trials")
    parser.add_argument("--doc", help="the doc to update between the markers")
    args = parser.parse_args()
    lines: list[str] = []
    if args.fuzz:
        lines += fuzz_table(json.loads(Path(args.fuzz).read_text())["fuzz"])
    if args.sigint:
        lines += ([""] if lines else []) + sigint_table(
            json.loads(Path(args.sigint).read_text())["sigint"]
        )
    text = "\n".join(lines)
    if not args.doc:
        print(text)
        return
    doc = Path(args.doc).read_text()
    head, found, rest = doc.partition(START)
    _, found_end, tail = rest.partition(END)
    if not (found and found_end):
        raise SystemExit(f"{args.doc}: no {START} ... {END} markers")
    Path(args.doc).write_text(f"{head}{START}\n{text}\n{END}{tail}")


if __name__ == "__main__":
    main()
