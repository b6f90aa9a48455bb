"""Issue 32, the rest: in a directory that also holds the user's files, a write stopped between
its renames (a kill -9) is visible in the manifest and needs no --overwrite to be redone; `ppl
plot`'s images follow the outputs' rule and are recorded, so that a refit still replaces the
directory as one unit."""

from __future__ import annotations

import json
import os

import pytest

from ppl.outputs import files
from ppl.outputs.files import MANIFEST, NAMES, check_output, complete, ppl_files, write_all
from tests.cli.test_cli import NONCENTERED, SCHOOLS_JSON, run_main


def _set(tag: str) -> dict[str, str]:
    return {name: f"{tag} {name}\n" for name in NAMES}


def test_a_write_stopped_between_its_renames_is_marked_and_redone(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.txt").write_text("the user's\n")
    write_all(str(shared), _set("first"))
    assert complete(shared) and ppl_files(shared) == set(NAMES)
    real_replace, calls = os.replace, []

    def dies_after_two(src, dst):  # a kill -9 after the second rename, as far as files go
        calls.append(dst)
        if len(calls) > 2:
            raise KeyboardInterrupt("killed")
        real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", dies_after_two)
    with pytest.raises(KeyboardInterrupt):
        write_all(str(shared), _set("second"))
    monkeypatch.setattr(files.os, "replace", real_replace)
    tags = {(shared / n).read_text().split()[0] for n in NAMES}
    assert tags == {"first", "second"}  # two fits side by side: the case to be told
    assert not complete(shared)
    manifest = json.loads((shared / MANIFEST).read_text())
    assert manifest["complete"] is False
    assert all(len(manifest["files"][n]) == 2 for n in NAMES)  # the previous and the new
    assert ppl_files(shared) == set(NAMES)  # still ppl's: no --overwrite needed
    write_all(str(shared), _set("third"))
    assert complete(shared)
    assert {(shared / n).read_text().split()[0] for n in NAMES} == {"third"}
    assert (shared / "notes.txt").read_text() == "the user's\n"
    assert not [p for p in shared.iterdir() if p.name.endswith(".tmp")]


def test_an_old_manifest_without_the_mark_is_complete(tmp_path):
    write_all(str(tmp_path / "o"), _set("a"))
    manifest = json.loads((tmp_path / "o" / MANIFEST).read_text())
    del manifest["complete"]
    (tmp_path / "o" / MANIFEST).write_text(json.dumps(manifest))
    assert complete(tmp_path / "o") and ppl_files(tmp_path / "o") == set(NAMES)


def test_a_manifest_cannot_name_files_outside_the_directory(tmp_path):
    out = tmp_path / "o"
    write_all(str(out), _set("a"))
    manifest = json.loads((out / MANIFEST).read_text())
    outside = tmp_path / "secret.txt"
    outside.write_text("x")
    manifest["files"]["../secret.txt"] = files._digest(b"x")
    (out / MANIFEST).write_text(json.dumps(manifest))
    assert ppl_files(out) == set(NAMES)


pytest.importorskip("matplotlib")


def _fit(out) -> None:
    rc, _, err = run_main(["fit", NONCENTERED, SCHOOLS_JSON, "--quiet", "--method", "advi",
                           "--iter", "200", "--output", str(out)])  # fmt: skip
    assert rc == 0, err


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("fitted") / "fit"
    _fit(out)
    return out


def _copy(fitted, tmp_path):
    import shutil

    shutil.copytree(fitted, tmp_path / "fit")
    return tmp_path / "fit"


def test_plot_never_replaces_an_image_it_did_not_write(fitted, tmp_path):
    out = _copy(fitted, tmp_path)
    (out / "mu.png").write_bytes(b"my own picture")
    rc, stdout, err = run_main(["plot", str(out)])
    assert rc == 2 and "mu.png" in err and "ppl did not write" in err and "--overwrite" in err
    assert (out / "mu.png").read_bytes() == b"my own picture"
    assert not (out / "elbo.png").exists()  # nothing written: the check comes first
    rc, stdout, err = run_main(["plot", str(out), "--overwrite"])
    assert rc == 0, err
    assert (out / "mu.png").read_bytes()[:4] == b"\x89PNG"
    written = {line.split("/")[-1] for line in stdout.splitlines()}
    assert written <= ppl_files(out) and "mu.png" in written
    rc, _, err = run_main(["plot", str(out)])  # its own images now: replaced without a word
    assert rc == 0, err


def test_plot_never_replaces_its_reference(fitted, tmp_path):
    out = _copy(fitted, tmp_path)
    reference = out / "mu.png"  # an odd name for a reference, but the user's file
    reference.write_text(json.dumps({"mean": {"mu": 4.4}, "sd": {"mu": 3.3}}))
    rc, _, err = run_main(["plot", str(out), "--reference", str(reference), "--overwrite"])
    assert rc == 2 and "which this command reads" in err
    assert json.loads(reference.read_text())["mean"] == {"mu": 4.4}


def test_a_refit_after_plot_still_swaps_the_directory_as_one_unit(fitted, tmp_path):
    """The images are recorded as ppl's, so the directory holds only ppl's files: the refit's
    set takes its place in one step (before, the images made it a shared directory, renamed
    file by file), and the previous fit's images go with the previous set."""
    out = _copy(fitted, tmp_path)
    rc, stdout, err = run_main(["plot", str(out)])
    assert rc == 0, err
    assert "elbo.png" in ppl_files(out)
    assert check_output(str(out)) == "swap"
    _fit(out)
    assert sorted(p.name for p in out.iterdir()) == sorted([*NAMES, MANIFEST])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit"]


def test_a_variable_named_elbo_does_not_take_the_trace_s_image():
    from ppl.outputs.plots import _image_name

    images = {"elbo.png": b""}
    assert _image_name("elbo", images) == "_elbo.png"
    assert _image_name("mu", images) == "mu.png"
