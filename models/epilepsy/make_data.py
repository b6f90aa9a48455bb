"""Build epil.csv, sizes.json and epil.json from epil_seizure_counts.csv.

epil_seizure_counts.csv is the copied MASS `epil` data (Thall & Vail 1990): 59 patients x 4
two-week periods, long format. Run from anywhere:  python models/epilepsy/make_data.py
Reads only the copy next to this script (never the workspace's shared data folder).

epil.csv columns (one row per patient-period, N = 236 rows):
    y        seizure count in the two-week period
    subject  patient index, 1-based (1..59)
    trt      1 = progabide, 0 = placebo
    lbase    log(baseline count / 4), centred (as in MASS)
    lage     log(age), centred (as in MASS)
    V4       1 for the 4th (last) period, else 0
sizes.json: {"J": 59}, the number of patients (not a column length, so not inferable).
epil.json:  everything (N, J and the columns) in one Stan-JSON data file.
"""

import csv
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRT = {"placebo": 0, "progabide": 1}


def main() -> None:
    with open(HERE / "epil_seizure_counts.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    cols = {
        "y": [int(r["y"]) for r in rows],
        "subject": [int(r["subject"]) for r in rows],
        "trt": [TRT[r["trt"]] for r in rows],
        "lbase": [float(r["lbase"]) for r in rows],
        "lage": [float(r["lage"]) for r in rows],
        "V4": [int(r["V4"]) for r in rows],
    }
    n = len(rows)
    j = max(cols["subject"])
    assert sorted(set(cols["subject"])) == list(range(1, j + 1))
    with open(HERE / "epil.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(list(cols))
        for i in range(n):
            w.writerow([repr(cols[c][i]) for c in cols])
    with open(HERE / "sizes.json", "w") as f:
        json.dump({"J": j}, f)
        f.write("\n")
    with open(HERE / "epil.json", "w") as f:
        json.dump({"N": n, "J": j, **cols}, f)
        f.write("\n")


if __name__ == "__main__":
    main()
