"""Issue 32: files ppl writes never follow a planted link and leave nothing a later run trusts
after kill -9; outputs never replace a file the fit read, nor (without --overwrite) one ppl did
not write; the output set is replaced as one unit under kill -9; modes follow the umask; the
checkpoint key is refused in a directory another user controls."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ppl import safefiles
from ppl.inference.checkpoint import CheckpointError, user_key, write_atomic
from ppl.outputs.files import MANIFEST, NAMES, ppl_files, write_all
from tests.cli.test_cli import NONCENTERED, SCHOOLS_JSON, run_main

ROOT = Path(__file__).resolve().parents[2]
ROOT_ONLY = pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0,
    reason="another user's file or directory needs root (chown to uid 65534)",
)


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# ---- every file written through a fresh temporary, renamed into place


def test_a_link_planted_at_the_old_temporary_name_is_not_followed(tmp_path):
    """The audit planted PATH.tmp -> victim; its target got the checkpoint's bytes."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    path = tmp_path / "fit.ckpt"
    (tmp_path / "fit.ckpt.tmp").symlink_to(victim)
    write_atomic(path, b"state")
    assert victim.read_bytes() == b"precious" and path.read_bytes() == b"state"


def test_a_link_at_the_target_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "fit.ckpt").symlink_to(victim)
    write_atomic(tmp_path / "fit.ckpt", b"state")
    assert victim.read_bytes() == b"precious"
    assert not (tmp_path / "fit.ckpt").is_symlink()
    assert (tmp_path / "fit.ckpt").stat().st_mode & 0o777 == 0o600  # the state is private


_WRITER = """
import sys
from pathlib import Path
from ppl.inference.checkpoint import write_atomic
path, i = Path(sys.argv[1]), 0
while True:
    i += 1
    write_atomic(path, (b"%d:" % i) * (1 + (i * 7919) % 200000))
"""


def test_kill_9_leaves_the_checkpoint_whole_and_the_next_write_removes_the_temporaries(tmp_path):
    """12 writers killed at random moments (the audit: stale .tmp files after 7 of 12): the file
    is always one write whole, and the next write removes what the killed ones left."""
    path = tmp_path / "fit.ckpt"
    rng = np.random.default_rng(0)
    left = 0
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(12):
        writer = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], env=env)
        deadline = time.monotonic() + 30
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.2))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        blob = path.read_bytes()
        head = blob.split(b":")[0]
        assert blob == (head + b":") * (1 + (int(head) * 7919) % 200000)  # one write, whole
        left += len(list(tmp_path.glob(".*.tmp")))
        write_atomic(path, b"next")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.ckpt"]
        path.unlink()
    print(f"temporaries left by 12 kills, all removed by the next write: {left}")


def test_a_live_writers_temporary_is_left_alone(tmp_path):
    path = tmp_path / "out.csv"
    live = tmp_path / f".out.csv.{os.getppid()}.abc.tmp"
    dead = tmp_path / f".out.csv.{_dead_pid()}.abc.tmp"
    other = tmp_path / f".other.csv.{_dead_pid()}.abc.tmp"
    for p in (live, dead, other):
        p.write_text("x")
    safefiles.write_atomic(path, b"data")
    assert live.exists() and other.exists() and not dead.exists()


# ---- outputs never destroy inputs


def test_a_data_file_named_like_an_output_is_never_replaced(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    data = out / "draws.csv"
    shutil.copy(ROOT / "models" / "eight_schools" / "eight_schools.csv", data)
    before = data.read_bytes()
    for extra in ([], ["--overwrite"]):
        rc, _, err = run_main(["fit", NONCENTERED, str(data), "--quiet", "--output", str(out),
                               *extra])  # fmt: skip
        assert rc == 2 and "which this fit reads" in err and "draws.csv" in err, err
    assert data.read_bytes() == before and sorted(os.listdir(out)) == ["draws.csv"]


def test_the_model_and_the_resumed_checkpoint_are_inputs_too(tmp_path):
    model = tmp_path / "summary.csv"
    shutil.copy(NONCENTERED, model)
    rc, _, err = run_main(["fit", str(model), SCHOOLS_JSON, "--output", str(tmp_path)])
    assert rc == 2 and "which this fit reads" in err
    ckpt = tmp_path / "out" / "fit.json"
    ckpt.parent.mkdir()
    ckpt.write_bytes(b"ppl-checkpoint/2 hmac-sha256\n")
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--method", "advi", "--resume",
                           str(ckpt), "--output", str(ckpt.parent)])  # fmt: skip
    assert rc == 2 and "which this fit reads" in err and "fit.json" in err


def test_output_dot_does_not_replace_the_users_summary_without_overwrite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("summary.csv").write_text("the user's own table\n")
    Path("notes.txt").write_text("keep me\n")
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--output", "."])
    assert rc == 2 and "summary.csv" in err and "ppl did not write" in err
    assert "--overwrite" in err and Path("summary.csv").read_text() == "the user's own table\n"
    assert not Path("draws.csv").exists()  # refused before the fit
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--output", ".",
                           "--overwrite"])  # fmt: skip
    assert rc == 0, err
    assert "mu" in Path("summary.csv").read_text()
    assert Path("notes.txt").read_text() == "keep me\n"
    assert ppl_files(".") == set(NAMES)
    # a second fit replaces ppl's own files without --overwrite; an edited one is the user's
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--output", "."])
    assert rc == 0, err
    with open("elbo.csv", "a") as f:
        f.write("my note\n")
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--output", "."])
    assert rc == 2 and "elbo.csv" in err and "summary.csv" not in err.split("holds")[1]


