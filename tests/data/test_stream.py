"""--stream: a CSV read a chunk at a time (ppl.data.stream), minibatches drawn from the chunks
(StreamBatches), and the ELBO on a fixed sample of rows (sample_log_joint)."""

from __future__ import annotations

import numpy as np
import pytest

from ppl.data.build import build, build_streamed
from ppl.data.specs import data_specs, read_data
from ppl.errors import DataError, ModelError
from ppl.inference.subsample import Batches, StreamBatches, SubsampledLogJoint, sample_log_joint
from ppl.language.checker import check
from ppl.language.frontend import load_model
from ppl.language.parser import parse
from ppl.pipeline import fit
from ppl.runtime.compiler import CompiledModel
from tests.cli.test_cli import run_main

REGRESSION = """
data { int N; vector[N] x; vector[N] y; }
parameters { real a; real b; }
model { a ~ normal(0, 1); b ~ normal(0, 1); y ~ normal(a + b * x, 1); }
"""


def _write(tmp_path, n=1000, seed=3, name="rows.csv", model=REGRESSION):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    y = 0.5 + 1.5 * x + rng.standard_normal(n)
    path = tmp_path / name
    rows = zip(x.tolist(), y.tolist(), strict=True)
    path.write_text("x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in rows))
    model_path = tmp_path / "m.model"
    model_path.write_text(model)
    return str(model_path), str(path), x, y


def test_scan_counts_checks_and_samples_rows(tmp_path):
    model_path, csv, x, y = _write(tmp_path, n=1000)
    model, stream = build_streamed(model_path, [csv], chunk_rows=300, keep=100)
    assert stream.rows == 1000
    assert [c.rows for c in stream.chunks] == [300, 300, 300, 100]
    assert int(model.data["N"]) == 100
    # the sample is 100 distinct rows of the file, pairs kept together
    pairs = {(a, b) for a, b in zip(x, y, strict=True)}
    sample = list(zip(model.data["x"], model.data["y"], strict=True))
    assert len(set(sample)) == 100 and set(sample) <= pairs
    # a chunk read again is exactly those rows of the whole file
    third = stream.read(stream.chunks[2])
    np.testing.assert_array_equal(third["x"], x[600:900])
    assert int(third["N"]) == 300


def test_sample_of_rows_is_uniform(tmp_path):
    """Bottom-k of uniform keys across chunks: every row is kept with probability keep / N."""
    model_path, csv, x, _ = _write(tmp_path, n=200)
    order = {v: i for i, v in enumerate(x)}
    counts = np.zeros(200)
    for seed in range(300):
        model, _ = build_streamed(model_path, [csv], chunk_rows=70, keep=50, seed=seed)
        counts[[order[v] for v in model.data["x"]]] += 1
    # each count is Binomial(300, 1/4): mean 75, sd 7.5; chunk thirds must not differ
    thirds = [counts[:70].mean(), counts[70:140].mean(), counts[140:].mean()]
    assert np.allclose(thirds, 75, atol=3.0)
    assert counts.min() > 75 - 5 * 7.5 and counts.max() < 75 + 5 * 7.5


def test_bad_cell_in_a_later_chunk_is_reported_at_its_row_before_fitting(tmp_path):
    model_path, csv, _, _ = _write(tmp_path, n=1000)
    lines = open(csv).read().splitlines()
    lines[1 + 736] = "0.5,oops"  # data row 737
    open(csv, "w").write("\n".join(lines) + "\n")
    whole = pytest.raises(DataError)
    with whole as whole_error:
        build(model_path, [csv])
    with pytest.raises(DataError) as chunked_error:
        build_streamed(model_path, [csv], chunk_rows=300)
    assert "row 737" in str(chunked_error.value)
    assert str(chunked_error.value) == str(whole_error.value)


def test_stream_needs_one_csv_and_checks_a_given_row_count(tmp_path):
    model_path, csv, _, _ = _write(tmp_path, n=50)
    with pytest.raises(DataError, match="one CSV"):
        build_streamed(model_path, [csv, csv])
    with pytest.raises(DataError, match="missing.csv: data file not found"):
        build_streamed(model_path, [str(tmp_path / "missing.csv")])
    with pytest.raises(DataError, match="has 50 rows"):
        build_streamed(model_path, [csv], sets={"N": "40"})
    model, stream = build_streamed(model_path, [csv], sets={"N": "50"}, chunk_rows=20, keep=10)
    assert stream.rows == 50


@pytest.mark.slow
def test_stream_minibatches_are_unbiased_over_passes(tmp_path):
    """Chunks in random order, n / B batches from each (stochastically rounded, the last chunk
    is short): the average minibatch log joint is the full-data one."""
    model_path, csv, _, _ = _write(tmp_path, n=230)
    model, stream = build_streamed(model_path, [csv], chunk_rows=100, keep=40)
    full = build(model_path, [csv])
    estimate = SubsampledLogJoint(StreamBatches(model, 16, np.random.default_rng(1), stream))
    zeta = np.array([[0.2, 1.1], [-0.5, 2.0]])
    values = np.array([estimate(zeta) for _ in range(6000)])
    se = values.std(axis=0, ddof=1) / np.sqrt(len(values))
    assert np.all(np.abs(values.mean(axis=0) - full.log_joint(zeta)) < 4.5 * se)


@pytest.mark.slow
def test_elbo_sample_log_joint_is_unbiased_over_samples():
    """The fixed sample of rows weighted N / m: unbiased over the choice of rows; exact when
    the sample would be all rows."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(120)
    model = CompiledModel(
        check(parse(REGRESSION, "t.model")),
        {"N": np.array(120), "x": x, "y": 0.5 + 1.5 * x + rng.standard_normal(120)},
    )
    zeta = np.array([[0.2, 1.1]])
    batches = Batches(model, 10, rng)
    exact, used = sample_log_joint(model, batches, 500, rng)
    assert used == 120 and exact(zeta)[0] == model.log_joint(zeta)[0]
    values = []
    for seed in range(3000):
        lj, used = sample_log_joint(model, batches, 30, np.random.default_rng(seed))
        values.append(lj(zeta)[0])
    assert used == 30
    se = np.std(values, ddof=1) / np.sqrt(len(values))
    assert abs(np.mean(values) - model.log_joint(zeta)[0]) < 4.5 * se


def test_row_wise_transformed_data_streams_and_summaries_are_refused(tmp_path):
    row_wise = REGRESSION.replace(
        "parameters", "transformed data { vector[N] x2 = 2 * x; } parameters"
    ).replace("b * x", "b * x2 / 2")
    model_path, csv, _, _ = _write(tmp_path, n=300, model=row_wise)
    model, stream = build_streamed(model_path, [csv], chunk_rows=100, keep=60)
    StreamBatches(model, 10, np.random.default_rng(0), stream)  # accepted
    centred = REGRESSION.replace(
        "parameters", "transformed data { vector[N] xc = x - mean(x); } parameters"
    ).replace("b * x", "b * xc")
    model_path, csv, _, _ = _write(tmp_path, n=300, model=centred)
    model, stream = build_streamed(model_path, [csv], chunk_rows=100, keep=60)
    with pytest.raises(ModelError, match="transformed data 'xc' depends on the rows together"):
        StreamBatches(model, 10, np.random.default_rng(0), stream)


def test_streamed_dsvi_matches_the_exact_posterior(tmp_path):
    """Conjugate regression (known noise), 4000 rows streamed in chunks of 500: the closed-form
    posterior. Over seeds 0-4 the worst errors were 0.63 sd (means) and 15% (sds); with N / B = 40
    the relative ELBO change falls below Stan's 0.01 long before q settles, hence 1e-4."""
    model_path, csv, x, y = _write(tmp_path, n=4000)
    X = np.column_stack([np.ones_like(x), x])
    cov = np.linalg.inv(np.eye(2) + X.T @ X)
    mean = cov @ X.T @ y
    model, stream = build_streamed(model_path, [csv], chunk_rows=500, keep=1000)
    result = fit(model, "dsvi", batch=100, stream=stream, seed=1, tol_rel_obj=1e-4, draws=20000)
    assert result.elbo_rows == (1000, 4000)
    sd = np.sqrt(np.diag(cov))
    got = np.array([result.draws["a"].mean(), result.draws["b"].mean()])
    assert np.all(np.abs(got - mean) / sd < 0.75)
    got_sd = np.array([result.draws["a"].std(), result.draws["b"].std()])
    assert np.all(np.abs(got_sd / sd - 1) < 0.2)


def test_cli_stream(tmp_path):
    model_path, csv, _, _ = _write(tmp_path, n=600)
    rc, out, err = run_main(
        ["fit", model_path, csv, "--method", "dsvi", "--batch", "50", "--stream",
         "--chunk-rows", "200", "--quiet"]
    )  # fmt: skip
    assert rc == 0, err
    assert "from 3 chunks of up to 200 rows" in out
    rc, _, err = run_main(["fit", model_path, csv, "--method", "dsvi", "--stream"])
    assert rc == 2 and "--stream" in err and "--batch" in err
    rc, _, err = run_main(
        ["fit", model_path, csv, "--method", "dsvi", "--batch", "50", "--stream",
         "--chunk-rows", "20"]
    )  # fmt: skip
    assert rc == 2 and "--chunk-rows 20 must be at least --batch 50" in err


def test_data_specs_unchanged_by_stream(tmp_path):
    """The streamed model's data are the whole-file reader's, restricted to the sampled rows."""
    model_path, csv, _, _ = _write(tmp_path, n=40)
    model, _ = build_streamed(model_path, [csv], chunk_rows=15, keep=100)
    whole = read_data(load_model(model_path), [csv])
    assert set(model.data) == {s.name for s in data_specs(load_model(model_path))}
    for name, value in whole.items():
        np.testing.assert_array_equal(model.data[name], value)


def test_default_road_on_every_streamed_row_is_the_in_memory_fit(tmp_path):
    """--stream without --batch: every pass sums every chunk's rows (ppl.inference.full_data,
    the chunks read back from their binary copy), so the fit is the in-memory fit's up to the
    order of float summation; the copy is removed with the stream."""
    model_path, csv, x, y = _write(tmp_path, n=1000)
    model, stream = build_streamed(model_path, [csv], chunk_rows=300, keep=100, binary=True)
    streamed = fit(model, "auto", seed=4, draws=500, stream=stream)
    whole = fit(build(model_path, [csv]), "auto", seed=4, draws=500)
    assert len(stream.chunks) == 4 and streamed.model.log_joint.passes > 5
    for name in ("a", "b"):
        np.testing.assert_allclose(streamed.draws[name], whole.draws[name], rtol=1e-8, atol=1e-10)
    copy = stream.binary
    assert copy.is_dir() and len(list(copy.iterdir())) == 8  # x and y of 4 chunks
    del stream, streamed, model
    import gc

    gc.collect()
    assert not copy.exists()


def test_stream_cli_default_road_reports_rows_chunks_and_passes(tmp_path):
    model_path, csv, x, y = _write(tmp_path, n=1000)
    rc, out, err = run_main(["fit", model_path, csv, "--stream", "--chunk-rows", "300",
                             "--quiet", "--output", str(tmp_path / "out")])  # fmt: skip
    assert rc == 0, err
    assert "every one of 1000 rows, read in 4 chunks of up to 300 rows at each of" in out


def test_streamed_default_road_interrupted_resumes_to_the_same_numbers(tmp_path):
    """--checkpoint on the streamed default road keeps every pass's sums; a signal saves them
    and stops; the resumed fit replays them without reading the chunks and ends in the
    uninterrupted fit's numbers, bit for bit."""
    import signal

    from ppl.inference.checkpoint import Checkpointer, Interrupted, load

    model_path, csv, x, y = _write(tmp_path, n=1000)
    model, stream = build_streamed(model_path, [csv], chunk_rows=300, keep=100, binary=True)
    whole = fit(model, "auto", seed=4, draws=300, stream=stream)
    path, tag = tmp_path / "road.ckpt", {"test": "stream"}
    first = Checkpointer(path, every=3, fingerprint=tag)

    def interrupt(iteration, value):
        if iteration >= 3:
            first.stop_signal = signal.SIGINT  # what the SIGINT handler does

    with pytest.raises(Interrupted):
        fit(model, "auto", seed=4, draws=300, stream=stream, progress=interrupt, checkpoint=first)
    payload = load(path, tag)
    assert len(payload["state"]["passes"]) >= 3
    again = Checkpointer(path, every=3, fingerprint=tag, resume=payload)
    resumed = fit(model, "auto", seed=4, draws=300, stream=stream, checkpoint=again)
    for name in ("a", "b"):
        np.testing.assert_array_equal(resumed.draws[name], whole.draws[name])


def test_the_row_count_given_in_json_beside_the_stream_is_checked_not_used(tmp_path):
    """`int<lower=1> N` given in a JSON file beside the CSV: each chunk has its own rows, so a
    count is checked against the file's (it was taken as every chunk's N: "x has 300 rows but
    N = 1000"), and a wrong one names where it came from."""
    bounded = REGRESSION.replace("int N;", "int<lower=1> N;")
    model_path, csv, x, y = _write(tmp_path, n=1000, model=bounded)
    right, wrong = tmp_path / "n.json", tmp_path / "bad.json"
    right.write_text('{"N": 1000}')
    wrong.write_text('{"N": 999}')
    model, stream = build_streamed(model_path, [csv, str(right)], chunk_rows=300, keep=100,
                                   binary=True)  # fmt: skip
    assert stream.rows == 1000 and len(stream.chunks) == 4
    fit(model, "auto", seed=1, draws=100, stream=stream)
    with pytest.raises(DataError, match=r"bad\.json: N = 999, but .* has 1000 rows"):
        build_streamed(model_path, [csv, str(wrong)], chunk_rows=300, keep=100)
