"""`ppl plot DIR`: the ELBO trace and the marginals as PNGs, with a reference drawn over them."""

from __future__ import annotations

import json

import pytest

from ppl.outputs.files import MANIFEST
from tests.cli.test_cli import run_main

pytest.importorskip("matplotlib")

SCHOOLS = ["models/eight_schools/noncentered.model", "models/eight_schools/eight_schools.json"]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit")
    rc, _, err = run_main(["fit", *SCHOOLS, "--quiet", "--method", "advi", "--output", str(out)])
    assert rc == 0, err
    return out


def test_plot_writes_the_elbo_and_one_png_per_parameter(fitted, tmp_path):
    reference = tmp_path / "ref.json"
    reference.write_text(
        json.dumps({"mean": {"mu": 4.4, "tau": 3.6}, "sd": {"mu": 3.3, "tau": 3.2}})
    )
    rc, out, err = run_main(["plot", str(fitted), "--reference", str(reference)])
    assert rc == 0, err
    info = json.loads((fitted / "fit.json").read_text())
    # every Stan variable: parameters, the transformed parameter theta, the generated y_rep
    expected = {"elbo.png", *(f"{name}.png" for name in [*info["families"], "theta", "y_rep"])}
    assert {line.split("/")[-1] for line in out.splitlines()} == expected
    for name in expected:
        assert (fitted / name).read_bytes()[:8] == PNG
    # no temporary files left (the manifest of the fit's outputs is not one)
    assert not [p for p in fitted.iterdir() if p.name.startswith(".") and p.name != MANIFEST]


def test_plot_writes_only_inside_the_directory(fitted, tmp_path):
    """A crafted draws.csv header or fit.json cannot name a file outside the directory."""
    crafted = tmp_path / "crafted"
    crafted.mkdir()
    for name in ("elbo.csv", "fit.json"):
        (crafted / name).write_bytes((fitted / name).read_bytes())
    info = json.loads((crafted / "fit.json").read_text())
    info["families"] = {"../escape": "x", "/tmp/abs": "y"}
    (crafted / "fit.json").write_text(json.dumps(info))
    (crafted / "draws.csv").write_text("../escape,/tmp/abs,ok\n1,2,3\n4,5,6\n")
    rc, out, err = run_main(["plot", str(crafted)])
    assert rc == 0, err
    assert sorted(p.name for p in crafted.glob("*.png")) == ["elbo.png", "ok.png"]
    assert not (tmp_path / "escape.png").exists()


def test_plot_without_an_elbo_trace(fitted, tmp_path):
    """A short --method svi fit may record no ELBO (elbo.csv: the header only): the marginals
    are still drawn, elbo.png is not (it was an internal error)."""
    short = tmp_path / "short"
    short.mkdir()
    for name in ("draws.csv", "fit.json"):
        (short / name).write_bytes((fitted / name).read_bytes())
    (short / "elbo.csv").write_text("iteration,elbo\n")
    rc, out, err = run_main(["plot", str(short)])
    assert rc == 0, err
    assert not (short / "elbo.png").exists() and (short / "mu.png").read_bytes()[:8] == PNG


def test_plot_errors_are_clear(fitted, tmp_path):
    rc, _, err = run_main(["plot", str(tmp_path)])
    assert rc == 2 and "no fit.json, elbo.csv, draws.csv here" in err
    unrelated = tmp_path / "ref.json"
    unrelated.write_text(json.dumps({"mean": {"alpha": 0.0}, "sd": {"alpha": 1.0}}))
    rc, _, err = run_main(["plot", str(fitted), "--reference", str(unrelated)])
    assert rc == 2 and "names none of the fit's parameters" in err
    unrelated.write_text("[1, 2]")
    rc, _, err = run_main(["plot", str(fitted), "--reference", str(unrelated)])
    assert rc == 2 and "no reference statistics found" in err
