"""--engine dask on a LocalCluster of 2 worker processes (loopback only): the default road on
every row, summed on the workers, against the in-memory fit; DSVI's minibatch gradients
against the single-process fit; a worker killed mid-fit; interrupt and resume."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

from ppl.data.build import build  # noqa: E402
from ppl.distributed.build import build_distributed  # noqa: E402
from ppl.errors import DataError  # noqa: E402
from ppl.inference.checkpoint import Checkpointer, Interrupted, load  # noqa: E402
from ppl.pipeline import fit  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "models" / "logistic_regression" / "fixed_prior.model")
ROWS, FILES, K = 8000, 4, 3
#: A fixed step size skips the 250-step adaptation: every step is a Dask round trip (~25 ms
#: on 2 cores), and the comparison needs the same algorithm on both sides, not a tuned one.
OPTIONS = dict(batch=400, iterations=400, tol_rel_obj=1e-9, eta=1.0, draws=10)


def _rows(n: int, rng: np.random.Generator) -> pd.DataFrame:
    X = rng.standard_normal((n, K))
    p = 1.0 / (1.0 + np.exp(-(0.3 + X @ np.array([1.0, -0.5, 0.25]))))
    y = (rng.random(n) < p).astype(np.int64)
    return pd.DataFrame({"y": y, **{f"X.{j + 1}": X[:, j] for j in range(K)}})


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """The same rows as 4 Parquet files and as one CSV file."""
    root = tmp_path_factory.mktemp("rows")
    rng = np.random.default_rng(3)
    parts = [_rows(ROWS // FILES, rng) for _ in range(FILES)]
    for i, part in enumerate(parts):
        part.to_parquet(root / f"part-{i}.parquet", index=False)
    pd.concat(parts).to_csv(root / "all.csv", index=False)
    return root


@pytest.fixture(scope="module")
def client():
    from ppl.distributed.cluster import connect

    with connect(workers=2) as c:
        yield c


@pytest.fixture(scope="module")
def distributed(client, dataset):
    return build_distributed(MODEL, [str(dataset / "part-*.parquet")], {}, 1, client)


@pytest.fixture(scope="module")
def single_process(dataset):
    """Single-process fits with 6 seeds: their mean, and the seed-to-seed sd of q's mean (the
    Monte Carlo error of one fit)."""
    means = []
    for seed in range(6):
        model = build(MODEL, [str(dataset / "all.csv")], seed=seed)
        means.append(fit(model, "dsvi", seed=seed, **OPTIONS).vi.mean)
    means = np.array(means)
    return means.mean(axis=0), means.std(axis=0, ddof=1)


def _within_mc_error(mean, single_process):
    """|difference| < 4 sd of the difference of two independent fits (sd sqrt(2) x one's);
    the averaged reference's own error is smaller still."""
    center, sd = single_process
    z = np.abs(mean - center) / (np.sqrt(2.0) * sd)
    assert np.all(z < 4.0), f"differences in Monte Carlo sds: {np.round(z, 2)}"


@pytest.mark.slow
def test_two_workers_match_the_single_process_fit(distributed, single_process):
    model, partitions = distributed
    assert partitions.rows == ROWS and len(partitions.files) == FILES
    result = fit(model, "dsvi", seed=1, partitions=partitions, **OPTIONS)
    _within_mc_error(result.vi.mean, single_process)
    # and the posterior, not just each other: the data's generating weights within 4 q sds
    truth = np.array([0.3, 1.0, -0.5, 0.25])
    assert np.all(np.abs(result.vi.mean - truth) < 4 * result.vi.sd + 0.05)


@pytest.mark.slow
def test_a_worker_killed_mid_fit_is_replaced_and_the_fit_goes_on(
    client, distributed, single_process
):
    model, partitions = distributed
    before = client.run(os.getpid)
    killed = {}

    def kill_one(iteration, elbo):
        if iteration == 150 and not killed:
            address, pid = sorted(before.items())[0]
            os.kill(pid, signal.SIGKILL)
            killed[address] = pid

    result = fit(model, "dsvi", seed=2, partitions=partitions, progress=kill_one, **OPTIONS)
    assert killed and result.vi.iterations == OPTIONS["iterations"]
    _within_mc_error(result.vi.mean, single_process)
    client.wait_for_workers(2, timeout=60)
    after = client.run(os.getpid)
    assert set(killed.values()).isdisjoint(after.values())  # the nanny started a new process


def test_full_data_log_joint_gradient_and_hessian_products_are_the_in_memory_ones(
    distributed, dataset
):
    """The workers' sums (value, gradient, Hessian-vector products: the last through the
    primitive's own vjp, reverse over reverse) against the whole data in one process."""
    import autograd.numpy as anp
    from autograd import value_and_grad

    from ppl.distributed.gradient import full_data_log_joint
    from ppl.inference.hessian import batched_hvp

    model, partitions = distributed
    whole = full_data_log_joint(partitions, model)
    memory = build(MODEL, [str(dataset / "all.csv")], seed=1).log_joint
    rng = np.random.default_rng(0)
    zeta, v = 0.3 * rng.standard_normal((5, K + 1)), rng.standard_normal((5, K + 1))
    value, gradient = value_and_grad(lambda z: anp.sum(whole(z)))(zeta)
    value0, gradient0 = value_and_grad(lambda z: anp.sum(memory(z)))(zeta)
    assert np.isclose(value, value0, rtol=1e-12)
    np.testing.assert_allclose(gradient, gradient0, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(batched_hvp(whole, zeta, v), batched_hvp(memory, zeta, v),
                               rtol=1e-10, atol=1e-9)  # fmt: skip
    assert whole.passes == 3  # the value and its gradient in one pass; each product one more


@pytest.fixture(scope="module")
def full_data_fit(distributed):
    model, partitions = distributed
    return fit(model, "auto", seed=1, partitions=partitions)


def test_default_road_on_every_row_is_the_in_memory_fit(full_data_fit, dataset):
    """--engine dask without --batch: `auto` on the full-data log joint, each pass a sum over
    every row on the workers. The same road as in memory (the same gradient count, Hessian
    included), the same q up to the order of floating-point sums."""
    memory = fit(build(MODEL, [str(dataset / "all.csv")], seed=1), "auto", seed=1)
    assert full_data_fit.method == memory.method == "auto"
    assert full_data_fit.vi.grad_evals == memory.vi.grad_evals
    assert full_data_fit.model.log_joint.passes > 10
    for name in ("alpha", "beta"):
        np.testing.assert_allclose(full_data_fit.draws[name], memory.draws[name], rtol=1e-6,
                                   atol=1e-8)  # fmt: skip
    assert abs(full_data_fit.diagnostics["elbo"] - memory.diagnostics["elbo"]) < 1e-6


def test_a_worker_killed_on_the_default_road_changes_no_number(client, distributed,
                                                               full_data_fit):  # fmt: skip
    """A pass whose worker dies is run again where Dask moved the partition (recomputed from
    its file): the sums are ordered by partition, so the fit ends in the same numbers."""
    model, partitions = distributed
    before = client.run(os.getpid)
    killed = {}

    def kill_one(iteration, value):
        if iteration >= 3 and not killed:
            address, pid = sorted(before.items())[0]
            os.kill(pid, signal.SIGKILL)
            killed[address] = pid

    result = fit(model, "auto", seed=1, partitions=partitions, progress=kill_one)
    assert killed
    for name in ("alpha", "beta"):
        np.testing.assert_array_equal(result.draws[name], full_data_fit.draws[name])
    client.wait_for_workers(2, timeout=60)


def test_default_road_interrupted_resumes_from_its_passes_to_the_same_numbers(
    distributed, full_data_fit, tmp_path
):
    """--checkpoint on the default road over partitions: every pass's sums are kept; a signal
    writes them and stops; the resumed fit replays them without the workers and goes on, to
    the uninterrupted fit's numbers, bit for bit."""
    model, partitions = distributed
    path = tmp_path / "road.ckpt"
    first = Checkpointer(path, every=5, fingerprint=_fingerprint())

    def interrupt(iteration, value):
        if iteration >= 4:
            first.stop_signal = signal.SIGINT  # what the SIGINT handler does

    with pytest.raises(Interrupted) as stopped:
        fit(model, "auto", seed=1, partitions=partitions, progress=interrupt, checkpoint=first)
    assert stopped.value.exit_code == 130 and " at pass " in str(stopped.value)
    payload = load(path, _fingerprint())
    saved = len(payload["state"]["passes"])
    assert saved >= 4
    again = Checkpointer(path, every=5, fingerprint=_fingerprint(), resume=payload)
    resumed = fit(model, "auto", seed=1, partitions=partitions, checkpoint=again)
    # the saved passes come from the checkpoint (and a pass asked twice from memory)
    assert 0 < resumed.model.log_joint.passes <= full_data_fit.model.log_joint.passes - saved
    for name in ("alpha", "beta"):
        np.testing.assert_array_equal(resumed.draws[name], full_data_fit.draws[name])


def _fingerprint():
    return {"test": "resume"}


@pytest.mark.slow
def test_interrupted_fit_resumes_to_the_uninterrupted_result(distributed, tmp_path):
    model, partitions = distributed
    whole = fit(model, "dsvi", seed=4, partitions=partitions, **OPTIONS)

    path = tmp_path / "fit.ckpt"
    first = Checkpointer(path, every=50, fingerprint=_fingerprint())

    def interrupt(iteration, elbo):
        if iteration == 130:
            first.stop_signal = signal.SIGINT  # what the SIGINT handler does

    with pytest.raises(Interrupted) as stopped:
        fit(model, "dsvi", seed=4, partitions=partitions, progress=interrupt,
            checkpoint=first, **OPTIONS)  # fmt: skip
    assert stopped.value.exit_code == 130 and "iteration 130" in str(stopped.value)
    assert path.exists() and not list(tmp_path.glob("*.tmp"))

    payload = load(path, _fingerprint())
    assert payload["state"]["loop"].k == 130
    again = Checkpointer(path, every=50, fingerprint=_fingerprint(), resume=payload)
    resumed = fit(model, "dsvi", seed=4, partitions=partitions, checkpoint=again, **OPTIONS)
    np.testing.assert_array_equal(resumed.vi.mean, whole.vi.mean)
    np.testing.assert_array_equal(resumed.vi.scale_tril, whole.vi.scale_tril)
    assert resumed.vi.elbo_trace == whole.vi.elbo_trace
    for name in whole.draws:
        np.testing.assert_array_equal(resumed.draws[name], whole.draws[name])


def test_csv_partitions_give_the_parquet_partitions_data(client, dataset, tmp_path):
    frames = [pd.read_parquet(dataset / f"part-{i}.parquet") for i in range(FILES)]
    for i, frame in enumerate(frames):
        frame.to_csv(tmp_path / f"part-{i}.csv", index=False)
    a, pa = build_distributed(MODEL, [str(tmp_path / "part-*.csv")], {}, 1, client)
    b, pb = build_distributed(MODEL, [str(dataset / "part-*.parquet")], {}, 1, client)
    assert list(pa.lengths) == list(pb.lengths) == [ROWS // FILES] * FILES
    for name in ("X", "y"):
        np.testing.assert_allclose(a.data[name], b.data[name], rtol=1e-15)


def test_bad_cell_in_a_partition_names_file_row_and_column(client, dataset, tmp_path):
    frame = pd.read_parquet(dataset / "part-1.parquet")
    frame.loc[41, "X.2"] = np.nan
    frame.to_parquet(tmp_path / "part-1.parquet", index=False)
    with pytest.raises(DataError, match=r'part-1\.parquet: row 42, column "X\.2": missing value'):
        build_distributed(MODEL, [str(tmp_path / "*.parquet")], {}, 1, client)
    text = pd.read_parquet(dataset / "part-0.parquet").astype(str)
    text.loc[7, "y"] = "yes"
    text.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError, match=r"bad\.csv: row 8, column \"y\": 'yes' is not a number"):
        build_distributed(MODEL, [str(tmp_path / "bad.csv")], {}, 1, client)


def test_files_of_rows_need_one_header(client, dataset, tmp_path):
    pd.read_parquet(dataset / "part-0.parquet").to_csv(tmp_path / "a.csv", index=False)
    narrow = pd.read_parquet(dataset / "part-1.parquet").drop(columns=["X.3"])
    narrow.to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(DataError, match=r"b\.csv: its columns \(y, X\.1, X\.2\) are not those"):
        build_distributed(MODEL, [str(tmp_path / "*.csv")], {}, 1, client)


def test_given_row_count_is_checked_and_globs_must_match(client, dataset):
    with pytest.raises(DataError, match=f"N = 10 was given, but the files have {ROWS} rows"):
        build_distributed(MODEL, [str(dataset / "*.parquet")], {"N": "10"}, 1, client)
    with pytest.raises(DataError, match="no file matches"):
        build_distributed(MODEL, [str(dataset / "nothing-*.parquet")], {}, 1, client)


def test_engine_options_are_checked_before_any_cluster_starts(monkeypatch):
    from tests.cli.test_cli import run_main

    rc, _, err = run_main(["fit", MODEL, "x.csv", "--engine", "dask", "--method", "dsvi"])
    assert rc == 2 and "or by DSVI's minibatches (--method dsvi --batch B)" in err
    rc, _, err = run_main(["fit", MODEL, "x.csv", "--engine", "dask", "--batch", "10"])
    assert rc == 2 and "--engine dask fits by the default road on every row" in err
    rc, _, err = run_main(["fit", MODEL, "x.csv", "--scheduler", "tcp://127.0.0.1:1"])
    assert rc == 2 and "options of --engine dask" in err
    monkeypatch.setitem(sys.modules, "distributed", None)  # as if Dask were not installed
    rc, _, err = run_main(["fit", MODEL, "x.csv", "--engine", "dask", "--method", "dsvi",
                           "--batch", "10"])  # fmt: skip
    assert rc == 2 and "pip install '.[dask]'" in err


def test_an_empty_partition_and_the_row_count_given_in_json_are_fine(client, dataset, tmp_path):
    """A file with a header and no rows, and N given beside the files (as Stan users do): no
    "N" error, and the fit is the one without them, to the order of float summation."""
    import shutil

    for i in range(FILES):
        shutil.copy(dataset / f"part-{i}.parquet", tmp_path / f"part-{i}.parquet")
    pd.read_parquet(dataset / "part-0.parquet").iloc[:0].to_parquet(
        tmp_path / "part-+empty.parquet", index=False  # sorts first: the first partition
    )
    sizes = tmp_path / "sizes.json"
    sizes.write_text(f'{{"N": {ROWS}}}')
    model, parts = build_distributed(MODEL, [str(tmp_path / "part-*.parquet"), str(sizes)], {},
                                     1, client)  # fmt: skip
    assert parts.rows == ROWS and 0 in list(parts.lengths)
    with_empty = fit(model, "auto", seed=1, partitions=parts)
    whole = fit(build(MODEL, [str(dataset / "all.csv")], seed=1), "auto", seed=1)
    for name in ("alpha", "beta"):
        np.testing.assert_allclose(with_empty.draws[name], whole.draws[name], rtol=1e-7)
