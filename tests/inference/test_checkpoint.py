"""--checkpoint / --resume: a fit stopped by a signal writes its state, and resuming it gives the
uninterrupted run's result bit for bit, for every stochastic method (ppl.inference.checkpoint, the
loop in
ppl.inference.loop)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from ppl.data.build import build, build_streamed
from ppl.errors import ModelError
from ppl.inference.checkpoint import (
    Checkpointer,
    Interrupted,
    key_path,
    load,
    read_payload,
    write_atomic,
)
from ppl.pipeline import fit
from tests.cli.test_cli import NONCENTERED, SCHOOLS_JSON, run_main
from tests.data.test_stream import _write
from tests.inference.test_bbvi import COUPLED, COUPLED_DATA, _model

#: long enough (about 3 s) that a signal sent after the first checkpoint arrives mid-fit
SLOW = ["--method", "dsvi", "--batch", "100", "--iter", "4000", "--tol-rel-obj", "1e-12", "--quiet"]


def _ppl(*args, **kwargs):
    return subprocess.Popen(
        [sys.executable, "-m", "ppl.cli", "fit", *args], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, **kwargs,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_writes_a_checkpoint_and_resuming_gives_the_uninterrupted_fit(tmp_path, signum):
    model, csv, _, _ = _write(tmp_path, n=5000)
    whole = _ppl(model, csv, *SLOW, "--output", str(tmp_path / "whole"))
    ckpt = tmp_path / "fit.ckpt"
    stopped = _ppl(model, csv, *SLOW, "--output", str(tmp_path / "parts"), "--checkpoint",
                   str(ckpt), "--checkpoint-every", "500")  # fmt: skip
    deadline = time.monotonic() + 60
    # the first checkpoint is written at iteration 0
    while not ckpt.exists() and stopped.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    stopped.send_signal(signum)
    out, err = stopped.communicate(timeout=60)
    assert stopped.returncode == 128 + signum, err
    name = signal.Signals(signum).name
    assert f"stopped: {name} at iteration" in err and f"--resume {ckpt}" in err
    assert "Traceback" not in err and not (tmp_path / "parts").exists()
    assert not list(tmp_path.glob("*.tmp"))
    at = read_payload(ckpt)["state"]["loop"].k
    assert 0 < at < 4000

    resumed = _ppl(model, csv, *SLOW, "--output", str(tmp_path / "parts"), "--resume", str(ckpt))
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    assert "(resumed from it)" in out
    whole.communicate(timeout=120)
    assert whole.returncode == 0
    for name in ("summary.csv", "draws.csv", "elbo.csv"):
        assert (tmp_path / "parts" / name).read_text() == (tmp_path / "whole" / name).read_text()
    a = json.loads((tmp_path / "whole" / "fit.json").read_text())
    b = json.loads((tmp_path / "parts" / "fit.json").read_text())
    assert a["variational_parameters"] == b["variational_parameters"]
    assert a["gradient_evaluations"] == b["gradient_evaluations"]


def _interrupt_at(checkpointer, iteration, stage=0):
    """At `iteration` of the fit's loop number `stage` (from 0), ask it to stop."""

    def progress(k, elbo):
        if k == iteration and checkpointer.stages == stage + 1:
            checkpointer.stop_signal = signal.SIGINT  # what the handler does on Ctrl-C

    return progress


def _stop_and_resume(tmp_path, make_model, method, at, stage=0, **options):
    whole = fit(make_model(), method, **options)
    path = tmp_path / f"{method}.ckpt"
    first = Checkpointer(path, every=37)
    with pytest.raises(Interrupted):
        fit(make_model(), method, checkpoint=first, progress=_interrupt_at(first, at, stage),
            **options)  # fmt: skip
    again = Checkpointer(path, every=37, resume=load(path, {}))
    return whole, fit(make_model(), method, checkpoint=again, **options)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["meanfield", "fullrank"])
