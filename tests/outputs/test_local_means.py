"""local_means.csv (ppl.outputs.local_means): when `--method svi` keeps the local latents as
per-row means, `ppl fit --output` writes them, equal to fit.local_means of the same seed, said
in fit.json and on the console; when the locals are drawn, no such file (draws.csv has them)."""

from __future__ import annotations

import csv
import json
from types import SimpleNamespace

import numpy as np
import pytest

import ppl
from ppl.outputs.files import MANIFEST
from ppl.outputs.local_means import local_means_csv, local_means_record
from tests.cli.test_cli import run_main

# BPFA (models/bpfa/bpfa_patches.model) at a tiny size: binary Z, slab W, both [N, K]
BPFA = """
data { int<lower=1> N; int<lower=1> P; int<lower=1> K; matrix[N, P] Y; }
parameters {
  matrix[K, P] Phi;
  matrix[N, K] W;
  array[N, K] int<lower=0, upper=1> Z;
  vector<lower=0, upper=1>[K] pi;
  real<lower=0> gamma_obs;
}
model {
  matrix[N, P] mu = (to_matrix(Z) .* W) * Phi;
  to_vector(Phi) ~ normal(0, 1);
  to_vector(W) ~ normal(0, 1);
  pi ~ beta(1, 1);
  for (k in 1:K) Z[:, k] ~ bernoulli(pi[k]);
  gamma_obs ~ gamma(1, 1);
  to_vector(Y) ~ normal(to_vector(mu), inv_sqrt(gamma_obs));
}
"""
N, P, K = 30, 4, 3
FIT = dict(method="svi", batch=10, iterations=5, seed=1, draws=20)