def test_checkpoint_over_a_file_that_is_not_a_checkpoint_needs_overwrite(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    argv = ["fit", NONCENTERED, SCHOOLS_JSON, "--method", "advi", "--quiet", "--iter", "200",
            "--checkpoint", str(notes)]  # fmt: skip
    rc, _, err = run_main(argv)
    assert rc == 2 and "is not a ppl checkpoint" in err and "--overwrite" in err
    assert notes.read_text() == "mine"
    rc, _, err = run_main([*argv, "--overwrite"])
    assert rc == 0, err
    assert notes.read_bytes().startswith(b"ppl-checkpoint/2")


def test_output_modes_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        write_all(str(tmp_path / "new"), {"summary.csv": "a\n"})
        write_all(str(tmp_path / "new"), {"summary.csv": "b\n"})  # swapped in
        (tmp_path / "shared").mkdir()
        (tmp_path / "shared" / "mine.txt").write_text("x")
        write_all(str(tmp_path / "shared"), {"summary.csv": "a\n"})  # file by file
    finally:
        os.umask(old)
    assert (tmp_path / "new").stat().st_mode & 0o777 == 0o750
    for d in ("new", "shared"):
        assert (tmp_path / d / "summary.csv").stat().st_mode & 0o777 == 0o640
    old = os.umask(0o002)
    try:
        write_all(str(tmp_path / "shared"), {"summary.csv": "c\n"})
    finally:
        os.umask(old)
    assert (tmp_path / "shared" / "summary.csv").stat().st_mode & 0o777 == 0o664


# ---- the output set as one unit under kill -9

_SETS = """
import sys
from ppl.outputs.files import write_all
i = 0
while True:
    i += 1
    write_all(sys.argv[1], {name: f"{i}\\n" * (1 + (i * 7919 + len(name)) % 50000)
                            for name in ("summary.csv", "draws.csv", "fit.json", "elbo.csv")})
"""


def test_kill_9_never_leaves_two_fits_mixed(tmp_path):
    """25 writers of ever-new output sets killed at random moments (the audit: a mix of two
    fits in 3 of 25): the directory always holds one set, with its manifest."""
    out = tmp_path / "fit"
    rng = np.random.default_rng(1)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for _ in range(25):
        writer = subprocess.Popen([sys.executable, "-c", _SETS, str(out)], env=env)
        deadline = time.monotonic() + 30
        while not (out / MANIFEST).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        ids = {(out / n).read_text().split("\n", 1)[0] for n in NAMES}
        assert len(ids) == 1, ids
        assert ppl_files(out) == set(NAMES)
    write_all(str(out), {name: "last\n" for name in NAMES})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit"]  # the leftovers removed


# ---- the checkpoint key


@ROOT_ONLY
def test_a_key_directory_another_user_owns_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    user_key()
    os.chown(tmp_path / "cache" / "ppl", 65534, 65534)
    with pytest.raises(CheckpointError, match="directory only you can change"):
        user_key()


@ROOT_ONLY
def test_a_cache_home_another_user_made_is_refused(tmp_path, monkeypatch):
    """XDG_CACHE_HOME in a shared place where another user made the directory first."""
    shared = tmp_path / "shared-cache"
    shared.mkdir(mode=0o777)
    os.chown(shared, 65534, 65534)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    with pytest.raises(CheckpointError, match="belongs to user id 65534"):
        user_key()


def test_a_key_reached_through_a_link_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache" / "ppl").mkdir(parents=True, mode=0o700)
    other = tmp_path / "some-private-file"
    other.write_bytes(b"k" * 64)
    os.chmod(other, 0o600)
    (tmp_path / "cache" / "ppl" / "checkpoint.key").symlink_to(other)
    with pytest.raises(CheckpointError):
        user_key()


def test_the_manifest_names_what_ppl_wrote(tmp_path):
    write_all(str(tmp_path / "o"), {"summary.csv": "a\n", "draws.csv": "b\n"})
    manifest = json.loads((tmp_path / "o" / MANIFEST).read_text())
    assert set(manifest["files"]) == {"summary.csv", "draws.csv"}
    assert ppl_files(tmp_path / "o") == {"summary.csv", "draws.csv"}


def test_the_api_save_keeps_the_same_rules(tmp_path):
    """Fit.save: never over the model or a data file; over others' files only with overwrite."""
    import ppl

    data = tmp_path / "draws.csv"
    shutil.copy(ROOT / "models" / "eight_schools" / "eight_schools.csv", data)
    fit = ppl.Model.from_file(NONCENTERED).fit(data)
    for overwrite in (False, True):
        with pytest.raises(ppl.PplError, match="which this fit reads"):
            fit.save(tmp_path, overwrite=overwrite)
    theirs = tmp_path / "o" / "fit.json"
    theirs.parent.mkdir()
    theirs.write_text("{}")
    with pytest.raises(ppl.PplError, match="fit.json, which ppl did not write"):
        fit.save(theirs.parent)
    assert theirs.read_text() == "{}"
    fit.save(theirs.parent, overwrite=True)
    assert ppl_files(theirs.parent) == set(NAMES)


def test_your_own_group_writable_cache_directory_is_made_private(tmp_path, monkeypatch):
    """~/.cache/ppl made by an older ppl under umask 002 (mode 0775) is tightened to 0700, not
    refused: it is yours."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache" / "ppl").mkdir(parents=True)
    os.chmod(tmp_path / "cache" / "ppl", 0o775)
    assert len(user_key()) >= 32
    assert (tmp_path / "cache" / "ppl").stat().st_mode & 0o777 == 0o700


def test_a_fifo_named_as_the_checkpoint_does_not_hang(tmp_path):
    from ppl.inference.checkpoint import check_target

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(CheckpointError, match="not a ppl checkpoint"):
        check_target(fifo, [])