def test_advi_resumes_exactly_polish_included(tmp_path, method):
    whole, resumed = _stop_and_resume(
        tmp_path, lambda: build(NONCENTERED, [SCHOOLS_JSON]), method, 250, seed=3, tol_rel_obj=1e-4,
        iterations=2000,
    )  # fmt: skip
    assert resumed.refinement == whole.refinement
    np.testing.assert_array_equal(resumed.vi.mean, whole.vi.mean)
    np.testing.assert_array_equal(resumed.vi.scale_tril, whole.vi.scale_tril)
    assert resumed.vi.iterations == whole.vi.iterations and resumed.vi.warnings == whole.vi.warnings


def _same_fit(whole, resumed):
    """The same q, trace, counters, warnings and draws."""
    a, b = whole.vi, resumed.vi
    for name in ("mean", "scale_tril", "theta"):
        if hasattr(a, name):
            np.testing.assert_array_equal(getattr(b, name), getattr(a, name))
    assert b.elbo_trace == a.elbo_trace and b.elbo == a.elbo
    assert (b.iterations, b.grad_evals, b.converged) == (a.iterations, a.grad_evals, a.converged)
    assert b.warnings == a.warnings
    for name in whole.draws:
        np.testing.assert_array_equal(resumed.draws[name], whole.draws[name])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("method", "stage", "options"),
    [
        ("dsvi", 0, {"rank": "diag"}),
        # eight schools' tau is positive: BBVI fits a Gaussian phase, then the gamma one
        # moment-matched from it; interrupted in either
        ("bbvi", 0, {}),
        ("bbvi", 1, {}),
        # the SGVB road: ADVI's warm start (stage 0), its polish, then Adam (stage 1)
        ("auto", 1, {"optimizer": "adam", "refine_draws": 0}),
        ("auto", 1, {"optimizer": "adam"}),
    ],
)
def test_every_stochastic_method_resumes_exactly(tmp_path, method, stage, options):
    """Interrupted in its first loop or in a later one, the fit resumes to the uninterrupted
    result bit for bit."""
    whole, resumed = _stop_and_resume(
        tmp_path, lambda: build(NONCENTERED, [SCHOOLS_JSON]), method, 150, stage, seed=2,
        iterations=600, tol_rel_obj=1e-4, draws=100, **options,
    )  # fmt: skip
    _same_fit(whole, resumed)


@pytest.mark.slow
def test_binary_latents_mixed_fit_resumes_exactly(tmp_path):
    """auto with a binary latent: one stochastic loop, pathwise and score function together."""
    whole, resumed = _stop_and_resume(
        tmp_path, lambda: _model(COUPLED, COUPLED_DATA), "auto", 120, seed=1, iterations=600,
        tol_rel_obj=1e-4, draws=100,
    )  # fmt: skip
    _same_fit(whole, resumed)


def test_stream_resumes_exactly_mid_pass(tmp_path):
    """--stream's sampler state (chunk order, batches left, the chunk in memory) travels too."""
    model_path, csv, _, _ = _write(tmp_path, n=900)
    whole, resumed = _stop_and_resume(
        tmp_path, lambda: build_streamed(model_path, [csv], chunk_rows=200, keep=100)[0], "dsvi",
        130, seed=5, batch=50, iterations=400, tol_rel_obj=1e-9, draws=50,
        stream=build_streamed(model_path, [csv], chunk_rows=200, keep=100)[1],
    )  # fmt: skip
    np.testing.assert_array_equal(resumed.vi.mean, whole.vi.mean)
    np.testing.assert_array_equal(resumed.draws["a"], whole.draws["a"])


def test_resume_refuses_another_fit_and_unreadable_files(tmp_path):
    model, csv, _, _ = _write(tmp_path, n=300)
    ckpt = tmp_path / "fit.ckpt"
    base = ["fit", model, csv, "--method", "dsvi", "--iter", "300", "--quiet"]
    assert run_main([*base, "--checkpoint", str(ckpt), "--seed", "1"])[0] == 0
    assert ckpt.exists()
    rc, _, err = run_main([*base, "--resume", str(ckpt), "--seed", "2"])
    assert rc == 2 and "other inputs" in err and "seed: 1 then, 2 now" in err
    (tmp_path / "junk").write_bytes(b"not a checkpoint")
    rc, _, err = run_main([*base, "--resume", str(tmp_path / "junk")])
    assert rc == 2 and "not a ppl checkpoint" in err
    rc, _, err = run_main([*base, "--resume", str(tmp_path / "none")])
    assert rc == 2 and "no such checkpoint file" in err