# a positive per-row latent beside a binary one (the svi road's locals)
POSITIVE = """
data { int<lower=1> N; vector[N] y; }
parameters {
  real mu;
  vector<lower=0>[N] s;
  array[N] int<lower=0, upper=1> z;
}
model {
  mu ~ normal(0, 3);
  s ~ lognormal(0, 0.5);
  z ~ bernoulli(0.5);
  y ~ normal(mu + to_vector(z) * 2, s);
}
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bpfa")
    rng = np.random.default_rng(0)
    Y = (rng.uniform(size=(N, K)) < 0.5) * rng.standard_normal((N, K)) @ rng.standard_normal(
        (K, P)
    ) + 0.1 * rng.standard_normal((N, P))
    (d / "bpfa.model").write_text(BPFA)
    (d / "bpfa.json").write_text(json.dumps({"N": N, "P": P, "K": K, "Y": Y.tolist()}))
    return d


def _cli(d, out: str, *extra: str) -> tuple[int, str, str]:
    return run_main(["fit", str(d / "bpfa.model"), str(d / "bpfa.json"), "--method", "svi",
                     "--batch", "10", "--iter", "5", "--seed", "1", "--draws", "20",
                     "--output", str(d / out), *extra])  # fmt: skip


def _read(path) -> tuple[list[str], np.ndarray]:
    with open(path, newline="") as f:
        rows = list(csv.reader(line for line in f if not line.startswith("#")))
    return rows[0], np.array(rows[1:], dtype=float)


def test_cli_writes_the_per_row_means_of_the_same_fit(files):
    rc, out, err = _cli(files, "means", "--local-draws", "means")
    assert rc == 0, err
    header, table = _read(files / "means" / "local_means.csv")
    # declaration order (W before Z), then the product of each binary latent and its slab
    assert header == ["row__", "W.1", "W.2", "W.3", "Z.1", "Z.2", "Z.3", "Z*W.1", "Z*W.2", "Z*W.3"]
    assert table.shape == (N, 1 + 3 * K)
    assert table[:, 0].tolist() == list(range(1, N + 1))
    fit = ppl.Model(BPFA).fit(json.loads((files / "bpfa.json").read_text()), quiet=True,
                              local_draws="means", **FIT)  # fmt: skip
    got = {}
    for key, label in [("W", "W"), ("Z", "Z"), ("Z .* W", "Z*W")]:
        cols = [header.index(f"{label}.{k}") for k in range(1, K + 1)]
        got[key] = table[:, cols]
        assert fit.local_means(key).shape == (N, K)
        np.testing.assert_array_equal(got[key], fit.local_means(key))
    # the binary means are averages of 3 draws of 0/1, and E[Z * W] is 0 where Z never was 1
    assert set(np.unique(got["Z"] * 3).round(9)) <= {0.0, 1.0, 2.0, 3.0}
    assert np.all(got["Z .* W"][got["Z"] == 0] == 0)
    info = json.loads((files / "means" / "fit.json").read_text())["local_means"]
    assert info["file"] == "local_means.csv" and info["rows"] == N
    assert info["columns"] == 1 + 3 * K
    assert info["latents"]["Z .* W"]["shape"] == [N, K]
    assert "E[Z[n, k] * W[n, k]]" in info["latents"]["Z .* W"]["holds"]
    assert "local_means.csv" in json.loads((files / "means" / MANIFEST).read_text())["files"]
    assert "local_means.csv, 30 rows x 10 columns" in out
    # without --output the console says where they would be
    rc, out, err = run_main(["fit", str(files / "bpfa.model"), str(files / "bpfa.json"),
                             "--method", "svi", "--batch", "10", "--iter", "5",
                             "--local-draws", "means"])  # fmt: skip
    assert rc == 0, err
    assert "local latents (W, Z, Z .* W) kept as per-row means, not in the table: " \
        "local_means.csv with --output DIR" in out  # fmt: skip


def test_no_file_when_the_locals_are_drawn(files):
    rc, out, err = _cli(files, "all", "--local-draws", "all")
    assert rc == 0, err
    assert not (files / "all" / "local_means.csv").exists()
    assert "local latents" not in out
    header, table = _read(files / "all" / "draws.csv")  # the draws hold them instead
    assert "Z.30.3" in header and "W.1.1" in header and table.shape[0] == 20
    assert json.loads((files / "all" / "fit.json").read_text())["local_means"] is None


def test_a_previous_fits_file_goes_with_its_set(files, tmp_path):
    # into a directory holding other files (written file by file): a means fit, then a fit
    # that draws its locals; the first fit's local_means.csv must not stay beside the second's
    (tmp_path / "notes.txt").write_text("mine")
    args = [str(files / "bpfa.model"), str(files / "bpfa.json"), "--output", str(tmp_path)]
    args += "--method svi --batch 10 --iter 5 --seed 1 --draws 20".split()
    assert run_main(["fit", *args, "--local-draws", "means"])[0] == 0
    assert (tmp_path / "local_means.csv").exists()
    assert run_main(["fit", *args, "--local-draws", "all"])[0] == 0
    assert not (tmp_path / "local_means.csv").exists()
    assert (tmp_path / "notes.txt").read_text() == "mine"
    listed = json.loads((tmp_path / MANIFEST).read_text())["files"]
    assert "local_means.csv" not in listed and "draws.csv" in listed


def test_a_users_file_of_that_name_is_not_replaced(files, tmp_path):
    (tmp_path / "local_means.csv").write_text("mine")
    rc, _, err = run_main(["fit", str(files / "bpfa.model"), str(files / "bpfa.json"),
                           "--method", "svi", "--batch", "10", "--iter", "5",
                           "--local-draws", "means", "--output", str(tmp_path)])  # fmt: skip
    assert (
        rc == 2 and "local_means.csv" in err
    )  # before the fit, not after it and "--overwrite" in err
    assert (tmp_path / "local_means.csv").read_text() == "mine"


def test_columns_in_stans_order_and_float32_read_back():
    # a per-row [2, 3] latent laid out row-major within the row; the columns go first index
    # fastest (s.1.1, s.2.1, s.1.2, ...), as CmdStan's; float32 means read back exactly
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    lat = SimpleNamespace(name="s", ushape=(4, 2, 3))
    result = SimpleNamespace(vi=SimpleNamespace(summarised=True, local_means={"s": x}),
                             model=SimpleNamespace(latents=[lat]))  # fmt: skip
    lines = local_means_csv(result).decode().splitlines()
    header = lines[0].split(",")
    assert header == ["row__", "s.1.1", "s.2.1", "s.1.2", "s.2.2", "s.1.3", "s.2.3"]
    table = np.array([line.split(",") for line in lines[1:]], dtype=np.float32)
    per_row = x.reshape(4, 2, 3)
    for c, name in enumerate(header[1:], start=1):
        k, j = (int(i) - 1 for i in name.split(".")[1:])
        np.testing.assert_array_equal(table[:, c], per_row[:, k, j])
    record = local_means_record(result)
    assert record["latents"]["s"]["holds"].startswith("row n's column s.k.j: E[s[n, k, j]]")
    assert "float32" in record["holds"]
    result.vi.summarised = False  # drawn: no file
    assert local_means_csv(result) is None and local_means_record(result) is None


def test_the_file_is_made_block_by_block(monkeypatch):
    # written as it is made (at the paper's BPFA scale it is about 1.8 GB): the parts are blocks
    # of rows, and together they are the whole file
    import ppl.outputs.local_means as lm

    monkeypatch.setattr(lm, "_BLOCK", 9)  # 3 rows of 3 columns
    x = np.arange(20.0).reshape(10, 2) / 7
    result = SimpleNamespace(vi=SimpleNamespace(summarised=True, local_means={"z": x}),
                             model=SimpleNamespace(latents=[]))  # fmt: skip
    parts = list(lm.local_means_parts(result))
    assert len(parts) == 1 + 4  # the header, then 10 rows in blocks of 3
    lines = b"".join(parts).decode().splitlines()
    assert lines[0] == "row__,z.1,z.2" and len(lines) == 11
    back = np.array([line.split(",") for line in lines[1:]], dtype=float)
    np.testing.assert_array_equal(back[:, 1:], x)


def test_a_bounded_local_latent_has_means_of_itself_not_of_its_log():
    # the Gibbs state is unconstrained (log s for vector<lower=0>[N] s); the per-row means must
    # be of s (positive), never the raw log
    model = ppl.Model(POSITIVE)
    y = np.array([0.3, -1.2, 2.5, 0.1, 1.9, -0.4, 2.2, 0.0])
    fit = model.fit({"N": 8, "y": y}, method="svi", batch=4, iterations=20, seed=1, draws=10,
                    quiet=True, local_draws="means", samples=50)  # fmt: skip
    s = fit.local_means("s")
    assert s.shape == (8,) or s.shape == (8, 1)
    assert np.all(s > 0)
    record = local_means_record(fit.result)
    assert "unconstrained" not in json.dumps(record)