class _Marker:
    """Unpickling this creates a file: what a crafted checkpoint would do to run code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_a_crafted_checkpoint_is_refused_without_running_its_code(tmp_path):
    model, csv, _, _ = _write(tmp_path, n=300)
    base = ["fit", model, csv, "--method", "dsvi", "--iter", "300", "--quiet"]
    marker = tmp_path / "marker"
    payload = pickle.dumps({"format": "ppl-checkpoint/2", "x": _Marker(marker)})
    real = tmp_path / "real.ckpt"
    assert run_main([*base, "--checkpoint", str(real)])[0] == 0
    header = real.read_bytes()[: len(b"ppl-checkpoint/2 hmac-sha256\n") + 32]
    for name, blob in [
        ("bare.ckpt", payload),  # an old-style pickle
        ("forged.ckpt", b"ppl-checkpoint/2 hmac-sha256\n" + b"\0" * 32 + payload),
        ("spliced.ckpt", header + payload),  # a real signature over other bytes
    ]:
        (tmp_path / name).write_bytes(blob)
        rc, _, err = run_main([*base, "--resume", str(tmp_path / name)])
        assert rc == 2 and "not a ppl checkpoint" in err, err
        assert not marker.exists()
    assert key_path().stat().st_mode & 0o777 == 0o600


def test_a_key_others_can_read_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "signed"
    Checkpointer(path).save(0, {})
    assert read_payload(path)["format"] == "ppl-checkpoint/2"
    key_path().chmod(0o644)
    with pytest.raises(Exception, match="must belong to you and be private"):
        read_payload(path)


def test_auto_default_road_has_no_loop_to_checkpoint(tmp_path):
    model, csv, _, _ = _write(tmp_path, n=100)
    rc, _, err = run_main(["fit", model, csv, "--checkpoint", str(tmp_path / "c")])
    assert rc == 2 and "deterministic road" in err and "--optimizer or --no-polish" in err
    with pytest.raises(ModelError, match="checkpoints work with --method advi"):
        fit(build(model, [csv]), "auto", checkpoint=Checkpointer(tmp_path / "c"))


def test_write_atomic_leaves_the_old_file_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "state"
    write_atomic(path, b"first")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(Exception, match="No space left"):
        write_atomic(path, b"second")
    assert path.read_bytes() == b"first"


def test_a_stop_request_during_the_step_size_search_ends_it_at_once(tmp_path):
    """Ctrl-C under --checkpoint while Stan's eta grid is searched (5 trials of 50 iterations;
    on 10^5 rows 6-8 s) stops at the next trial iteration, not after the search, and writes no
    checkpoint (there is nothing to resume from)."""
    model = build(NONCENTERED, [SCHOOLS_JSON], seed=1)
    path = tmp_path / "fit.ckpt"
    stop = Checkpointer(path, every=50, fingerprint={"test": "eta"})
    stop.stop_signal = signal.SIGINT  # what the handler does on Ctrl-C
    with pytest.raises(Interrupted, match="during the step-size search") as stopped:
        fit(model, "advi", seed=1, checkpoint=stop)
    assert stopped.value.exit_code == 130 and not path.exists()


def test_a_signal_after_the_loop_stops_at_once(tmp_path):
    """Under --checkpoint the first Ctrl-C asks the loop to stop after its iteration; once the
    loop has ended (the polish, the PSIS check and the outputs follow) there is no iteration to
    wait for, so it stops at once (it was ignored until the fit's end)."""
    from ppl.inference.checkpoint import stop_on_signals

    model = build(NONCENTERED, [SCHOOLS_JSON], seed=1)
    checkpoint = Checkpointer(tmp_path / "fit.ckpt", every=50, fingerprint={"test": "after"})
    with stop_on_signals(checkpoint):
        fit(model, "advi", seed=1, checkpoint=checkpoint, refine_draws=0)
        assert checkpoint.between_loops and checkpoint.stop_signal is None
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
